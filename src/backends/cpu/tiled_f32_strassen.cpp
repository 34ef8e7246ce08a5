// One level of Strassen-Winograd for the fp32 GEMM (tiled_f32_gemm.cpp): C = A B with B = W^T, each split in
// 2 x 2 quadrants, computed with 7 half-size products instead of 8 (the variant and the names of Boyer,
// Dumas, Pernet and Zhou, "Memory efficient scheduling of Strassen-Winograd's matrix multiplication
// algorithm"):
//   S1 = A21 + A22   S2 = S1 - A11    S3 = A11 - A21   S4 = A12 - S2
//   T1 = B12 - B11   T2 = B22 - T1    T3 = B22 - B12   T4 = T2 - B21
//   P1 = A11 B11  P2 = A12 B21  P3 = S4 B22  P4 = A22 T4  P5 = S1 T1  P6 = S2 T2  P7 = S3 T3
//   C11 = P1 + P2   C12 = P1 + P6 + P5 + P3   C21 = P1 + P6 + P7 - P4   C22 = P1 + P6 + P7 + P5
// The weights are constants, so the weight-side operands (B11, B21, B22, -T4, T1, T2, T3) are formed and
// laid out once, at load, from the tiles (7/4 of the tiles' memory on top of them; tiled_f32_gemm.h); the
// activation-side sums are formed per call while packing A for the kernels, which packs A anyway. The
// products go straight into C's quadrants through the kernels' "start from src" mode
// (tiled_f32_gemm_internal.h), so the C side costs one extra pass over a quadrant instead of Winograd's seven
// additions:
//   C11 = P1;  C12 = C11 + P6;  C21 = C12 + P7;  C22 = C21 + P5;  C12 += C22 - C21  (= P5);
//   C12 += P3;  C21 += A22 (-T4);  C11 += P2.
// Every step touches only the rows and columns it writes, so each thread runs the whole chain on its own
// pieces of the quadrants (parallel_pieces). Odd sizes run on the zero-padded problem (A padded while
// packing, W when its operands are formed, C through a scratch buffer): exact, since each padded k pairs a
// zero of A with a zero of W (one of the two would do) and padded rows and columns of C are dropped.
//
// Rounding: each output is a signed sum of 7 products of sums of up to 4 inputs, so its error bound is a few
// times that of the plain product, relative to sum |a w| (the benchmark's check): measured 1.7e-7 to 4.1e-7
// on the benchmark shapes against 0.7e-7 to 1.6e-7 without it, under the check's 1e-4; the tests bound it at
// the plain kernel's tolerance.
#include <algorithm>
#include <cstring>

#include "backends/cpu/tiled_f32_gemm_internal.h"

