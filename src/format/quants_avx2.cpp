// AVX2 + FMA + F16C kernels for the GGML block formats, picked at run time by quants.cpp.
//
// The library is built for baseline x86-64, so everything that uses these instructions lives between the
// target pragmas below, which give each function in that region __attribute__((target("avx2,fma,f16c"))).
// Headers are included before the region so no inline function shared with other files is compiled for AVX2
// here; the function that probes the CPU (avx2_kernels) is defined after it, so it runs on any x86-64.
//
// Structure: one decoder per block format turns a block into groups of 32 weights held as four __m256
// (elements off .. off+31 of the row) and hands them to a Sink. StoreSink writes them out (dequantize_row),
// DotSink multiplies them with x and accumulates in four independent float registers (dot_row). One decoder
// therefore serves both operations and the dot product never leaves registers.
//
// Exactness: a weight is either q * a (signed q: Q4_0, Q5_0, Q8_0, Q6_K, offset subtracted in integers first)
// or fma(q, a, b) with b the format's own addend (Q4_1/Q5_1 "+ m", K-quant "- dmin*mn"). In every format q *
// a is exact in float (see quants.cpp), so the fused multiply-add rounds once, where the format's definition
// does, and the floats are bit-identical to the scalar reference and the gguf package, signed zeros included.
// Folding the offset into the addend, fma(q, d, -8d), would also be exact but gives +0 where (q - 8) * d
// gives -0.
#include "base/cpu_features.h"
#include "base/fp16.h"
#include "base/isa_target.h"
#include "format/quants.h"
#include "format/quants_kernels.h"

#if TILELLM_ISA_COMPILES(AVX2)
#include <immintrin.h>

TILELLM_ISA_REGION_BEGIN(AVX2)

namespace tilellm::quant_detail {
namespace {

// F16C conversion: exact, subnormals included.
inline float half_at(const uint8_t* p) {
  return _cvtsh_ss(load_u16(p));
}

inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- Sinks: what to do with 32 decoded weights ----

struct StoreSink {
  float* y;
  void put(int64_t off, __m256 w0, __m256 w1, __m256 w2, __m256 w3) {
    _mm256_storeu_ps(y + off, w0);
    _mm256_storeu_ps(y + off + 8, w1);
    _mm256_storeu_ps(y + off + 16, w2);
    _mm256_storeu_ps(y + off + 24, w3);
  }
  void put1(int64_t i, float w) { y[i] = w; }
};

// Four accumulators (one per 8-element group of the 32) hide the FMA latency; element i always lands in lane
// i % 8 of accumulator (i / 8) % 4, so each rounding chain is n / 32 long.
struct DotSink {
  const float* x;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps();
  float tail = 0.0f;
  void put(int64_t off, __m256 w0, __m256 w1, __m256 w2, __m256 w3) {
    a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + off), a0);
    a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + off + 8), a1);
    a2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + off + 16), a2);
    a3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + off + 24), a3);
  }
  void put1(int64_t i, float w) { tail += w * x[i]; }
  float total() const { return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail; }
};

// ---- Integer -> weight helpers ----

inline __m256 u8x8_to_ps(__m128i v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
}

// 32 unsigned quants (bytes, elements 0..31) -> weights fma(q, a, b) = round(q * a + b), q * a exact.
template <class Sink>
inline void emit_u8x32(Sink& sink, int64_t off, __m256i q, __m256 a, __m256 b) {
  const __m128i first = _mm256_castsi256_si128(q), second = _mm256_extracti128_si256(q, 1);
  sink.put(off, _mm256_fmadd_ps(u8x8_to_ps(first), a, b),
           _mm256_fmadd_ps(u8x8_to_ps(_mm_unpackhi_epi64(first, first)), a, b),
           _mm256_fmadd_ps(u8x8_to_ps(second), a, b),
           _mm256_fmadd_ps(u8x8_to_ps(_mm_unpackhi_epi64(second, second)), a, b));
}

inline __m256 i8x8_to_ps(__m128i v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}

