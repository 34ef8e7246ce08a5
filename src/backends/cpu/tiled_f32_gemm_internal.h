// What tiled_f32_gemm.cpp's AVX-512 kernels share with the Strassen-Winograd driver (tiled_f32_strassen.cpp):
// the packed layout of A, a view of one weight operand, and the blocked tile loop.
#pragma once

#include <algorithm>
#include <cstddef>

#include "backends/cpu/tiled_f32_gemm.h"
#include "base/thread_pool.h"

namespace tilellm::f32gemm {

// Register tile: 8 rows x 3 tiles of 16 channels (see tiled_f32_gemm.cpp); 16 channels per tile.
inline constexpr int kMr = 8, kNt = 3, kTileN = 16;
inline constexpr int kKc = 512;  // k per cache block: one packed panel of A is kMr x kKc floats (16 KiB, L1)

// A packed for the kernel: per K chunk q (k0 = q * kKc, kc = min(kKc, K - k0)) a block of Mp = M rounded up
// to kMr rows, as panels of kMr rows stored k-major: Ap[q][panel][kc][kMr] (the kMr activations of one k side
// by side, one 32-byte run). Block q starts at q * Mp * kKc floats, panel i at i * kc * kMr within it. Rows
// of a partial last panel are left unwritten and never read (the tail kernels read only their MR rows).
inline size_t packed_a_floats(int M, int K) {
  const int Mp = (M + kMr - 1) / kMr * kMr;
  return size_t((K + kKc - 1) / kKc) * Mp * kKc;
}

// One panel of one K chunk: dst[k][r] = rows[r][k] for r < mr, k < kc (dst: [kc][kMr]).
void store_panel(const float* const* rows, int mr, int kc, float* dst);

// Panels [i0, i1) of every K chunk, in the layout above, from rows given by row(m, k0, kc, tmp): a pointer to
// row m's values k0 .. k0 + kc - 1, either into A or into tmp ([kKc] floats, per row of the panel) where the
// row function had to form them (a sum of quadrants, zero padding).
template <class RowFn>
void pack_a_rows(int M, int K, int i0, int i1, float* Ap, RowFn&& row) {
  const int Mp = (M + kMr - 1) / kMr * kMr;
  alignas(64) float tmp[kMr][kKc];
  const float* rows[kMr];
  for (int k0 = 0; k0 < K; k0 += kKc) {
    const int kc = std::min(kKc, K - k0);
    float* block = Ap + size_t(k0 / kKc) * Mp * kKc;
    for (int i = i0; i < i1; ++i) {
      const int mr = std::min(kMr, M - i * kMr);
      for (int r = 0; r < mr; ++r) rows[r] = row(i * kMr + r, k0, kc, tmp[r]);
      store_panel(rows, mr, kc, block + size_t(i) * kc * kMr);
    }
  }
}

// Splits rows [0, M) x tile groups [0, groups) into pieces and runs f(m0, m1, g0, g1) on each, on the
// pool: per_thread pieces per thread (dynamic, so a thread slowed by something else takes fewer; each piece
// streams all of its rows of packed A again, so not many: for the plain path 2, 3 and 4 measured alike
// within the noise, 1 worse), of sizes that differ by at most one group (the pool's own chunking rounds its
// chunk size up, which left one of 2 threads with up to a quarter more tile groups than the other at some
// N). Where there are fewer than 16 groups (a Strassen quadrant at N = 1024 has 11) and 16 or more row
// panels, the rows are halved instead of cutting the groups finer. Not always: each row half streams all
// the weights, measured 15% slower at N = 4096, M = 512 (Strassen quadrants of 43 groups). m0 is a multiple
// of kMr. Without a pool: one piece.
template <class F>
void parallel_pieces(ThreadPool* pool, int M, int groups, F&& f, int per_thread = 3) {
  const int threads = pool ? pool->active() : 1;
  if (threads <= 1) {
    f(0, M, 0, groups);
    return;
  }
  const int panels = (M + kMr - 1) / kMr;
  const int row_parts = panels >= 16 && groups < 16 ? 2 : 1;
  const int col_parts = std::max(1, std::min(groups, per_thread * threads / row_parts));
  pool->parallel_for(int64_t(row_parts) * col_parts, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t u = b; u < e; ++u) {
      const int r = int(u / col_parts), c = int(u % col_parts);
      const int m0 = std::min(M, r * panels / row_parts * kMr),
                m1 = std::min(M, (r + 1) * panels / row_parts * kMr);
      f(m0, m1, int(int64_t(c) * groups / col_parts), int(int64_t(c + 1) * groups / col_parts));
    }
  });
}

// One packed weight operand as the kernels read it: channels n = 16 t + c, value (k, n) at
// w[t * tile_stride + k * 16 + c], K x N (N padded to 16 in storage, the padding zero).
struct WeightView {
  const float* w;
  size_t tile_stride;  // floats
  int K, N;
};

#if defined(__x86_64__)
// C[rows [m0, m1) x tiles [t0, t1)] = src + Ap x W (AVX-512): C and src are row-major with row stride ldc
// floats, row 0 / column 0 at row 0 / channel 0 of the product; src null means zero, src == C accumulates.
// Ap is A packed as above (M x wv.K); m0 is a multiple of kMr.
void tiles_avx512(const WeightView& wv, const float* Ap, int M, int m0, int m1, float* C, size_t ldc,
                  const float* src, int t0, int t1);
// Packs rows [0, M) of A ([M][K] row-major) for the kernels, over the pool when it is worth a wake-up.
void pack_a(const float* A, int M, int K, float* Ap, ThreadPool* pool);

// Strassen-Winograd (one level) with the operands prepare() formed (w.strassen_min_m > 0); C[M][N].
void gemm_strassen(const TiledFloat& w, const float* A, int M, float* C, ThreadPool* pool, float* scratch);
// Floats of scratch gemm_strassen needs for M rows.
size_t strassen_scratch_floats(const TiledFloat& w, int M);
#endif

// The smallest M for which one Strassen-Winograd level pays at K x N, or 0 where it never does: the rule
// behind Strassen::kAuto (tiled_f32_strassen.cpp).
int strassen_min_m(int K, int N);

// Forms w's seven Strassen-Winograd weight operands from its tiles (tiled_f32_strassen.cpp).
void form_strassen_operands(TiledFloat& w);

}  // namespace tilellm::f32gemm
