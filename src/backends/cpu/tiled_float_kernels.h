// Internal to the float tiles: the vector kernels tiled_float.cpp dispatches to. Each has the signature of
// tiled_float_matmul() (tiled_float.h) for one weight type and trusts its arguments (checked by the caller).
#pragma once

#include <cstdint>

#include "backends/cpu/tiled_float.h"

namespace tilellm::tiled_float_detail {

using Kernel = void (*)(const TiledFloat& w, const void* acts, int64_t n_tok, int64_t tile0, int64_t tile1,
                        float* y, int64_t y_stride);

// One instruction set's kernels; a member is nullptr when this build or this CPU cannot run it.
struct Kernels {
  Kernel f16 = nullptr;
  Kernel bf16 = nullptr;
};

// AVX-512 BF16 (vdpbf16ps): BF16 only.
Kernels avx512bf16_kernels();
// AVX-512 F/BW/VL with F16C.
Kernels avx512_kernels();
// AVX2 + FMA + F16C.
Kernels avx2_kernels();
// ARMv8-A Advanced SIMD (every AArch64 CPU).
Kernels neon_kernels();

}  // namespace tilellm::tiled_float_detail