// 32 signed quants -> weights q * a0 (elements 0..15) and q * a1 (16..31).
template <class Sink>
inline void emit_i8x32(Sink& sink, int64_t off, __m256i q, __m256 a0, __m256 a1) {
  const __m128i first = _mm256_castsi256_si128(q), second = _mm256_extracti128_si256(q, 1);
  sink.put(off, _mm256_mul_ps(i8x8_to_ps(first), a0),
           _mm256_mul_ps(i8x8_to_ps(_mm_unpackhi_epi64(first, first)), a0),
           _mm256_mul_ps(i8x8_to_ps(second), a1),
           _mm256_mul_ps(i8x8_to_ps(_mm_unpackhi_epi64(second, second)), a1));
}

// Byte j of the result is 0xff when bit j of bits is set, else 0 (j < 32). Each byte first receives the
// source byte holding its bit (shuffle); then all bits but its own are forced on: 0xff iff its bit is set.
inline __m256i bits_to_bytes(uint32_t bits) {
  const __m256i src_byte = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), src_byte);
  const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
  return _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1));
}

// The 16 bytes of a 32-element nibble block as 32 bytes: low nibbles (elements 0..15), then high (16..31).
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i raw = load128(qs);
  const __m128i m = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m), _mm_and_si128(raw, m));
}

// ---- Block decoders ----

template <class Sink>
inline void block_q4_0(const uint8_t* b, int64_t off, Sink& sink) {
  const __m256 d = _mm256_set1_ps(half_at(b + offsetof(BlockQ4_0, d)));
  const __m256i q = _mm256_sub_epi8(nibbles32(b + offsetof(BlockQ4_0, qs)), _mm256_set1_epi8(8));
  emit_i8x32(sink, off, q, d, d);
}

template <class Sink>
inline void block_q4_1(const uint8_t* b, int64_t off, Sink& sink) {
  const __m256 a = _mm256_set1_ps(half_at(b + offsetof(BlockQ4_1, d)));
  const __m256 c = _mm256_set1_ps(half_at(b + offsetof(BlockQ4_1, m)));
  emit_u8x32(sink, off, nibbles32(b + offsetof(BlockQ4_1, qs)), a, c);
}

// Low nibbles with the fifth bit (bit j of qh for element j) added as 16.
inline __m256i q5_values(const uint8_t* qh, const uint8_t* qs) {
  const __m256i high = _mm256_and_si256(bits_to_bytes(load_u32(qh)), _mm256_set1_epi8(16));
  return _mm256_or_si256(nibbles32(qs), high);
}

template <class Sink>
inline void block_q5_0(const uint8_t* b, int64_t off, Sink& sink) {
  const __m256 d = _mm256_set1_ps(half_at(b + offsetof(BlockQ5_0, d)));
  const __m256i q = q5_values(b + offsetof(BlockQ5_0, qh), b + offsetof(BlockQ5_0, qs));
  emit_i8x32(sink, off, _mm256_sub_epi8(q, _mm256_set1_epi8(16)), d, d);
}

template <class Sink>
inline void block_q5_1(const uint8_t* b, int64_t off, Sink& sink) {
  const __m256 a = _mm256_set1_ps(half_at(b + offsetof(BlockQ5_1, d)));
  const __m256 c = _mm256_set1_ps(half_at(b + offsetof(BlockQ5_1, m)));
  emit_u8x32(sink, off, q5_values(b + offsetof(BlockQ5_1, qh), b + offsetof(BlockQ5_1, qs)), a, c);
}

template <class Sink>
inline void block_q8_0(const uint8_t* b, int64_t off, Sink& sink) {
  const __m256 d = _mm256_set1_ps(half_at(b + offsetof(BlockQ8_0, d)));
  emit_i8x32(sink, off, load256(b + offsetof(BlockQ8_0, qs)), d, d);
}

