// AVX2 + FMA + F16C kernels for quantized activations and integer dot products, picked at run time by
// quants_q8.cpp. Same arithmetic as the scalar reference there (block formulas in its file comment); only
// the order of the float accumulation differs.
//
// The library is built for baseline x86-64: everything that uses these instructions lives between the target
// pragmas below (as in quants_avx2.cpp). Headers are included before the region so that no inline function
// shared with other files is compiled for AVX2 here; the CPU probe is defined after it.
//
// Structure. Each weight format is a small struct with
//   Decoded  a group of weight blocks (four 32-element blocks, or one K-quant super-block) unpacked into
//            registers: integer quants as bytes, scales as floats;
//   decode() / apply(): unpack a group once; add its dot products with one activation row into an Acc.
// One driver runs every format: for up to four activation rows it decodes a group and applies it to each row
// while it is in registers; for more rows it decodes a chunk of groups into an L1-resident buffer and runs
// the rows over it four at a time, so every weight block is decoded exactly once per call. Grouping four
// 32-element blocks lets one F16C conversion and one multiply serve four blocks' scales.
//
// Integer dot products use vpmaddubsw (unsigned bytes x signed bytes -> pairwise int16 sums) followed by
// vpmaddwd (-> int32). vpmaddubsw saturates at +-32767; every operand range here keeps the pair sums below
// that: 4-bit and 5-bit weights (<= 31) and 6-bit Q6_K quants (<= 63) times |q8| <= 127 give at most
// 2 * 63 * 127 = 16002, and signed weights go through the sign trick (|w| <= 128 against sign-adjusted
// activations, |q8| <= 127, 2 * 128 * 127 = 32512). Activations from quantize_activations never hold -128.
#include <algorithm>
#include <cstring>

