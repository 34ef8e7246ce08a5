// ARMv8-A Advanced SIMD kernels for the GGML block formats, picked at run time by quants.cpp on AArch64.
//
// Advanced SIMD is part of every AArch64 CPU, so unlike quants_avx2.cpp no target region is needed: the file
// compiles for the baseline and the table is always available there. On other architectures it only defines
// neon_kernels(), returning nullptr.
//
// Structure (as in quants_avx2.cpp): one decoder per block format turns a block into groups of 32 weights
// held as eight float32x4_t (elements off .. off+31 of the row) and hands them to a Sink. StoreSink writes
// them out (dequantize_row), DotSink multiplies them with x and accumulates in four independent float
// registers (dot_row). One decoder therefore serves both operations and the dot product never leaves
// registers.
//
// Exactness: a weight is either q * a (signed q: Q4_0, Q5_0, Q8_0, Q6_K, offset subtracted in integers first)
// or fma(q, a, b) with b the format's own addend (Q4_1/Q5_1 "+ m", K-quant "- dmin*mn"). In every format q *
// a is exact in float (see quants.cpp), so the fused multiply-add (FMLA) rounds once, where the format's
// definition does, and the floats are bit-identical to the scalar reference and the gguf package, signed
// zeros included. Halves are converted by FCVTL, which is exact, subnormals included.
#include "base/cpu_features.h"
#include "base/fp16.h"
#include "base/isa_target.h"
#include "format/quants.h"
#include "format/quants_kernels.h"

#if TILELLM_ISA_COMPILES(NEON)
#include <arm_neon.h>

namespace tilellm::quant_detail {
namespace {

inline float half_at(const uint8_t* p) {
  __fp16 h;
  std::memcpy(&h, p, sizeof h);
  return static_cast<float>(h);
}

// Loads through byte pointers: LD1 has no alignment requirement, and rows come straight from a mapped file.
inline float32x4_t load_f32x4(const uint8_t* p) {
  return vreinterpretq_f32_u8(vld1q_u8(p));
}

// ---- Sinks: what to do with 32 decoded weights ----

struct StoreSink {
  float* y;
  void put(int64_t off, const float32x4_t* w) {
    for (int k = 0; k < 8; ++k) vst1q_f32(y + off + 4 * k, w[k]);
  }
  void put1(int64_t i, float w) { y[i] = w; }
};

// Four accumulators hide the FMLA latency; element i always lands in lane i % 4 of accumulator (i / 4) % 4,
// so each rounding chain is n / 16 long.
struct DotSink {
  const float* x;
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  float tail = 0.0f;
  void put(int64_t off, const float32x4_t* w) {
    for (int k = 0; k < 8; ++k) acc[k & 3] = vfmaq_f32(acc[k & 3], w[k], vld1q_f32(x + off + 4 * k));
  }
  void put1(int64_t i, float w) { tail += w * x[i]; }
  float total() const {
    return vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]))) + tail;
  }
};

// ---- Integer -> weight helpers ----

// 16 unsigned quants -> weights fma(q, a, b) = round(q * a + b), q * a exact; out[0..3] in element order.
inline void fma_u8x16(uint8x16_t q, float32x4_t a, float32x4_t b, float32x4_t* out) {
  const uint16x8_t lo = vmovl_u8(vget_low_u8(q)), hi = vmovl_high_u8(q);
  out[0] = vfmaq_f32(b, vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo))), a);
  out[1] = vfmaq_f32(b, vcvtq_f32_u32(vmovl_high_u16(lo)), a);
  out[2] = vfmaq_f32(b, vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi))), a);
  out[3] = vfmaq_f32(b, vcvtq_f32_u32(vmovl_high_u16(hi)), a);
}

// 16 signed quants -> weights q * a.
inline void mul_s8x16(int8x16_t q, float32x4_t a, float32x4_t* out) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
  out[0] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), a);
  out[1] = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), a);
  out[2] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), a);
  out[3] = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), a);
}

