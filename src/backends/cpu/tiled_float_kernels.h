// Internal to the float tiles: the vector kernels tiled_float.cpp dispatches to. Each has the signature of
// tiled_float_matmul() (tiled_float.h) for one weight type and trusts its arguments (checked by the caller).
#pragma once

#include <cstdint>

#include "backends/cpu/tiled_float.h"

namespace tilellm::tiled_float_detail {

using Kernel = void (*)(const TiledFloat& w, const void* acts, int64_t n_tok, int64_t tile0, int64_t tile1,
                        float* y, int64_t y_stride);

// The loop every kernel shares: each tile in [tile0, tile1), its tokens in groups of kMaxTokens (8 or 4),
// then 4, 2, 1. Step<N>::run(w, tile index, acts, first token, y, y_stride) multiplies one tile by N tokens;
// it carries the instruction set's target attribute, so this loop needs none.
template <template <int> class Step, int kMaxTokens>
void for_tiles(const TiledFloat& w, const void* acts, int64_t n_tok, int64_t tile0, int64_t tile1, float* y,
               int64_t y_stride) {
  static_assert(kMaxTokens == 8 || kMaxTokens == 4);
  for (int64_t ti = tile0; ti < tile1; ++ti) {
    int64_t t = 0;
    if constexpr (kMaxTokens == 8) {
      for (; t + 8 <= n_tok; t += 8) Step<8>::run(w, ti, acts, t, y, y_stride);
    }
    for (; t + 4 <= n_tok; t += 4) Step<4>::run(w, ti, acts, t, y, y_stride);
    for (; t + 2 <= n_tok; t += 2) Step<2>::run(w, ti, acts, t, y, y_stride);
    for (; t < n_tok; ++t) Step<1>::run(w, ti, acts, t, y, y_stride);
  }
}

// One instruction set's kernels; a member is nullptr when this build or this CPU cannot run it.
struct Kernels {
  Kernel f16 = nullptr;
  Kernel bf16 = nullptr;
  Kernel f32 = nullptr;
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
