// The CPU backend's fp32 GEMM over F32 float tiles (backends/cpu/tiled_f32_gemm.h, --weights f32) against an
// independent double-precision reference: plain loops in double over the matrix's floats. The tolerance is
// relative to sum_k |a_k * w_k|. Shapes cover the blocking edges (partial row panels, tile groups and tiles,
// K tails and chunks, several weight blocks) and Strassen-Winograd at odd sizes; every result also goes
// through the backend's matmul once (the path --weights f32 runs).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/tiled_f32_gemm.h"
#include "backends/cpu/tiled_float.h"
#include "format/quants.h"
#include "format/quants_q8.h"

namespace tilellm {
namespace {

std::vector<float> random_matrix(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = d(rng);
    while (x == 0.0f);
  }
  return v;
}

struct Shape {
  int M, K, N;
};

// W [N][K] floats as an F32 weight.
Weight f32_weight(const std::vector<float>& W, int K, int N) {
  Weight w;
  w.name = "test";
  w.type = GgmlType::F32;
  w.data = reinterpret_cast<const uint8_t*>(W.data());
  w.n_in = K;
  w.n_out = N;
  w.row_bytes = size_t(K) * 4;
  return w;
}

// C against the double reference at the given rows (all columns).
void expect_close(const std::vector<float>& W, const std::vector<float>& A, int K, int N,
                  const std::vector<float>& C, const std::vector<int>& rows) {
  for (int m : rows) {
    for (int n = 0; n < N; ++n) {
      double ref = 0.0, mag = 0.0;
      for (int k = 0; k < K; ++k) {
        const double t = double(A[size_t(m) * K + k]) * double(W[size_t(n) * K + k]);
        ref += t;
        mag += std::fabs(t);
      }
      ASSERT_NEAR(C[size_t(m) * N + n], ref, 1e-5 * mag + 1e-6) << "m=" << m << " n=" << n;
    }
  }
}

// Every row of C = A W^T for each shape, with and without a pool, against the double reference, with the
// Strassen operands formed as `s` says.
void expect_every_row(const std::vector<Shape>& shapes, f32gemm::Strassen s, uint32_t seed) {
  if (!f32gemm::available()) GTEST_SKIP() << "this CPU has no AVX-512: the f32 GEMM does not run here";
  ThreadPool pool(2);
  for (const Shape& sh : shapes) {
    const auto W = random_matrix(size_t(sh.N) * sh.K, seed);
    const auto A = random_matrix(size_t(sh.M) * sh.K, seed + 1);
    TiledFloat t = tile_float(f32_weight(W, sh.K, sh.N), GgmlType::F32, nullptr);
    f32gemm::prepare(t, s);
    if (s == f32gemm::Strassen::kAlways && sh.K >= 2 && sh.N >= 2) {
      EXPECT_EQ(t.strassen_min_m, 1);  // (a 1-wide K or N has no quadrants: the plain kernels run)
    }
    std::vector<float> scratch(f32gemm::scratch_floats(t, sh.M) + 16);
    std::vector<int> rows(size_t(sh.M));
    for (int m = 0; m < sh.M; ++m) rows[size_t(m)] = m;
    for (ThreadPool* tp : {&pool, static_cast<ThreadPool*>(nullptr)}) {
      std::vector<float> C(size_t(sh.M) * sh.N, NAN);
      f32gemm::gemm(t, A.data(), sh.M, C.data(), tp, scratch.data());
      SCOPED_TRACE(testing::Message()
                   << (tp ? "pool" : "no pool") << " M=" << sh.M << " K=" << sh.K << " N=" << sh.N);
      expect_close(W, A, sh.K, sh.N, C, rows);
    }
  }
}

// The blocking edges, every row checked: the 8 x 48 assembly tile next to partial row panels (M % 8),
// partial tile groups and a partial last tile (N % 48, N % 16), K tails and K below one 512-k chunk, odd K
// (a tile stride padded past K * 16 floats), more than one 384-channel weight block, and A packed by the
// pool (M >= 64) or by the caller. (kNever: these shapes test the plain kernels.)
TEST(F32Gemm, blocking_edges_match_double_reference) {
  expect_every_row({{8, 256, 48},
                    {16, 513, 96},
                    {67, 300, 1000},
                    {13, 1, 200},
                    {70, 2560, 784},
                    {9, 255, 47},
                    {64, 257, 817},
                    {1, 301, 33},
                    {3, 13, 33}},
                   f32gemm::Strassen::kNever, 11);
}

// One Strassen-Winograd level (kAlways: every M) with the plain kernel's tolerance: all even sizes; odd M,
// K and N alone and together (the zero-padded quadrants, C through the scratch); half sizes below one 8-row
// panel, one 48-channel group and one 16-channel tile; a half-K over two 512-k chunks and a half-N over two
// 384-channel weight blocks; M = 1 (half of one row is padding).
TEST(F32Gemm, strassen_matches_double_reference_at_odd_sizes) {
  expect_every_row({{32, 64, 96},
                    {33, 64, 96},
                    {32, 65, 96},
                    {32, 64, 97},
                    {17, 129, 1601},
                    {2, 2, 2},
                    {1, 7, 5},
                    {3, 1, 3},
                    {130, 1029, 200},
                    {48, 600, 66},
                    {15, 33, 1560}},
                   f32gemm::Strassen::kAlways, 21);
}

// kAuto forms the operands for large products only (K >= 2048 and N >= 1024) and uses them from its M
// threshold on, which is lower for wider N: M just below, at and just above it match the reference; kNever
// forms nothing.
TEST(F32Gemm, strassen_auto_threshold_matches_double_reference) {
  if (!f32gemm::available()) GTEST_SKIP() << "this CPU has no AVX-512";
  ThreadPool pool(2);
  const int K = 2560;
  for (const auto& [k, n] : {std::pair{2047, 1024}, {2048, 1024}, {2048, 1023}}) {
    const auto w = random_matrix(size_t(n) * k, 33);
    TiledFloat t = tile_float(f32_weight(w, k, n), GgmlType::F32, nullptr);
    f32gemm::prepare(t);
    EXPECT_EQ(t.strassen.size() > 0, k >= 2048 && n >= 1024) << "K=" << k << " N=" << n;
  }
  const auto W1 = random_matrix(size_t(1024) * K, 31), W2 = random_matrix(size_t(2048) * K, 34);
  TiledFloat never = tile_float(f32_weight(W1, K, 1024), GgmlType::F32, nullptr);
  f32gemm::prepare(never, f32gemm::Strassen::kNever);
  EXPECT_EQ(never.strassen_min_m, 0);
  EXPECT_EQ(never.strassen.size(), 0u);
  TiledFloat t1 = tile_float(f32_weight(W1, K, 1024), GgmlType::F32, nullptr);
  TiledFloat t2 = tile_float(f32_weight(W2, K, 2048), GgmlType::F32, nullptr);
  f32gemm::prepare(t1);
  f32gemm::prepare(t2);
  ASSERT_GT(t1.strassen_min_m, 1);
  EXPECT_LT(t2.strassen_min_m, t1.strassen_min_m);
  for (const auto& [t, w] : {std::pair{&t1, &W1}, {&t2, &W2}}) {
    const int m0 = t->strassen_min_m, n = int(t->n_out);
    const auto A = random_matrix(size_t(m0 + 1) * K, 32);
    std::vector<float> scratch(f32gemm::scratch_floats(*t, m0 + 1) + 16);
    for (int m : {m0 - 1, m0, m0 + 1}) {
      std::vector<float> C(size_t(m) * n, NAN);
      f32gemm::gemm(*t, A.data(), m, C.data(), &pool, scratch.data());
      SCOPED_TRACE(testing::Message() << "M=" << m << " N=" << n << " (threshold " << m0 << ")");
      expect_close(*w, A, K, n, C, {0, 1, m / 2, m - 2, m - 1});
    }
  }
}

// --weights f32 through the backend: any stored type converted to its exact floats (a Q8_0 matrix here, its
// rows dequantized), the product of the float tiles (the GEMM on AVX-512, the tile kernels elsewhere) equal
// to the double reference over those floats, in both activation modes (F32 tiles round nothing).
TEST(F32Gemm, weights_f32_mode_multiplies_exact_floats) {
  const int K = 96, N = 37, M = 11;
  const auto Wf = random_matrix(size_t(N) * K, 41);
  std::vector<uint8_t> rows(size_t(N) * (K / 32) * 34);
  for (int n = 0; n < N; ++n)
    quantize_activations(GgmlType::Q8_0, Wf.data() + size_t(n) * K, rows.data() + size_t(n) * (K / 32) * 34,
                         K);
  Weight w;
  w.name = "q8_0";
  w.type = GgmlType::Q8_0;
  w.data = rows.data();
  w.n_in = K;
  w.n_out = N;
  w.row_bytes = size_t(K / 32) * 34;
  std::vector<float> exact(size_t(N) * K);
  for (int n = 0; n < N; ++n) dequantize_row(GgmlType::Q8_0, w.row(n), exact.data() + size_t(n) * K, K);
  const auto A = random_matrix(size_t(M) * K, 42);
  ThreadPool pool(2);
  for (ActivationMode am : {ActivationMode::Quantized, ActivationMode::F32}) {
    CpuBackend be(pool, am, int64_t(M) * K, WeightsMode::F32);
    WeightSet ws;
    ws.matrices.push_back(&w);
    be.load_weights(ws);
    std::vector<float> C(size_t(M) * N, NAN);
    be.matmul(w, A.data(), M, C.data());
    std::vector<int> all(static_cast<size_t>(M));
    for (int m = 0; m < M; ++m) all[size_t(m)] = m;
    SCOPED_TRACE(am == ActivationMode::F32 ? "f32 activations" : "quantized activations");
    expect_close(exact, A, K, N, C, all);
    std::vector<float> seen(size_t(M) * K);
    be.rounded_matmul_input(w, A.data(), M, seen.data());
    EXPECT_EQ(seen, A);  // F32 weights pair with unrounded activations
  }
}

}  // namespace
}  // namespace tilellm