// 32 signed quants q[0] (elements 0..15), q[1] (16..31) -> weights q * a0, q * a1.
template <class Sink>
inline void emit_s8x32(Sink& sink, int64_t off, const int8x16_t* q, float32x4_t a0, float32x4_t a1) {
  float32x4_t w[8];
  mul_s8x16(q[0], a0, w);
  mul_s8x16(q[1], a1, w + 4);
  sink.put(off, w);
}

// 32 unsigned quants -> weights fma(q, a, b).
template <class Sink>
inline void emit_u8x32(Sink& sink, int64_t off, const uint8x16_t* q, float32x4_t a, float32x4_t b) {
  float32x4_t w[8];
  fma_u8x16(q[0], a, b, w);
  fma_u8x16(q[1], a, b, w + 4);
  sink.put(off, w);
}

// The 16 bytes of a 32-element nibble block: low nibbles (elements 0..15) in q[0], high (16..31) in q[1].
inline void nibbles32(const uint8_t* qs, uint8x16_t* q) {
  const uint8x16_t raw = vld1q_u8(qs);
  q[0] = vandq_u8(raw, vdupq_n_u8(15));
  q[1] = vshrq_n_u8(raw, 4);
}

// Adds the fifth bit of Q5_0/Q5_1 quants (16 where bit j of the little-endian 32-bit field is set): byte j of
// q[0] takes field byte j / 8, byte j of q[1] field byte 2 + j / 8, each tested against its own bit j % 8.
inline void add_fifth_bits(const uint8_t* qh, uint8x16_t* q) {
  const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
  const uint8x16_t sixteen = vdupq_n_u8(16);
  const uint8x16_t lo = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
  const uint8x16_t hi = vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3]));
  q[0] = vorrq_u8(q[0], vandq_u8(vtstq_u8(lo, bit), sixteen));
  q[1] = vorrq_u8(q[1], vandq_u8(vtstq_u8(hi, bit), sixteen));
}

// Unsigned quants minus an offset, as signed bytes (no overflow: quants <= 63, offset <= 32).
inline void to_signed(const uint8x16_t* u, int offset, int8x16_t* q) {
  for (int k = 0; k < 2; ++k)
    q[k] = vsubq_s8(vreinterpretq_s8_u8(u[k]), vdupq_n_s8(static_cast<int8_t>(offset)));
}

// ---- Block decoders ----

template <class Sink>
inline void block_q4_0(const uint8_t* b, int64_t off, Sink& sink) {
  const float32x4_t d = vdupq_n_f32(half_at(b + offsetof(BlockQ4_0, d)));
  uint8x16_t u[2];
  int8x16_t q[2];
  nibbles32(b + offsetof(BlockQ4_0, qs), u);
  to_signed(u, 8, q);
  emit_s8x32(sink, off, q, d, d);
}

template <class Sink>
inline void block_q4_1(const uint8_t* b, int64_t off, Sink& sink) {
  const float32x4_t a = vdupq_n_f32(half_at(b + offsetof(BlockQ4_1, d)));
  const float32x4_t c = vdupq_n_f32(half_at(b + offsetof(BlockQ4_1, m)));
  uint8x16_t u[2];
  nibbles32(b + offsetof(BlockQ4_1, qs), u);
  emit_u8x32(sink, off, u, a, c);
}

template <class Sink>
inline void block_q5_0(const uint8_t* b, int64_t off, Sink& sink) {
  const float32x4_t d = vdupq_n_f32(half_at(b + offsetof(BlockQ5_0, d)));
  uint8x16_t u[2];
  int8x16_t q[2];
  nibbles32(b + offsetof(BlockQ5_0, qs), u);
  add_fifth_bits(b + offsetof(BlockQ5_0, qh), u);
  to_signed(u, 16, q);
  emit_s8x32(sink, off, q, d, d);
}