#include "format/fp16.h"
#include "format/quants.h"
#include "format/quants_kernels.h"
#include "format/quants_q8.h"
#include "format/quants_q8_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace tilellm::q8_detail {
namespace {

using quant_detail::load_u16;
using quant_detail::load_u32;

// The kernels are templates over formats and row counts; GCC's inliner gives up on their size unless told.
// Every helper on the hot path must be inlined into the kernel loops (a call passes vectors through memory).
#define TILELLM_HOT inline __attribute__((always_inline))

// ---- Small helpers ----

TILELLM_HOT float half_at(const uint8_t* p) {
  return _cvtsh_ss(load_u16(p));
}
TILELLM_HOT float float_at(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
TILELLM_HOT __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
TILELLM_HOT __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

TILELLM_HOT float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// sum of u[4k..4k+3] * s[4k..4k+3] in int32 lane k: u unsigned bytes, s signed bytes (exact; ranges above).
TILELLM_HOT __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// The 16 bytes of a 32-element nibble block as 32 bytes: low nibbles (elements 0..15) in the low half, high
// nibbles (16..31) in the high half. One 128-bit broadcast, a per-half shift of 0 or 4 bits, a mask.
TILELLM_HOT __m256i nibbles32(const uint8_t* qs) {
  const __m256i raw = _mm256_broadcastsi128_si256(load128(qs));
  return _mm256_and_si256(_mm256_srlv_epi64(raw, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(15));
}

// 16 in byte j when bit j of the 32-bit field is set, else 0: the fifth bit of Q5_0/Q5_1 quants. Byte j first
// receives byte j / 8 of the field (shuffle), then is tested against its own bit j % 8.
TILELLM_HOT __m256i fifth_bits(const uint8_t* qh) {
  const __m256i src_byte = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(load_u32(qh))), src_byte);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

// ---- Accumulator of one activation row ----

// v[0], v[1]: per-lane float sums of the scaled integer block sums (two, so that consecutive blocks do not
// wait on each other's fused multiply-add). m (Q4_1/Q5_1 only): the odd lanes sum m * s; the even lanes
// collect dx * dy products as a by-product of computing both in one multiply and are ignored. No default
// member initializers: the implicit constructor would sit outside the AVX2 target region.
struct Acc {
  __m256 v[2];
  __m256 m;
};

TILELLM_HOT Acc zero_acc() {
  return {{_mm256_setzero_ps(), _mm256_setzero_ps()}, _mm256_setzero_ps()};
}

TILELLM_HOT float finish(const Acc& a, const Acc& b) {
  const __m256 v = _mm256_add_ps(_mm256_add_ps(a.v[0], a.v[1]), _mm256_add_ps(b.v[0], b.v[1]));
  const __m256 m = _mm256_blend_ps(_mm256_setzero_ps(), _mm256_add_ps(a.m, b.m), 0xaa);
  return hsum(_mm256_add_ps(v, m));
}

// ---- Block scales, four blocks at a time ----
//
// The 32-element formats spend most of their instructions on scales, not quants: one half (or two) per
// weight block and per activation block to convert, a product, a broadcast. Converting the scales of four
// blocks with one F16C instruction and forming four products with one multiply keeps that work off the
// ports that the integer multiplies need. The products of two halves are exact in float.

// The 16-bit fields at p, p + stride, ... (count <= 4 of them) in 16-bit lanes 0..count-1 of a zeroed vector.
// With count a constant after inlining (full groups) the conditions disappear; lanes left zero convert to 0.
TILELLM_HOT __m128i gather_halves(const uint8_t* p, size_t stride, int count) {
  __m128i v = _mm_cvtsi32_si128(load_u16(p));
  if (count > 1) v = _mm_insert_epi16(v, load_u16(p + stride), 1);
  if (count > 2) v = _mm_insert_epi16(v, load_u16(p + 2 * stride), 2);
  if (count > 3) v = _mm_insert_epi16(v, load_u16(p + 3 * stride), 3);
  return v;
}
// The same for 32-bit fields (two adjacent halves: d and m, or d and s) in 32-bit lanes.
TILELLM_HOT __m128i gather_words(const uint8_t* p, size_t stride, int count) {
  __m128i v = _mm_cvtsi32_si128(static_cast<int>(load_u32(p)));
  if (count > 1) v = _mm_insert_epi32(v, static_cast<int>(load_u32(p + stride)), 1);
  if (count > 2) v = _mm_insert_epi32(v, static_cast<int>(load_u32(p + 2 * stride)), 2);
  if (count > 3) v = _mm_insert_epi32(v, static_cast<int>(load_u32(p + 3 * stride)), 3);
  return v;
}

// Lane k of v in every lane.
TILELLM_HOT __m256 lane(__m256 v, int k) {
  return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(k));
}

// ---- Weight formats ----
//
// Each format: kGroup blocks per Decoded; decode(b, count) unpacks count <= kGroup blocks starting at b;
// apply(x, y, count, acc) adds their dot products with the activation blocks starting at y.

constexpr int kGroup32 = 4;  // 32-element blocks per group

// Q4_0 and Q5_0 against Q8_0: sum (q - off) * y = sum q * y - sum off * y with the unsigned quants q, both
// halves by vpmaddubsw in int16 (|pair sums| <= 2 * 31 * 127 and 2 * 16 * 127, so the difference fits).
struct OffsetQuantDecoded {
  __m256i q[kGroup32];  // 0..31
  __m128 d;             // the blocks' d as floats
};

// Fmt::quants(block) unpacks one block's quants.
template <class Fmt>
TILELLM_HOT OffsetQuantDecoded decode_offset_quant(const uint8_t* b, int count) {
  constexpr size_t stride = Fmt::kW;
  OffsetQuantDecoded x;
  for (int k = 0; k < kGroup32; ++k)
    x.q[k] = k < count ? Fmt::quants(b + k * stride) : _mm256_setzero_si256();
  x.d = _mm_cvtph_ps(gather_halves(b, stride, count));
  return x;
}

template <int kOffset>
TILELLM_HOT void apply_offset_quant(const OffsetQuantDecoded& x, const uint8_t* y, int count, Acc& acc) {
  const __m256 scale = _mm256_castps128_ps256(
      _mm_mul_ps(x.d, _mm_cvtph_ps(gather_halves(y, sizeof(BlockQ8_0), count))));  // dx * dy per block
  for (int k = 0; k < kGroup32 && k < count; ++k) {
    const __m256i yq = load256(y + k * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs));
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(x.q[k], yq),
                                       _mm256_maddubs_epi16(_mm256_set1_epi8(kOffset), yq));
    const __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    acc.v[k & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), lane(scale, k), acc.v[k & 1]);
  }
}

struct FmtQ4_0 {
  static constexpr int kGroup = kGroup32;
  static constexpr size_t kW = sizeof(BlockQ4_0), kA = sizeof(BlockQ8_0);
  using Decoded = OffsetQuantDecoded;
  TILELLM_HOT static __m256i quants(const uint8_t* blk) { return nibbles32(blk + offsetof(BlockQ4_0, qs)); }
  TILELLM_HOT static Decoded decode(const uint8_t* b, int count) {
    return decode_offset_quant<FmtQ4_0>(b, count);
  }
  TILELLM_HOT static void apply(const Decoded& x, const uint8_t* y, int count, Acc& acc) {
    apply_offset_quant<8>(x, y, count, acc);
  }
};

