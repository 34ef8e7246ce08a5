// Internal to the quant kernels: the per-ISA kernel tables that quants.cpp dispatches through.
// quants.cpp holds the scalar table (the reference), quants_avx2.cpp the AVX2+FMA+F16C one, quants_neon.cpp
// the ARMv8-A Advanced SIMD one.
#pragma once

#include <cstdint>
#include <cstring>

namespace tilellm::quant_detail {

// Little-endian 16/32-bit field reads with no alignment requirement (rows come straight from a mapped file).
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Unpacks the 6-bit scale and min of sub-block s (0..7) from the 12 packed bytes of a Q4_K/Q5_K block
// (layout in quants.h, BlockQ4_K).
inline void k_scale_min(const uint8_t* scales, int s, int* sc, int* mn) {
  if (s < 4) {
    *sc = scales[s] & 63;
    *mn = scales[s + 4] & 63;
  } else {
    *sc = (scales[s + 4] & 15) | ((scales[s - 4] >> 6) << 4);
    *mn = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
  }
}

// Kernel slots, one per supported type, in this order.
enum Slot : int { kF32, kF16, kBF16, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ4_K, kQ5_K, kQ6_K, kNumSlots };

struct RowKernels {
  // Writes n_blocks blocks at src as floats to dst (blocks are single elements for F32/F16/BF16). Bit-exact.
  void (*dequant)(const uint8_t* src, float* dst, int64_t n_blocks);
  // Dot product of n_blocks blocks at row with x, accumulated in float.
  float (*dot)(const uint8_t* row, const float* x, int64_t n_blocks);
};

struct KernelTable {
  const char* isa;
  RowKernels rows[kNumSlots];
  // For j < n_vec: y[j * y_stride] += sum_{i<n} w[i] * x[j * x_stride + i] (the inner loop of dot_row_multi).
  void (*dot_f32_accumulate)(const float* w, int64_t n, const float* x, int64_t x_stride, int n_vec, float* y,
                             int64_t y_stride);
};

// The portable table; always available.
const KernelTable& scalar_kernels();
// The AVX2+FMA+F16C table, or nullptr when this build or this CPU cannot run it.
const KernelTable* avx2_kernels();
// The Advanced SIMD table, or nullptr when this build or this CPU cannot run it.
const KernelTable* neon_kernels();

}  // namespace tilellm::quant_detail