template <class Sink>
inline void block_q5_1(const uint8_t* b, int64_t off, Sink& sink) {
  const float32x4_t a = vdupq_n_f32(half_at(b + offsetof(BlockQ5_1, d)));
  const float32x4_t c = vdupq_n_f32(half_at(b + offsetof(BlockQ5_1, m)));
  uint8x16_t u[2];
  nibbles32(b + offsetof(BlockQ5_1, qs), u);
  add_fifth_bits(b + offsetof(BlockQ5_1, qh), u);
  emit_u8x32(sink, off, u, a, c);
}

template <class Sink>
inline void block_q8_0(const uint8_t* b, int64_t off, Sink& sink) {
  const float32x4_t d = vdupq_n_f32(half_at(b + offsetof(BlockQ8_0, d)));
  const int8x16_t q[2] = {vreinterpretq_s8_u8(vld1q_u8(b + offsetof(BlockQ8_0, qs))),
                          vreinterpretq_s8_u8(vld1q_u8(b + offsetof(BlockQ8_0, qs) + 16))};
  emit_s8x32(sink, off, q, d, d);
}

// Q4_K and Q5_K differ only in the fifth bit; kFive selects it. Sub-block s = 2g + h of 32 elements comes
// from the low (h = 0) or high (h = 1) nibbles of qs group g, with bit s of qh[l] on top for Q5_K.
template <bool kFive, class Sink>
inline void block_q45_k(const uint8_t* d_ptr, const uint8_t* scales, const uint8_t* qh, const uint8_t* qs,
                        int64_t off, Sink& sink) {
  const float d = half_at(d_ptr), dmin = half_at(d_ptr + 2);
  const uint8x16_t sixteen = vdupq_n_u8(16);
  uint8x16_t hbits[2] = {};
  if (kFive) {
    hbits[0] = vld1q_u8(qh);
    hbits[1] = vld1q_u8(qh + 16);
  }
  for (int g = 0; g < 4; ++g) {
    uint8x16_t lo[2], hi[2];
    for (int i = 0; i < 2; ++i) {
      const uint8x16_t v = vld1q_u8(qs + 32 * g + 16 * i);
      lo[i] = vandq_u8(v, vdupq_n_u8(15));
      hi[i] = vshrq_n_u8(v, 4);
      if (kFive) {
        const uint8x16_t bit_lo = vdupq_n_u8(static_cast<uint8_t>(1u << (2 * g)));
        const uint8x16_t bit_hi = vdupq_n_u8(static_cast<uint8_t>(2u << (2 * g)));
        lo[i] = vorrq_u8(lo[i], vandq_u8(vtstq_u8(hbits[i], bit_lo), sixteen));
        hi[i] = vorrq_u8(hi[i], vandq_u8(vtstq_u8(hbits[i], bit_hi), sixteen));
      }
    }
    for (int h = 0; h < 2; ++h) {
      int sc, mn;
      k_scale_min(scales, 2 * g + h, &sc, &mn);
      const float32x4_t a = vdupq_n_f32(d * static_cast<float>(sc));
      const float32x4_t c = vdupq_n_f32(-(dmin * static_cast<float>(mn)));
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
  const uint8x16_t low4 = vdupq_n_u8(15), bits45 = vdupq_n_u8(3 << 4);
  const int8x16_t offset = vdupq_n_s8(32);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b + offsetof(BlockQ6_K, ql) + 64 * half;
    const uint8_t* qh = b + offsetof(BlockQ6_K, qh) + 32 * half;
    // The four 32-element groups of the half (layout in quants.h), 16 elements (i) at a time: each 2-bit
    // field of qh is moved to bits 4..5 and masked there.
    int8x16_t q[4][2];
    for (int i = 0; i < 2; ++i) {
      const uint8x16_t l0 = vld1q_u8(ql + 16 * i), l1 = vld1q_u8(ql + 32 + 16 * i);
      const uint8x16_t h = vld1q_u8(qh + 16 * i);
      const uint8x16_t u[4] = {
          vorrq_u8(vandq_u8(l0, low4), vandq_u8(vshlq_n_u8(h, 4), bits45)),
          vorrq_u8(vandq_u8(l1, low4), vandq_u8(vshlq_n_u8(h, 2), bits45)),
          vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h, bits45)),
          vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(h, 2), bits45)),
      };
      for (int k = 0; k < 4; ++k) q[k][i] = vsubq_s8(vreinterpretq_s8_u8(u[k]), offset);
    }
    const int8_t* sc = scales + 8 * half;
    for (int k = 0; k < 4; ++k) {
      // (d * sc) * (q - 32), both products exact; the scale changes after 16 elements.
      const float32x4_t a0 = vdupq_n_f32(d * static_cast<float>(sc[2 * k]));
      const float32x4_t a1 = vdupq_n_f32(d * static_cast<float>(sc[2 * k + 1]));
      emit_s8x32(sink, off + 128 * half + 32 * k, q[k], a0, a1);
    }
  }
}