struct FmtQ5_0 {
  static constexpr int kGroup = kGroup32;
  static constexpr size_t kW = sizeof(BlockQ5_0), kA = sizeof(BlockQ8_0);
  using Decoded = OffsetQuantDecoded;
  TILELLM_HOT static __m256i quants(const uint8_t* blk) {
    return _mm256_or_si256(nibbles32(blk + offsetof(BlockQ5_0, qs)),
                           fifth_bits(blk + offsetof(BlockQ5_0, qh)));
  }
  TILELLM_HOT static Decoded decode(const uint8_t* b, int count) {
    return decode_offset_quant<FmtQ5_0>(b, count);
  }
  TILELLM_HOT static void apply(const Decoded& x, const uint8_t* y, int count, Acc& acc) {
    apply_offset_quant<16>(x, y, count, acc);
  }
};

// Q8_0 against Q8_0: signed weights, so the sign trick: sum |w| * (y with w's sign).
struct SignedDecoded {
  __m256i abs_w[kGroup32];  // |w| as unsigned bytes (-128 becomes 128)
  __m256i w[kGroup32];      // w, for the signs
  __m128 d;
};

struct FmtQ8_0 {
  static constexpr int kGroup = kGroup32;
  static constexpr size_t kW = sizeof(BlockQ8_0), kA = sizeof(BlockQ8_0);
  using Decoded = SignedDecoded;
  TILELLM_HOT static Decoded decode(const uint8_t* b, int count) {
    SignedDecoded x;
    for (int k = 0; k < kGroup; ++k) {
      x.w[k] = k < count ? load256(b + k * kW + offsetof(BlockQ8_0, qs)) : _mm256_setzero_si256();
      x.abs_w[k] = _mm256_sign_epi8(x.w[k], x.w[k]);
    }
    x.d = _mm_cvtph_ps(gather_halves(b, kW, count));
    return x;
  }
  TILELLM_HOT static void apply(const Decoded& x, const uint8_t* y, int count, Acc& acc) {
    const __m256 scale = _mm256_castps128_ps256(_mm_mul_ps(x.d, _mm_cvtph_ps(gather_halves(y, kA, count))));
    for (int k = 0; k < kGroup && k < count; ++k) {
      const __m256i yq = load256(y + k * kA + offsetof(BlockQ8_0, qs));
      const __m256i s = dot_u8s8(x.abs_w[k], _mm256_sign_epi8(yq, x.w[k]));
      acc.v[k & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), lane(scale, k), acc.v[k & 1]);
    }
  }
};

// Q4_1 and Q5_1 against Q8_1: (dx * dy) * sum q * y + m * s.
struct OffsetDecoded {
  __m256i q[kGroup32];  // 0..31
  __m256 d_m;           // d_0, m_0, d_1, m_1, ... as floats
};

template <class Fmt>
TILELLM_HOT OffsetDecoded decode_offset(const uint8_t* b, int count) {
  constexpr size_t stride = Fmt::kW;
  OffsetDecoded x;
  for (int k = 0; k < kGroup32; ++k)
    x.q[k] = k < count ? Fmt::quants(b + k * stride) : _mm256_setzero_si256();
  x.d_m = _mm256_cvtph_ps(gather_words(b, stride, count));
  return x;
}

TILELLM_HOT void apply_offset(const OffsetDecoded& x, const uint8_t* y, int count, Acc& acc) {
  // [dx * dy, m * s] per block, both exact (half x half).
  const __m256 prod = _mm256_mul_ps(x.d_m, _mm256_cvtph_ps(gather_words(y, sizeof(BlockQ8_1), count)));
  acc.m = _mm256_add_ps(acc.m, prod);
  for (int k = 0; k < kGroup32 && k < count; ++k) {
    const __m256i s = dot_u8s8(x.q[k], load256(y + k * sizeof(BlockQ8_1) + offsetof(BlockQ8_1, qs)));
    acc.v[k & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), lane(prod, 2 * k), acc.v[k & 1]);
  }
}

struct FmtQ4_1 {
  static constexpr int kGroup = kGroup32;
  static constexpr size_t kW = sizeof(BlockQ4_1), kA = sizeof(BlockQ8_1);
  using Decoded = OffsetDecoded;
  TILELLM_HOT static __m256i quants(const uint8_t* blk) { return nibbles32(blk + offsetof(BlockQ4_1, qs)); }
  TILELLM_HOT static Decoded decode(const uint8_t* b, int count) { return decode_offset<FmtQ4_1>(b, count); }
  TILELLM_HOT static void apply(const Decoded& x, const uint8_t* y, int count, Acc& acc) {
    apply_offset(x, y, count, acc);
  }
};

