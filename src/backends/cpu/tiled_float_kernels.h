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

// One instruction set's kernels.
struct Kernels {
  Kernel f16 = nullptr;
  Kernel bf16 = nullptr;
  Kernel f32 = nullptr;
};

// The kernels of an ISA (base/isa_target.h providers), null when this build or this CPU cannot run it:
// AVX-512 F/BW/VL (the avx512vnni level; its BF16 kernel takes vdpbf16ps where the CPU has AVX512_BF16),
// AVX2 + FMA + F16C, ARMv8-A Advanced SIMD (every AArch64 CPU).
const Kernels* avx512_kernels();
const Kernels* avx2_kernels();
const Kernels* neon_kernels();

// Tests only: on a CPU with AVX512_BF16, false makes the AVX-512 BF16 kernel take its shift-and-mask path
// instead of vdpbf16ps (true restores it); false, changing nothing, when asked for vdpbf16ps the CPU lacks.
bool set_bf16_dot_product_for_testing(bool on);

}  // namespace tilellm::tiled_float_detail