namespace tilellm::f32gemm {

namespace {

// Weight-side operands in the order they are stored (TiledFloat::strassen) and the products that use them.
enum Op { kB11, kB21, kB22, kNegT4, kT1, kT2, kT3, kOps };

size_t op_floats(const TiledFloat& w) {
  return size_t((w.s_nh + kTileN - 1) / kTileN * kTileN) * size_t(w.s_kh);
}

}  // namespace

int strassen_min_m(int K, int N) {
  if (!available()) return 0;  // only the AVX-512 path runs it
  // Measured on the benchmark shapes (2 threads, same process, alternating with the plain path): one level
  // is 2-13% faster at M = 256 and 512 on all five (K 2560 to 9728, N 1024 to 9728). At M = 128 (quadrant
  // products of 64 rows), with the plain path fetching its next weight block ahead, it is 1-14% faster at
  // N >= 2560 and alike at N = 1024 (-6% to +9% over two batches of five alternating runs), where the
  // quadrants are only 512 channels wide. Not measured below K = 2560 or N = 1024, so not used there.
  if (K < 2048 || N < 1024) return 0;
  return N >= 2048 ? 128 : 256;
}

void form_strassen_operands(TiledFloat& w) {
  const int K = int(w.n_in), N = int(w.n_out);
  w.s_kh = (K + 1) / 2;
  w.s_nh = (N + 1) / 2;
  const int Kh = int(w.s_kh), Nh = int(w.s_nh);
  const size_t stride = op_floats(w);
  w.strassen = AlignedBuffer(kOps * stride * sizeof(float));  // zeroed: the padding channels stay zero
  float* sw = w.strassen.as<float>();
  // B[k][n] = W[n][k] from the tiles, zero outside K x N (the padded row / column of an odd size).
  const size_t ts = w.tile_bytes / sizeof(float);
  auto b = [&](int k, int n) {
    return k < K && n < N ? w.tile_f32(0)[size_t(n / kTileN) * ts + size_t(k) * kTileN + n % kTileN] : 0.0f;
  };
  for (int n = 0; n < Nh; ++n) {
    const size_t col = size_t(n / kTileN) * Kh * kTileN + n % kTileN;
    for (int k = 0; k < Kh; ++k) {
      const float b11 = b(k, n), b12 = b(k, Nh + n), b21 = b(Kh + k, n), b22 = b(Kh + k, Nh + n);
      const float t1 = b12 - b11, t2 = b22 - t1, t3 = b22 - b12, t4 = t2 - b21;
      const float v[kOps] = {b11, b21, b22, -t4, t1, t2, t3};
      for (int o = 0; o < kOps; ++o) sw[o * stride + col + size_t(k) * kTileN] = v[o];
    }
  }
}

#if defined(__x86_64__)
size_t strassen_scratch_floats(const TiledFloat& w, int M) {
  const int Mh = (M + 1) / 2;
  const size_t a = kOps * packed_a_floats(Mh, int(w.s_kh));
  const bool padded = 2 * Mh != M || 2 * w.s_nh != w.n_out;
  const size_t c = padded ? size_t(2) * Mh * size_t(2 * w.s_nh) : 0;
  return (a + 15) / 16 * 16 + c;
}

void gemm_strassen(const TiledFloat& w, const float* A, int M, float* C, ThreadPool* pool, float* scratch) {
  const int K = int(w.n_in), N = int(w.n_out), Kh = int(w.s_kh), Nh = int(w.s_nh), Mh = (M + 1) / 2;
  const bool threaded = pool && pool->active() > 1;

  // Scratch: the seven activation-side operands A11, A12, S4, A22, S1, S2, S3 (matching the weight operands
  // of Op), each Mh x Kh packed as tiled_f32_gemm_internal.h describes, one after the other; then, when M
  // or N is odd, C's quadrants [2 Mh][2 Nh] (copied out at the end; else C itself holds them).
  const size_t a_stride = packed_a_floats(Mh, Kh);
  float* Ap = scratch;
  const bool padded = 2 * Mh != M || 2 * Nh != N;
  float* Cw = C;
  size_t ldc = size_t(N);
  if (padded) {
    ldc = size_t(2) * Nh;
    Cw = scratch + (kOps * a_stride + 15) / 16 * 16;
  }

  const int panels = (Mh + kMr - 1) / kMr;
  // Per panel and K chunk, the four quadrants' rows are read once and all seven operands formed from them.
  const int Mp = panels * kMr;
  auto pack = [&](int64_t b, int64_t e, int) {
    // Rows of the four quadrants that run past A, zero-filled; the sums S1..S4. [kMr][kKc] each.
    alignas(64) float pad[4][kMr][kKc];
    alignas(64) float sums[4][kMr][kKc];
    const float* rows[kOps][kMr];
    for (int i = int(b); i < int(e); ++i) {
      const int mr = std::min(kMr, Mh - i * kMr);
      for (int k0 = 0; k0 < Kh; k0 += kKc) {
        const int kc = std::min(kKc, Kh - k0);
        for (int r = 0; r < mr; ++r) {
          const int m = i * kMr + r;
          // Row m of quadrant (qr, qc), values k0 .. k0 + kc - 1: in A, or in pad where it runs past A.
          auto q = [&](int qr, int qc) -> const float* {
            const int row = qr * Mh + m, col = qc * Kh + k0;
            const int valid = row < M ? std::clamp(K - col, 0, kc) : 0;
            if (valid == kc) return A + size_t(row) * K + col;
            float* z = pad[qr * 2 + qc][r];
            if (valid > 0) std::memcpy(z, A + size_t(row) * K + col, sizeof(float) * size_t(valid));
            std::fill(z + valid, z + kc, 0.0f);
            return z;
          };
          const float *a11 = q(0, 0), *a12 = q(0, 1), *a21 = q(1, 0), *a22 = q(1, 1);
          float *s1 = sums[0][r], *s2 = sums[1][r], *s3 = sums[2][r], *s4 = sums[3][r];
          for (int k = 0; k < kc; ++k) {
            s1[k] = a21[k] + a22[k];
            s2[k] = s1[k] - a11[k];
            s3[k] = a11[k] - a21[k];
            s4[k] = a12[k] - s2[k];
          }
          const float* row_of[kOps] = {a11, a12, s4, a22, s1, s2, s3};  // in Op order
          for (int o = 0; o < kOps; ++o) rows[o][r] = row_of[o];
        }
        for (int o = 0; o < kOps; ++o) {
          store_panel(rows[o], mr, kc,
                      Ap + o * a_stride + size_t(k0 / kKc) * Mp * kKc + size_t(i) * kc * kMr);
        }
      }
    }
  };
  if (threaded) {
    pool->parallel_for(panels, 1, pack);
  } else {
    pack(0, panels, 0);
  }

  // The chain on rows [m0, m1) and tile groups [g0, g1) of the quadrants (Mh x Nh).
  const int tiles = (Nh + kTileN - 1) / kTileN;
  const int groups = (tiles + kNt - 1) / kNt;
  float *c11 = Cw, *c12 = Cw + Nh, *c21 = Cw + size_t(Mh) * ldc, *c22 = c21 + Nh;
  auto chain = [&](int m0, int m1, int g0, int g1) {
    const int t0 = g0 * kNt, t1 = std::min(tiles, g1 * kNt);
    auto product = [&](int o, float* dst, const float* src) {
      const WeightView wv{w.strassen.as<float>() + o * op_floats(w), size_t(Kh) * kTileN, Kh, Nh};
      tiles_avx512(wv, Ap + o * a_stride, Mh, m0, m1, dst, ldc, src, t0, t1);
    };
    product(kB11, c11, nullptr);  // C11 = P1
    product(kT2, c12, c11);       // C12 = P1 + P6 (U2)
    product(kT3, c21, c12);       // C21 = U2 + P7 (U3)
    product(kT1, c22, c21);       // C22 = U3 + P5 (U7, final)
    const int n0 = t0 * kTileN, n1 = std::min(Nh, t1 * kTileN);
    for (int m = m0; m < m1; ++m) {  // C12 = U2 + (C22 - C21) = U2 + P5 (U4)
      float* d = c12 + size_t(m) * ldc;
      const float *u7 = c22 + size_t(m) * ldc, *u3 = c21 + size_t(m) * ldc;
      for (int n = n0; n < n1; ++n) d[n] += u7[n] - u3[n];
    }
    product(kB22, c12, c12);    // C12 = U4 + P3 (U5, final)
    product(kNegT4, c21, c21);  // C21 = U3 - P4 (U6, final)
    product(kB21, c11, c11);    // C11 = P1 + P2 (U1, final)
  };
  // Fewer pieces than the plain path: each piece streams its rows of all seven A operands (7/4 of A) again,
  // which at K = 9728 cost more than the products saved with 3 pieces per thread; 2 per thread (1 where the
  // rows are halved) measured 3-9% faster at M = 512 than 3 (2560x4096 alike).
  parallel_pieces(threaded ? pool : nullptr, Mh, groups, chain, groups < 16 ? 1 : 2);

  if (padded) {
    for (int m = 0; m < M; ++m)
      std::memcpy(C + size_t(m) * N, Cw + size_t(m) * ldc, sizeof(float) * size_t(N));
  }
}
#endif

}  // namespace tilellm::f32gemm