struct FmtQ5_1 {
  static constexpr int kGroup = kGroup32;
  static constexpr size_t kW = sizeof(BlockQ5_1), kA = sizeof(BlockQ8_1);
  using Decoded = OffsetDecoded;
  TILELLM_HOT static __m256i quants(const uint8_t* blk) {
    return _mm256_or_si256(nibbles32(blk + offsetof(BlockQ5_1, qs)),
                           fifth_bits(blk + offsetof(BlockQ5_1, qh)));
  }
  TILELLM_HOT static Decoded decode(const uint8_t* b, int count) { return decode_offset<FmtQ5_1>(b, count); }
  TILELLM_HOT static void apply(const Decoded& x, const uint8_t* y, int count, Acc& acc) {
    apply_offset(x, y, count, acc);
  }
};

// Q4_K / Q5_K against Q8_K: (dx * dy) * sum_s sc_s * (q . y)_s - (dmin * dy) * sum_s mn_s * bsum_s.
// The integer sum over a super-block stays below 2^23 per lane (8 sub-blocks x 2 x 31 x 127 x 63), so its
// conversion to float is exact.
struct KDecoded {
  __m256i q[8];    // sub-block s = elements 32s .. 32s+31, quants 0..31
  __m256i scales;  // int16 sc_0..sc_7 in both 128-bit halves (broadcast per sub-block by a byte shuffle)
  __m256i mins;    // int16 mn_0, mn_0, mn_1, mn_1, ..., mn_7, mn_7: one per bsum (16 elements)
  float d, dmin;
};

// Byte shuffle that broadcasts int16 lane s of each 128-bit half.
TILELLM_HOT __m256i scale_broadcast(__m256i scales, int s) {
  const __m256i idx = _mm256_set1_epi16(static_cast<int16_t>((2 * s) | ((2 * s + 1) << 8)));
  return _mm256_shuffle_epi8(scales, idx);
}

// The 6-bit scales and mins of a Q4_K/Q5_K block (layout in quants.h), unpacked as 32-bit words: sc_0..3,
// sc_4..7, mn_0..3, mn_4..7, one byte each. For s >= 4 the low four bits come from byte s + 4 and the top two
// from bits 6..7 of byte s - 4 (scale) or byte s (min).
TILELLM_HOT void unpack_k_scales(const uint8_t* p, __m256i* scales, __m256i* mins) {
  const uint32_t u0 = load_u32(p), u1 = load_u32(p + 4), u2 = load_u32(p + 8);
  const uint32_t sc_lo = u0 & 0x3f3f3f3fu, mn_lo = u1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4);
  const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4);
  const __m128i sc =
      _mm_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), 0, 0));
  *scales = _mm256_broadcastsi128_si256(sc);
  const __m128i mn8 = _mm_setr_epi32(static_cast<int>(mn_lo), static_cast<int>(mn_hi), 0, 0);
  const __m128i dup = _mm_shuffle_epi8(mn8, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
  *mins = _mm256_cvtepu8_epi16(dup);
}

template <bool kFive>
TILELLM_HOT KDecoded decode_k45(const uint8_t* b, const uint8_t* scales, const uint8_t* qh,
                                const uint8_t* qs) {
  KDecoded x;
  x.d = half_at(b);
  x.dmin = half_at(b + 2);
  unpack_k_scales(scales, &x.scales, &x.mins);
  const __m256i m15 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
  __m256i hbits = kFive ? load256(qh) : _mm256_setzero_si256();  // shifted right by 2 per group
  for (int g = 0; g < 4; ++g) {
    const __m256i v = load256(qs + 32 * g);
    __m256i lo = _mm256_and_si256(v, m15);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m15);
    if (kFive) {
      // Bit s of qh[l] is the fifth bit of sub-block s. 16-bit shifts carry bits across bytes only into
      // positions that the mask with 1 discards.
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hbits, one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 1), one), 4));
      hbits = _mm256_srli_epi16(hbits, 2);
    }
    x.q[2 * g] = lo;
    x.q[2 * g + 1] = hi;
  }
  return x;
}

