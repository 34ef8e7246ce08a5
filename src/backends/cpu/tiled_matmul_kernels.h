// Internal to the tiled matmul: the vector kernels that tiled_matmul.cpp dispatches to. Each has the
// signature of tiled_matmul() (tiled_weight.h) and trusts its arguments (checked by the caller).
#pragma once

#include <cstdint>

#include "backends/cpu/tiled_weight.h"

namespace tilellm::tiled_detail {

using Kernel = void (*)(const TiledWeight& w, const TiledActs& a, int64_t tile0, int64_t tile1, int64_t t0,
                        int64_t t1, float* y, int64_t y_stride);

// The AVX-512 (F, BW, VL, VNNI) kernel, or nullptr when this build or this CPU cannot run it.
Kernel avx512vnni_tiled_kernel();
// The AVX2 + FMA + F16C + AVX-VNNI kernel, or nullptr.
Kernel avxvnni_tiled_kernel();
// The AVX2 + FMA + F16C kernel, or nullptr.
Kernel avx2_tiled_kernel();
// The ARMv8.2 dot product (SDOT) kernel, or nullptr.
Kernel neondot_tiled_kernel();
// The ARMv8-A Advanced SIMD kernel (every AArch64 CPU), or nullptr off AArch64.
Kernel neon_tiled_kernel();

// The same instruction sets' kernels for the K-quant kinds (Q4_K, Q5_K, Q6_K), or nullptr.
Kernel avx512vnni_tiled_k_kernel();
Kernel avxvnni_tiled_k_kernel();
Kernel avx2_tiled_k_kernel();
Kernel neondot_tiled_k_kernel();
Kernel neon_tiled_k_kernel();

}  // namespace tilellm::tiled_detail
