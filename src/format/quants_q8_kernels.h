// Internal to the quantized-activation kernels: the per-ISA kernel tables that quants_q8.cpp dispatches
// through. quants_q8.cpp holds the scalar table (the reference); quants_q8_avx2.cpp (AVX2+FMA+F16C),
// quants_q8_avxvnni.cpp (the same plus AVX-VNNI) and quants_q8_avx512vnni.cpp (AVX-512 VL/BW/VNNI, 256-bit
// vectors) compile the x86 kernels of quants_q8_x86.inc; quants_q8_neon.cpp compiles the ARM kernels of
// quants_q8_neon.inc twice (Advanced SIMD, and with the ARMv8.2 dot product).
// Arguments are validated before a kernel is called; kernels trust them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tilellm::q8_detail {

// Weight kernel slots, one per supported weight type, in this order.
enum WeightSlot : int {
  kF32,
  kF16,
  kBF16,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kNumWeightSlots
};
// Activation format slots.
enum ActSlot : int { kActF32, kActF16, kActBF16, kActQ8_0, kActQ8_1, kActQ8_K, kNumActSlots };

struct Q8KernelTable {
  const char* isa;
  // Writes n_blocks activation blocks (single elements for F32/F16/BF16) quantized from x to out. Bit-exact
  // across tables.
  void (*quantize[kNumActSlots])(const float* x, uint8_t* out, int64_t n_blocks);
  // For j < n_vec: y[j * y_stride] = dot(row, xq + j * xq_stride bytes), the row n_blocks weight blocks
  // (elements for F32/F16/BF16) long. n_vec >= 1.
  void (*dot[kNumWeightSlots])(const uint8_t* row, int64_t n_blocks, const uint8_t* xq, size_t xq_stride,
                               int n_vec, float* y, int64_t y_stride);
};

// The portable table; always available.
const Q8KernelTable& scalar_q8_kernels();
// The AVX2+FMA+F16C table, or nullptr when this build or this CPU cannot run it.
const Q8KernelTable* avx2_q8_kernels();
// The AVX2+FMA+F16C+AVX-VNNI table, or nullptr when this build or this CPU cannot run it.
const Q8KernelTable* avxvnni_q8_kernels();
// The AVX512F/VL/BW/VNNI table (256-bit vectors), or nullptr when this build or this CPU cannot run it.
const Q8KernelTable* avx512vnni_q8_kernels();
// The ARMv8-A Advanced SIMD table, or nullptr when this build or this CPU cannot run it.
const Q8KernelTable* neon_q8_kernels();
// The Advanced SIMD + ARMv8.2 dot product (SDOT) table, or nullptr when this build or this CPU cannot run it.
const Q8KernelTable* neondot_q8_kernels();

}  // namespace tilellm::q8_detail
