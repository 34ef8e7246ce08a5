// The CPU backend's fp32 GEMM over F32 float tiles (tiled_float.h), on AVX-512: C[M][n_out] = A[M][n_in] W^T
// for a whole matrix, split over the pool by the GEMM itself. This is what --weights f32 runs (decode and
// prefill alike) and what `gemm-speed`'s float-gemm measures on the CPU.
//
// Per call, A is packed into k-major panels of 8 rows (the activation layout of the kernel); register tiles
// of 8 rows x 48 channels (24 zmm accumulators, the full tiles in assembly: tiled_f32_asm_x86.h), K in
// chunks of 512 so one panel of A stays in L1 while a block of 24 weight tiles streams from L2 past it.
// Products large enough to pay take one level of Strassen-Winograd (tiled_f32_strassen.cpp) on operands
// formed from the tiles once, at load (prepare()).
//
// Strassen operands (TiledFloat::strassen): B = W^T [n_in][n_out] is split into quadrants of s_kh x s_nh
// (ceil halves; a missing last row or column reads as zero) and the seven weight-side operands B11, B21,
// B22, -T4, T1, T2, T3 are stored one after the other, each laid out like the tiles without row padding:
// [ceil(s_nh / 16)][s_kh][16] floats. That is 7/4 of the tiles' memory on top of them; the weights are
// constants, so their sums are formed once rather than per call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/tiled_float.h"
#include "base/thread_pool.h"

namespace tilellm::f32gemm {

// Whether this CPU runs the GEMM (AVX-512 F/BW/VL, as the engine probes it).
bool available();

// Whether prepare() forms the Strassen operands: where the products are large enough for it to pay (kAuto,
// for M at or above a threshold measured per shape), for every M (tests), or never.
enum class Strassen { kAuto, kAlways, kNever };
void prepare(TiledFloat& w, Strassen s = Strassen::kAuto);

// Floats of scratch one call with M rows needs (packed A; with Strassen its seven activation operands and
// a padded C), 64-byte aligned by the caller.
size_t scratch_floats(const TiledFloat& w, int64_t M);

// C[M][w.n_out] = A[M][w.n_in] x W^T (A and C row-major, contiguous). pool may be null (one thread).
void gemm(const TiledFloat& w, const float* A, int64_t M, float* C, ThreadPool* pool, float* scratch);

}  // namespace tilellm::f32gemm