TILELLM_HOT void apply_k45(const KDecoded& x, const uint8_t* y, Acc& acc) {
  const uint8_t* yq = y + offsetof(BlockQ8_K, qs);
  __m256i sum = _mm256_setzero_si256();
  for (int s = 0; s < 8; ++s) {
    const __m256i p = _mm256_maddubs_epi16(x.q[s], load256(yq + 32 * s));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, scale_broadcast(x.scales, s)));
  }
  const __m256i mins = _mm256_madd_epi16(load256(y + offsetof(BlockQ8_K, bsums)), x.mins);
  const float dy = float_at(y + offsetof(BlockQ8_K, d));
  acc.v[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(x.d * dy), acc.v[0]);
  acc.v[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(-(x.dmin * dy)), acc.v[1]);
}

struct FmtQ4_K {
  static constexpr int kGroup = 1;
  static constexpr size_t kW = sizeof(BlockQ4_K), kA = sizeof(BlockQ8_K);
  using Decoded = KDecoded;
  TILELLM_HOT static Decoded decode(const uint8_t* b, int /*count*/) {
    return decode_k45<false>(b, b + offsetof(BlockQ4_K, scales), nullptr, b + offsetof(BlockQ4_K, qs));
  }
  TILELLM_HOT static void apply(const Decoded& x, const uint8_t* y, int /*count*/, Acc& acc) {
    apply_k45(x, y, acc);
  }
};

struct FmtQ5_K {
  static constexpr int kGroup = 1;
  static constexpr size_t kW = sizeof(BlockQ5_K), kA = sizeof(BlockQ8_K);
  using Decoded = KDecoded;
  TILELLM_HOT static Decoded decode(const uint8_t* b, int /*count*/) {
    return decode_k45<true>(b, b + offsetof(BlockQ5_K, scales), b + offsetof(BlockQ5_K, qh),
                            b + offsetof(BlockQ5_K, qs));
  }
  TILELLM_HOT static void apply(const Decoded& x, const uint8_t* y, int /*count*/, Acc& acc) {
    apply_k45(x, y, acc);
  }
};

// Q6_K against Q8_K: (dx * dy) * (sum_k sc_k * (q . y)_k - 32 * sum_k sc_k * bsum_k), q = 0..63 unsigned so
// that vpmaddubsw applies; the offset 32 comes back through the bsums. Lanes reach 2^25, so the conversion
// to float may round once (counted in the test's bound).
struct Q6Decoded {
  __m256i q[8];        // 32-element chunk c = 4 * half + k (layout in quants.h), quants 0..63
  __m256i scales[8];   // int16: scale 2c in the low 8 lanes, 2c + 1 in the high 8 (16 elements each)
  __m256i all_scales;  // int16 sc_0 .. sc_15, one per bsum
  float d;
};

struct FmtQ6_K {
  static constexpr int kGroup = 1;
  static constexpr size_t kW = sizeof(BlockQ6_K), kA = sizeof(BlockQ8_K);
  using Decoded = Q6Decoded;
  TILELLM_HOT static Decoded decode(const uint8_t* b, int /*count*/) {
    Q6Decoded x;
    x.d = half_at(b + offsetof(BlockQ6_K, d));
    const __m128i sc8 = load128(b + offsetof(BlockQ6_K, scales));
    x.all_scales = _mm256_cvtepi8_epi16(sc8);
    for (int c = 0; c < 8; ++c) {
      const __m128i pick = _mm_or_si128(_mm_set1_epi8(static_cast<char>(2 * c)),
                                        _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
      x.scales[c] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick));
    }
    const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b + offsetof(BlockQ6_K, ql) + 64 * h;
      const __m256i l0 = load256(ql), l1 = load256(ql + 32);
      const __m256i qh = load256(b + offsetof(BlockQ6_K, qh) + 32 * h);
      // Each 2-bit field of qh is masked to its byte before the 16-bit shift moves it to bits 4..5.
      x.q[4 * h + 0] =
          _mm256_or_si256(_mm256_and_si256(l0, m15), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
      x.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m15),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
      x.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
      x.q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
    }
    return x;
  }
  TILELLM_HOT static void apply(const Decoded& x, const uint8_t* y, int /*count*/, Acc& acc) {
    const uint8_t* yq = y + offsetof(BlockQ8_K, qs);
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const __m256i p = _mm256_maddubs_epi16(x.q[c], load256(yq + 32 * c));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, x.scales[c]));
    }
    const __m256i offset = _mm256_madd_epi16(load256(y + offsetof(BlockQ8_K, bsums)), x.all_scales);
    sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
    const float dy = float_at(y + offsetof(BlockQ8_K, d));
    acc.v[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(x.d * dy), acc.v[0]);
  }
};

// ---- Driver: rows of blocks against up to four activation rows ----