// ---- Plain float rows ----

// load4(p): 4 elements at p as floats, exactly.
struct F32Loader {
  static float32x4_t load4(const uint8_t* p) { return load_f32x4(p); }
  static float load1(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static constexpr size_t kSize = 4;
};
struct F16Loader {
  static float32x4_t load4(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }
  static float load1(const uint8_t* p) { return half_at(p); }
  static constexpr size_t kSize = 2;
};
// A bfloat16 is the upper half of a float: a widening shift by 16 is the exact conversion.
struct BF16Loader {
  static float32x4_t load4(const uint8_t* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vreinterpret_u16_u8(vld1_u8(p)), 16));
  }
  static float load1(const uint8_t* p) { return bf16_to_fp32(load_u16(p)); }
  static constexpr size_t kSize = 2;
};

template <class L, class Sink>
inline void plain_row(const uint8_t* row, int64_t n, Sink& sink) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const uint8_t* p = row + i * L::kSize;
    float32x4_t w[8];
    for (int k = 0; k < 8; ++k) w[k] = L::load4(p + 4 * k * L::kSize);
    sink.put(i, w);
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

// kV vectors at once, so each weight load feeds kV FMLAs; two accumulators per vector keep 2 kV chains busy.
template <int kV>
inline void dot_f32_vectors(const float* w, int64_t n, const float* x, int64_t x_stride, float* y,
                            int64_t y_stride) {
  float32x4_t acc[kV][2];
  for (int v = 0; v < kV; ++v) acc[v][0] = acc[v][1] = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t w0 = vld1q_f32(w + i), w1 = vld1q_f32(w + i + 4);
    for (int v = 0; v < kV; ++v) {
      acc[v][0] = vfmaq_f32(acc[v][0], w0, vld1q_f32(x + v * x_stride + i));
      acc[v][1] = vfmaq_f32(acc[v][1], w1, vld1q_f32(x + v * x_stride + i + 4));
    }
  }
  for (int v = 0; v < kV; ++v) {
    float tail = 0.0f;
    for (int64_t k = i; k < n; ++k) tail += w[k] * x[v * x_stride + k];
    y[v * y_stride] += vaddvq_f32(vaddq_f32(acc[v][0], acc[v][1])) + tail;
  }
}

void dot_f32_accumulate_neon(const float* w, int64_t n, const float* x, int64_t x_stride, int n_vec, float* y,
                             int64_t y_stride) {
  int j = 0;
  for (; j + 4 <= n_vec; j += 4)
    dot_f32_vectors<4>(w, n, x + j * x_stride, x_stride, y + j * y_stride, y_stride);
  for (; j < n_vec; ++j) dot_f32_vectors<1>(w, n, x + j * x_stride, x_stride, y + j * y_stride, y_stride);
}

const KernelTable kNeon = {
    "neon",
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
    dot_f32_accumulate_neon,
};

#undef TILELLM_BLOCK_KERNELS

}  // namespace

}  // namespace tilellm::quant_detail

#endif

namespace tilellm::quant_detail {
TILELLM_ISA_PROVIDER(const KernelTable*, neon_kernels, NEON, &kNeon)
}  // namespace tilellm::quant_detail