// Q4_K and Q5_K differ only in the fifth bit; kFive selects it. Sub-block s = 2g + h of 32 elements comes
// from the low (h = 0) or high (h = 1) nibbles of qs group g, with bit s of qh[l] on top for Q5_K.
template <bool kFive, class Sink>
inline void block_q45_k(const uint8_t* d_ptr, const uint8_t* scales, const uint8_t* qh, const uint8_t* qs,
                        int64_t off, Sink& sink) {
  const float d = half_at(d_ptr), dmin = half_at(d_ptr + 2);
  const __m256i m15 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
  __m256i hbits = kFive ? load256(qh) : _mm256_setzero_si256();  // shifted right by 2 per group
  for (int g = 0; g < 4; ++g) {
    const __m256i v = load256(qs + 32 * g);
    __m256i lo = _mm256_and_si256(v, m15);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m15);
    if (kFive) {
      // 16-bit shifts move bits across byte boundaries only into bits that the masks below discard.
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hbits, one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 1), one), 4));
      hbits = _mm256_srli_epi16(hbits, 2);
    }
    for (int h = 0; h < 2; ++h) {
      int sc, mn;
      k_scale_min(scales, 2 * g + h, &sc, &mn);
      const __m256 a = _mm256_set1_ps(d * static_cast<float>(sc));
      const __m256 c = _mm256_set1_ps(-(dmin * static_cast<float>(mn)));
      emit_u8x32(sink, off + 64 * g + 32 * h, h ? hi : lo, a, c);
    }
  }
}

template <class Sink>
inline void block_q4_k(const uint8_t* b, int64_t off, Sink& sink) {
  block_q45_k<false>(b, b + offsetof(BlockQ4_K, scales), nullptr, b + offsetof(BlockQ4_K, qs), off, sink);
}

template <class Sink>
inline void block_q5_k(const uint8_t* b, int64_t off, Sink& sink) {
  block_q45_k<true>(b, b + offsetof(BlockQ5_K, scales), b + offsetof(BlockQ5_K, qh),
                    b + offsetof(BlockQ5_K, qs), off, sink);
}

template <class Sink>
inline void block_q6_k(const uint8_t* b, int64_t off, Sink& sink) {
  const float d = half_at(b + offsetof(BlockQ6_K, d));
  const auto* scales = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales));
  const __m256i m15 = _mm256_set1_epi8(15);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b + offsetof(BlockQ6_K, ql) + 64 * half;
    const __m256i l0 = load256(ql), l1 = load256(ql + 32);
    const __m256i h = load256(b + offsetof(BlockQ6_K, qh) + 32 * half);
    // The four 32-element groups of the half (layout in quants.h); each shifted field is masked to its byte.
    const __m256i q[4] = {
        _mm256_or_si256(_mm256_and_si256(l0, m15),
                        _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(3)), 4)),
        _mm256_or_si256(_mm256_and_si256(l1, m15),
                        _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(12)), 2)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
                        _mm256_and_si256(h, _mm256_set1_epi8(48))),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
                        _mm256_srli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(static_cast<char>(0xc0))), 2)),
    };
    const int8_t* sc = scales + 8 * half;
    for (int k = 0; k < 4; ++k) {
      // (d * sc) * (q - 32), both products exact; the scale changes after 16 elements.
      const __m256 a0 = _mm256_set1_ps(d * static_cast<float>(sc[2 * k]));
      const __m256 a1 = _mm256_set1_ps(d * static_cast<float>(sc[2 * k + 1]));
      emit_i8x32(sink, off + 128 * half + 32 * k, _mm256_sub_epi8(q[k], _mm256_set1_epi8(32)), a0, a1);
    }
  }
}

// ---- Plain float rows ----

struct F32Loader {
  static __m256 load8(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static float load1(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static constexpr size_t kSize = 4;
};
struct F16Loader {
  static __m256 load8(const uint8_t* p) { return _mm256_cvtph_ps(load128(p)); }
  static float load1(const uint8_t* p) { return half_at(p); }
  static constexpr size_t kSize = 2;
};
struct BF16Loader {
  static __m256 load8(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
  }
  static float load1(const uint8_t* p) { return bf16_to_fp32(load_u16(p)); }
  static constexpr size_t kSize = 2;
};

template <class L, class Sink>
inline void plain_row(const uint8_t* row, int64_t n, Sink& sink) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const uint8_t* p = row + i * L::kSize;
    sink.put(i, L::load8(p), L::load8(p + 8 * L::kSize), L::load8(p + 16 * L::kSize),
             L::load8(p + 24 * L::kSize));
  }
  for (; i < n; ++i) sink.put1(i, L::load1(row + i * L::kSize));
}

template <class L>
void dequant_plain(const uint8_t* src, float* dst, int64_t n) {
  StoreSink s{dst};
  plain_row<L>(src, n, s);
}

template <class L>
float dot_plain(const uint8_t* row, const float* x, int64_t n) {
  DotSink s{x};
  plain_row<L>(row, n, s);
  return s.total();
}