// Adds to out[v] (v < kNV) the dot product of blocks [0, n_blocks) with activation row a[v]. src.get(b,
// count) returns the group of count blocks starting at block b (b a multiple of the group size), decoded from
// the row or read from a chunk buffer. Consecutive groups alternate between two accumulators per row.
template <class Fmt, int kNV, class Source>
TILELLM_HOT void accumulate(const Source& src, int64_t n_blocks, const uint8_t* const* a, float* out) {
  constexpr int G = Fmt::kGroup;
  Acc acc[kNV][2];
  for (int v = 0; v < kNV; ++v) acc[v][0] = acc[v][1] = zero_acc();
  int64_t b = 0;
  for (; b + 2 * G <= n_blocks; b += 2 * G) {
    {
      const auto& x = src.get(b, G);
      for (int v = 0; v < kNV; ++v) Fmt::apply(x, a[v] + b * Fmt::kA, G, acc[v][0]);
    }
    {
      const auto& x = src.get(b + G, G);
      for (int v = 0; v < kNV; ++v) Fmt::apply(x, a[v] + (b + G) * Fmt::kA, G, acc[v][1]);
    }
  }
  for (; b < n_blocks; b += G) {  // at most two groups, the last one possibly partial
    const int count = static_cast<int>(std::min<int64_t>(G, n_blocks - b));
    const auto& x = src.get(b, count);
    for (int v = 0; v < kNV; ++v) Fmt::apply(x, a[v] + b * Fmt::kA, count, acc[v][0]);
  }
  for (int v = 0; v < kNV; ++v) out[v] += finish(acc[v][0], acc[v][1]);
}

// Where accumulate() takes its decoded groups from: the weight row itself, or a chunk buffer.
template <class Fmt>
struct RowSource {
  const uint8_t* row;
  TILELLM_HOT typename Fmt::Decoded get(int64_t b, int count) const {
    return Fmt::decode(row + b * Fmt::kW, count);
  }
};
template <class Fmt>
struct BufferSource {
  const typename Fmt::Decoded* buf;  // groups of the chunk; b is relative to the chunk start
  TILELLM_HOT const typename Fmt::Decoded& get(int64_t b, int) const { return buf[b / Fmt::kGroup]; }
};

template <class Fmt, int kNV>
void direct(const uint8_t* row, int64_t n_blocks, const uint8_t* xq, size_t xq_stride, float* y,
            int64_t y_stride) {
  const uint8_t* a[kNV];
  float out[kNV] = {};
  for (int v = 0; v < kNV; ++v) a[v] = xq + v * xq_stride;
  accumulate<Fmt, kNV>(RowSource<Fmt>{row}, n_blocks, a, out);
  for (int v = 0; v < kNV; ++v) y[v * y_stride] = out[v];
}

// buf holds the groups of blocks [0, len) of a chunk; y accumulates.
template <class Fmt, int kNV>
void from_buffer(const typename Fmt::Decoded* buf, int64_t len, const uint8_t* xq, size_t xq_stride, float* y,
                 int64_t y_stride) {
  const uint8_t* a[kNV];
  float out[kNV];
  for (int v = 0; v < kNV; ++v) {
    a[v] = xq + v * xq_stride;
    out[v] = y[v * y_stride];
  }
  accumulate<Fmt, kNV>(BufferSource<Fmt>{buf}, len, a, out);
  for (int v = 0; v < kNV; ++v) y[v * y_stride] = out[v];
}

template <class Fmt>
void dot_kernel(const uint8_t* row, int64_t n_blocks, const uint8_t* xq, size_t xq_stride, int n_vec,
                float* y, int64_t y_stride) {
  switch (n_vec) {
    case 1:
      return direct<Fmt, 1>(row, n_blocks, xq, xq_stride, y, y_stride);
    case 2:
      return direct<Fmt, 2>(row, n_blocks, xq, xq_stride, y, y_stride);
    case 3:
      return direct<Fmt, 3>(row, n_blocks, xq, xq_stride, y, y_stride);
    case 4:
      return direct<Fmt, 4>(row, n_blocks, xq, xq_stride, y, y_stride);
    default:
      break;
  }
  // More rows than one register group: decode a chunk once (4-10 KiB, L1-resident), then run the rows over
  // it four at a time. y accumulates one partial sum per chunk.
  constexpr int64_t kGroups = sizeof(typename Fmt::Decoded) > 256 ? 16 : 32;
  constexpr int64_t kChunk = kGroups * Fmt::kGroup;  // blocks
  typename Fmt::Decoded buf[kGroups];
  for (int j = 0; j < n_vec; ++j) y[j * y_stride] = 0.0f;
  for (int64_t c0 = 0; c0 < n_blocks; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n_blocks - c0);
    for (int64_t b = 0; b < len; b += Fmt::kGroup) {
      buf[b / Fmt::kGroup] =
          Fmt::decode(row + (c0 + b) * Fmt::kW, static_cast<int>(std::min<int64_t>(Fmt::kGroup, len - b)));
    }
    const uint8_t* a0 = xq + c0 * Fmt::kA;
    int j = 0;
    for (; j + 4 <= n_vec; j += 4) {
      from_buffer<Fmt, 4>(buf, len, a0 + j * xq_stride, xq_stride, y + j * y_stride, y_stride);
    }
    switch (n_vec - j) {
      case 3:
        from_buffer<Fmt, 3>(buf, len, a0 + j * xq_stride, xq_stride, y + j * y_stride, y_stride);
        break;
      case 2:
        from_buffer<Fmt, 2>(buf, len, a0 + j * xq_stride, xq_stride, y + j * y_stride, y_stride);
        break;
      case 1:
        from_buffer<Fmt, 1>(buf, len, a0 + j * xq_stride, xq_stride, y + j * y_stride, y_stride);
        break;
      default:
        break;
    }
  }
}

