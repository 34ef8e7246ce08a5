// ARMv8-A Advanced SIMD kernels of the float tiles (tiled_float.h): a tile's 16 rows are four 128-bit
// quarters of 4 float lanes; up to 4 tokens per pass (16 accumulators of the 32 registers).
//   F16:  per input k two 16-byte loads, four conversions (FCVTL), four multiply-adds per token.
//   F32:  the same with four 16-byte loads and no conversion.
//   BF16: per pair of inputs four 16-byte loads, each split into its even inputs (shift left by 16) and odd
//         inputs (mask), eight multiply-adds per token. (ARMv8.6 BFDOT is not used: few cores have it.)
// Baseline ARMv8-A only: every AArch64 CPU runs these. On other architectures this file only defines the
// probe, returning no kernels.
#include <algorithm>
#include <bit>
#include <cstring>

#include "backends/cpu/tiled_float_kernels.h"
#include "base/isa_target.h"

#if TILELLM_ISA_COMPILES(NEON)
#include <arm_neon.h>

namespace tilellm::tiled_float_detail {
namespace {

constexpr int kRows = 16;

// Rows of tile ti that exist (16 but in the last tile).
inline int rows_of(const TiledFloat& w, int64_t ti) {
  return int(std::min<int64_t>(kRows, w.n_out - ti * kRows));
}

// Stores the 16 lanes of q[0..3] as rows [0, rows) of y.
inline void store_rows(float* y, const float32x4_t q[4], int rows) {
  if (rows == kRows) {
    for (int i = 0; i < 4; ++i) vst1q_f32(y + 4 * i, q[i]);
    return;
  }
  float tmp[kRows];
  for (int i = 0; i < 4; ++i) vst1q_f32(tmp + 4 * i, q[i]);
  std::memcpy(y, tmp, sizeof(float) * size_t(rows));
}

// ---- F16 ----

inline void load_f16(const uint16_t* p, float32x4_t q[4]) {
  const float16x8_t a = vreinterpretq_f16_u16(vld1q_u16(p)), b = vreinterpretq_f16_u16(vld1q_u16(p + 8));
  q[0] = vcvt_f32_f16(vget_low_f16(a));
  q[1] = vcvt_high_f32_f16(a);
  q[2] = vcvt_f32_f16(vget_low_f16(b));
  q[3] = vcvt_high_f32_f16(b);
}
inline void load_f16(const float* p, float32x4_t q[4]) {
  for (int i = 0; i < 4; ++i) q[i] = vld1q_f32(p + 4 * i);
}

template <int kNt, class E>
inline void f16_tokens(const TiledFloat& w, const E* tile, const float* xr, int64_t t, float* y,
                       int64_t y_stride, int rows) {
  const int64_t n = w.n_in;
  float32x4_t acc[kNt][4];
  for (int j = 0; j < kNt; ++j)
    for (int i = 0; i < 4; ++i) acc[j][i] = vdupq_n_f32(0.0f);
  for (int64_t k = 0; k < n; ++k) {
    float32x4_t q[4];
    load_f16(tile + k * kRows, q);
    for (int j = 0; j < kNt; ++j) {
      const float x = xr[(t + j) * n + k];
      for (int i = 0; i < 4; ++i) acc[j][i] = vfmaq_n_f32(acc[j][i], q[i], x);
    }
  }
  for (int j = 0; j < kNt; ++j) store_rows(y + (t + j) * y_stride, acc[j], rows);
}

template <int kNt>
struct F16Step {
  static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y, int64_t y_stride) {
    f16_tokens<kNt>(w, w.tile(ti), static_cast<const float*>(acts), t, y + ti * kRows, y_stride,
                    rows_of(w, ti));
  }
};

template <int kNt>
struct F32Step {
  static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y, int64_t y_stride) {
    f16_tokens<kNt>(w, w.tile_f32(ti), static_cast<const float*>(acts), t, y + ti * kRows, y_stride,
                    rows_of(w, ti));
  }
};

// ---- BF16 ----
// acts: [n_tok][n_pairs] 32-bit words, each the bfloat16 pair (x[2p] low, x[2p+1] high).

template <int kNt>
inline void bf16_tokens(const TiledFloat& w, const uint16_t* tile, const uint32_t* xp, int64_t t, float* y,
                        int64_t y_stride, int rows) {
  const int64_t np = w.n_pairs();
  const uint32x4_t hi_mask = vdupq_n_u32(0xffff0000u);
  float32x4_t acc[kNt][4];
  for (int j = 0; j < kNt; ++j)
    for (int i = 0; i < 4; ++i) acc[j][i] = vdupq_n_f32(0.0f);
  for (int64_t p = 0; p < np; ++p) {
    const uint32_t* q = reinterpret_cast<const uint32_t*>(tile + p * 2 * kRows);
    float32x4_t we[4], wo[4];
    for (int i = 0; i < 4; ++i) {
      const uint32x4_t v = vld1q_u32(q + 4 * i);
      we[i] = vreinterpretq_f32_u32(vshlq_n_u32(v, 16));
      wo[i] = vreinterpretq_f32_u32(vandq_u32(v, hi_mask));
    }
    for (int j = 0; j < kNt; ++j) {
      const uint32_t x = xp[(t + j) * np + p];
      const float xe = std::bit_cast<float>(x << 16), xo = std::bit_cast<float>(x & 0xffff0000u);
      for (int i = 0; i < 4; ++i) acc[j][i] = vfmaq_n_f32(vfmaq_n_f32(acc[j][i], we[i], xe), wo[i], xo);
    }
  }
  for (int j = 0; j < kNt; ++j) store_rows(y + (t + j) * y_stride, acc[j], rows);
}

template <int kNt>
struct Bf16Step {
  static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y, int64_t y_stride) {
    bf16_tokens<kNt>(w, w.tile(ti), static_cast<const uint32_t*>(acts), t, y + ti * kRows, y_stride,
                     rows_of(w, ti));
  }
};

const Kernels kNeon = {for_tiles<F16Step, 4>, for_tiles<Bf16Step, 4>, for_tiles<F32Step, 4>};

}  // namespace
}  // namespace tilellm::tiled_float_detail

#endif

namespace tilellm::tiled_float_detail {
TILELLM_ISA_PROVIDER(const Kernels*, neon_kernels, NEON, &kNeon)
}  // namespace tilellm::tiled_float_detail