// ---- Block rows ----

template <int64_t kBlock, size_t kBytes, void (*Block)(const uint8_t*, int64_t, StoreSink&)>
void dequant_blocks(const uint8_t* src, float* dst, int64_t n_blocks) {
  StoreSink s{dst};
  for (int64_t b = 0; b < n_blocks; ++b) Block(src + b * kBytes, b * kBlock, s);
}

template <int64_t kBlock, size_t kBytes, void (*Block)(const uint8_t*, int64_t, DotSink&)>
float dot_blocks(const uint8_t* row, const float* x, int64_t n_blocks) {
  DotSink s{x};
  for (int64_t b = 0; b < n_blocks; ++b) Block(row + b * kBytes, b * kBlock, s);
  return s.total();
}

#define TILELLM_BLOCK_KERNELS(block, bytes, fn)                                        \
  RowKernels {                                                                         \
    dequant_blocks<block, bytes, fn<StoreSink>>, dot_blocks<block, bytes, fn<DotSink>> \
  }

// ---- Dense inner loop of dot_row_multi: one decoded weight chunk against several vectors ----

// kV vectors at once, so each weight load feeds kV FMAs; two accumulators per vector keep 2 kV chains busy.
template <int kV>
inline void dot_f32_vectors(const float* w, int64_t n, const float* x, int64_t x_stride, float* y,
                            int64_t y_stride) {
  __m256 acc[kV][2];
  for (int v = 0; v < kV; ++v) acc[v][0] = acc[v][1] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = _mm256_loadu_ps(w + i), w1 = _mm256_loadu_ps(w + i + 8);
    for (int v = 0; v < kV; ++v) {
      acc[v][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + v * x_stride + i), acc[v][0]);
      acc[v][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + v * x_stride + i + 8), acc[v][1]);
    }
  }
  for (int v = 0; v < kV; ++v) {
    float tail = 0.0f;
    for (int64_t k = i; k < n; ++k) tail += w[k] * x[v * x_stride + k];
    y[v * y_stride] += hsum(_mm256_add_ps(acc[v][0], acc[v][1])) + tail;
  }
}

void dot_f32_accumulate_avx2(const float* w, int64_t n, const float* x, int64_t x_stride, int n_vec, float* y,
                             int64_t y_stride) {
  int j = 0;
  for (; j + 4 <= n_vec; j += 4)
    dot_f32_vectors<4>(w, n, x + j * x_stride, x_stride, y + j * y_stride, y_stride);
  for (; j < n_vec; ++j) dot_f32_vectors<1>(w, n, x + j * x_stride, x_stride, y + j * y_stride, y_stride);
}

const KernelTable kAvx2 = {
    "avx2",
    {
        {dequant_plain<F32Loader>, dot_plain<F32Loader>},
        {dequant_plain<F16Loader>, dot_plain<F16Loader>},
        {dequant_plain<BF16Loader>, dot_plain<BF16Loader>},
        TILELLM_BLOCK_KERNELS(32, sizeof(BlockQ4_0), block_q4_0),
        TILELLM_BLOCK_KERNELS(32, sizeof(BlockQ4_1), block_q4_1),
        TILELLM_BLOCK_KERNELS(32, sizeof(BlockQ5_0), block_q5_0),
        TILELLM_BLOCK_KERNELS(32, sizeof(BlockQ5_1), block_q5_1),
        TILELLM_BLOCK_KERNELS(32, sizeof(BlockQ8_0), block_q8_0),
        TILELLM_BLOCK_KERNELS(kQK_K, sizeof(BlockQ4_K), block_q4_k),
        TILELLM_BLOCK_KERNELS(kQK_K, sizeof(BlockQ5_K), block_q5_k),
        TILELLM_BLOCK_KERNELS(kQK_K, sizeof(BlockQ6_K), block_q6_k),
    },
    dot_f32_accumulate_avx2,
};

#undef TILELLM_BLOCK_KERNELS

}  // namespace
}  // namespace tilellm::quant_detail

TILELLM_ISA_REGION_END()
#endif

namespace tilellm::quant_detail {
// Outside the target region: this must run on CPUs without AVX.
TILELLM_ISA_PROVIDER(const KernelTable*, avx2_kernels, AVX2, &kAvx2)
}  // namespace tilellm::quant_detail