// ---- Plain float weights: F32 x F32, F16 x F16, BF16 x BF16 ----

struct LoadF32 {
  static constexpr size_t kSize = 4;
  static __m256 load8(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static float load1(const uint8_t* p) { return float_at(p); }
};
struct LoadF16 {
  static constexpr size_t kSize = 2;
  static __m256 load8(const uint8_t* p) { return _mm256_cvtph_ps(load128(p)); }
  static float load1(const uint8_t* p) { return half_at(p); }
};
struct LoadBF16 {
  static constexpr size_t kSize = 2;
  static __m256 load8(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
  }
  static float load1(const uint8_t* p) { return bf16_to_fp32(load_u16(p)); }
};

// kNV rows at once, each weight vector loaded once; two accumulators per row over 16 elements per step.
template <class L, int kNV>
void plain_group(const uint8_t* w, int64_t n, const uint8_t* xq, size_t xq_stride, float* y,
                 int64_t y_stride) {
  __m256 acc[kNV][2];
  for (int v = 0; v < kNV; ++v) acc[v][0] = acc[v][1] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = L::load8(w + i * L::kSize), w1 = L::load8(w + (i + 8) * L::kSize);
    for (int v = 0; v < kNV; ++v) {
      const uint8_t* a = xq + v * xq_stride + i * L::kSize;
      acc[v][0] = _mm256_fmadd_ps(w0, L::load8(a), acc[v][0]);
      acc[v][1] = _mm256_fmadd_ps(w1, L::load8(a + 8 * L::kSize), acc[v][1]);
    }
  }
  for (int v = 0; v < kNV; ++v) {
    float tail = 0.0f;
    const uint8_t* a = xq + v * xq_stride;
    for (int64_t k = i; k < n; ++k) tail += L::load1(w + k * L::kSize) * L::load1(a + k * L::kSize);
    y[v * y_stride] = hsum(_mm256_add_ps(acc[v][0], acc[v][1])) + tail;
  }
}

template <class L>
void dot_plain(const uint8_t* row, int64_t n, const uint8_t* xq, size_t xq_stride, int n_vec, float* y,
               int64_t y_stride) {
  int j = 0;
  for (; j + 4 <= n_vec; j += 4)
    plain_group<L, 4>(row, n, xq + j * xq_stride, xq_stride, y + j * y_stride, y_stride);
  for (; j < n_vec; ++j) plain_group<L, 1>(row, n, xq + j * xq_stride, xq_stride, y + j * y_stride, y_stride);
}

// ---- Activation quantizers (bit-exact with the scalar ones in quants_q8.cpp) ----

TILELLM_HOT __m256 abs_ps(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}
TILELLM_HOT float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Rounds 32 floats times id to nearest even (cvtps2dq in the default rounding mode, as std::nearbyint) and
// stores them as int8 in element order. Values are within +-127 by construction, so the saturating packs
// never saturate except where the Q8_K rule clamps at 127 anyway. Returns the 8 int32 partial sums.
TILELLM_HOT __m256i round_store32(const float* x, __m256 id, uint8_t* out) {
  const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
  const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
  const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), id));
  const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), id));
  // packs work per 128-bit half: bytes end up in 4-element groups ordered 0 2 4 6 1 3 5 7 (group = 4
  // elements); the dword permute restores element order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  return _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
}

template <bool kSum>
void quantize_q8_01(const float* x, uint8_t* out, int64_t n_blocks) {
  constexpr size_t kBytes = kSum ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  constexpr size_t kQs = kSum ? offsetof(BlockQ8_1, qs) : offsetof(BlockQ8_0, qs);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + 32 * b;
    uint8_t* ob = out + b * kBytes;
    __m256 m = _mm256_max_ps(abs_ps(_mm256_loadu_ps(xb)), abs_ps(_mm256_loadu_ps(xb + 8)));
    m = _mm256_max_ps(m, _mm256_max_ps(abs_ps(_mm256_loadu_ps(xb + 16)), abs_ps(_mm256_loadu_ps(xb + 24))));
    const float amax = hmax(m);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256i sums = round_store32(xb, _mm256_set1_ps(id), ob + kQs);
    const uint16_t dh = fp32_to_fp16(d);
    std::memcpy(ob, &dh, 2);
    if constexpr (kSum) {
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
      const uint16_t sh = fp32_to_fp16(d * static_cast<float>(_mm_cvtsi128_si32(s4)));
      std::memcpy(ob + offsetof(BlockQ8_1, s), &sh, 2);
    }
  }
}

void quantize_q8_k(const float* x, uint8_t* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + 256 * b;
    uint8_t* ob = out + b * sizeof(BlockQ8_K);
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 256; j += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(xb + j)));
    const float amax = hmax(m);
    float d = 0.0f;
    int8_t qs[256];
    int16_t bsums[16] = {};
    if (amax == 0.0f) {
      std::memset(qs, 0, sizeof qs);
    } else {
      // The sign comes from the first element of largest magnitude.
      const __m256 target = _mm256_set1_ps(amax);
      int first = 0;
      for (int j = 0; j < 256; j += 8) {
        const int mask =
            _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(xb + j)), target, _CMP_EQ_OQ));
        if (mask) {
          first = j + __builtin_ctz(static_cast<unsigned>(mask));
          break;
        }
      }
      const float iscale = -127.0f / xb[first];
      const __m256 is = _mm256_set1_ps(iscale);
      for (int j = 0; j < 256; j += 32) round_store32(xb + j, is, reinterpret_cast<uint8_t*>(qs + j));
      for (int k = 0; k < 16; ++k) {
        int s = 0;
        for (int l = 0; l < 16; ++l) s += qs[16 * k + l];
        bsums[k] = static_cast<int16_t>(s);
      }
      d = 1.0f / iscale;
    }
    std::memcpy(ob + offsetof(BlockQ8_K, d), &d, sizeof d);
    std::memcpy(ob + offsetof(BlockQ8_K, qs), qs, sizeof qs);
    std::memcpy(ob + offsetof(BlockQ8_K, bsums), bsums, sizeof bsums);
  }
}

void quantize_f32(const float* x, uint8_t* out, int64_t n) {
  std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
}

void quantize_f16(const float* x, uint8_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  for (; i < n; ++i) {
    const uint16_t h = fp32_to_fp16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void quantize_bf16(const float* x, uint8_t* out, int64_t n) {
  // fp32_to_bf16 is integer-only; this loop vectorizes under the AVX2 target.
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_bf16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

const Q8KernelTable kAvx2 = {
    "avx2",
    {quantize_f32, quantize_f16, quantize_bf16, quantize_q8_01<false>, quantize_q8_01<true>, quantize_q8_k},
    {
        dot_plain<LoadF32>,
        dot_plain<LoadF16>,
        dot_plain<LoadBF16>,
        dot_kernel<FmtQ4_0>,
        dot_kernel<FmtQ4_1>,
        dot_kernel<FmtQ5_0>,
        dot_kernel<FmtQ5_1>,
        dot_kernel<FmtQ8_0>,
        dot_kernel<FmtQ4_K>,
        dot_kernel<FmtQ5_K>,
        dot_kernel<FmtQ6_K>,
    },
};

#undef TILELLM_HOT

}  // namespace
}  // namespace tilellm::q8_detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace tilellm::q8_detail {

// Outside the target region: this must run on CPUs without AVX. __builtin_cpu_supports also checks that the
// OS saves the YMM registers; F16C is read from CPUID because not every compiler's builtin knows it.
const Q8KernelTable* avx2_q8_kernels() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  const bool ok = f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok ? &kAvx2 : nullptr;
}

}  // namespace tilellm::q8_detail

#else  // not x86

namespace tilellm::q8_detail {
const Q8KernelTable* avx2_q8_kernels() {
  return nullptr;
}
}  // namespace tilellm::q8_detail

#endif
