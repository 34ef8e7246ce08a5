// GEMM kernels behind `tilellm gemm-speed` against an independent double-precision reference, and the MNN
// GemmSpeed vocabulary (test names, argument parsing, the GPU-mode bitmask, exact output lines).
//
// The reference is plain loops in double over the dequantized weights (QuantMatrix::dequantize) and, for the
// quantized modes, the int8 activations times their row scale -- the same rule the kernels apply -- so the
// results agree to float rounding; the tolerance is relative to sum_k |a_k * w_k|.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "bench/gemm.h"
#include "bench/gemm_speed.h"

namespace tilellm::gemm {
namespace {

std::vector<float> random_matrix(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Checks C against the double reference at the given rows (all columns).
void expect_close_f32(const PackedF32& p, const std::vector<float>& W, const std::vector<float>& A, int M,
                      const std::vector<float>& C, const std::vector<int>& rows) {
  const int K = p.K, N = p.N;
  for (int m : rows) {
    for (int n = 0; n < N; ++n) {
      double ref = 0.0, mag = 0.0;
      for (int k = 0; k < K; ++k) {
        const double t = double(A[size_t(m) * K + k]) * double(W[size_t(n) * K + k]);
        ref += t;
        mag += std::fabs(t);
      }
      ASSERT_NEAR(C[size_t(m) * N + n], ref, 1e-5 * mag + 1e-6) << "m=" << m << " n=" << n << " M=" << M;
    }
  }
}

void expect_close_quant(const QuantMatrix& w, const QuantActs& a, const std::vector<float>& C,
                        const std::vector<int>& rows) {
  const int K = w.K, N = w.N;
  for (int m : rows) {
    const double sa = a.scales.as<float>()[m];
    const int8_t* q = a.q.as<int8_t>() + size_t(m) * a.Kp;
    for (int n = 0; n < N; ++n) {
      double ref = 0.0, mag = 0.0;
      for (int k = 0; k < K; ++k) {
        const double t = sa * double(q[k]) * double(w.dequantize(n, k));
        ref += t;
        mag += std::fabs(t);
      }
      ASSERT_NEAR(C[size_t(m) * N + n], ref, 1e-5 * mag + 1e-6) << "m=" << m << " n=" << n;
    }
  }
}

std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::kScalar};
  if (best_isa() == Isa::kAvx512Vnni) v.push_back(Isa::kAvx512Vnni);
  return v;
}

struct Shape {
  int M, K, N;
};

// Every default shape at M = 1 and M = 3 (odd: a partial row block), plus odd custom shapes (N not a
// multiple of 16, an odd number of tiles, K not a multiple of 4 or 8).
std::vector<Shape> shapes_for(bool block64) {
  std::vector<Shape> v;
  for (const auto& s : default_configs()) {
    for (int M : {1, 3}) v.push_back({M, s.K, s.N});
  }
  v.push_back({5, 128, 40});
  v.push_back({7, 192, 17});
  v.push_back({2, 64, 1});
  if (!block64) {
    v.push_back({3, 13, 33});
    v.push_back({6, 1, 5});
    v.push_back({9, 301, 48});
  }
  return v;
}

std::vector<int> check_rows(int M) {
  return M <= 3 ? std::vector<int>{0, M - 1} : std::vector<int>{0, M / 2, M - 1};
}

TEST(Gemm, f32_matches_double_reference_at_default_and_odd_shapes) {
  ThreadPool pool(2);
  for (const Shape& s : shapes_for(false)) {
    const auto W = random_matrix(size_t(s.N) * s.K, 1);
    const auto A = random_matrix(size_t(s.M) * s.K, 2);
    const PackedF32 p = pack_f32(W.data(), s.K, s.N);
    for (Isa isa : isas()) {
      std::vector<float> C(size_t(s.M) * s.N, NAN);
      gemm_f32(p, A.data(), s.M, C.data(), &pool, isa);
      SCOPED_TRACE(testing::Message() << isa_name(isa) << " M=" << s.M << " K=" << s.K << " N=" << s.N);
      expect_close_f32(p, W, A, s.M, C, check_rows(s.M));
    }
  }
}

// Every row of C = A W^T for each shape, every compiled ISA, with and without a pool, against the double
// reference; W packed with `strassen`.
void expect_f32_every_row(const std::vector<Shape>& shapes, F32Strassen strassen, uint32_t seed) {
  ThreadPool pool(2);
  for (const Shape& s : shapes) {
    const auto W = random_matrix(size_t(s.N) * s.K, seed);
    const auto A = random_matrix(size_t(s.M) * s.K, seed + 1);
    const PackedF32 p = pack_f32(W.data(), s.K, s.N, strassen);
    std::vector<int> rows(size_t(s.M));
    for (int m = 0; m < s.M; ++m) rows[size_t(m)] = m;
    for (Isa isa : isas()) {
      for (ThreadPool* tp : {&pool, static_cast<ThreadPool*>(nullptr)}) {
        std::vector<float> C(size_t(s.M) * s.N, NAN);
        gemm_f32(p, A.data(), s.M, C.data(), tp, isa);
        SCOPED_TRACE(testing::Message() << isa_name(isa) << (tp ? " pool" : " no pool") << " M=" << s.M
                                        << " K=" << s.K << " N=" << s.N);
        expect_close_f32(p, W, A, s.M, C, rows);
      }
    }
  }
}

// The AVX-512 fp32 path's blocking edges, every row checked: the 8 x 48 assembly tile next to partial row
// panels (M % 8), partial tile groups and a partial last tile (N % 48, N % 16), K tails and K below one
// 512-k chunk, more than one 384-channel weight block, and A packed by the pool (M >= 64) or by the caller,
// with and without a pool. (kNever: these shapes test the plain kernels.)
TEST(Gemm, f32_blocking_edges_match_double_reference) {
  expect_f32_every_row({{8, 256, 48},
                        {16, 513, 96},
                        {67, 300, 1000},
                        {13, 1, 200},
                        {70, 2560, 784},
                        {9, 255, 47},
                        {64, 257, 817}},
                       F32Strassen::kNever, 11);
}

// One Strassen-Winograd level (F32Strassen::kAlways: every M) against the double reference, every row, with
// the plain kernel's tolerance: all even sizes; odd M, K and N alone and together (the zero-padded quadrants,
// C through the scratch buffer); half sizes below one 8-row panel, one 48-channel group and one 16-channel
// tile; a half-K over two 512-k chunks and a half-N over two 384-channel weight blocks; M = 1 (half of
// one row is padding).
TEST(Gemm, f32_strassen_matches_double_reference_at_odd_sizes) {
  expect_f32_every_row({{32, 64, 96},
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
                       F32Strassen::kAlways, 21);
}

// kAuto forms the operands for large products and uses them from its M threshold on: M just below, at and
// just above it (odd), at two benchmark-sized shapes (the threshold is lower for wider N); kNever forms
// nothing. The results match either way.
TEST(Gemm, f32_strassen_auto_threshold_matches_double_reference) {
  ThreadPool pool(2);
  const int K = 2560, N = 1024;
  const auto W = random_matrix(size_t(N) * K, 31);
  const PackedF32 never = pack_f32(W.data(), K, N, F32Strassen::kNever);
  EXPECT_EQ(never.strassen_min_m, 0);
  EXPECT_EQ(never.sw.size(), 0u);
  const PackedF32 p = pack_f32(W.data(), K, N);
  if (best_isa() != Isa::kAvx512Vnni) {
    EXPECT_EQ(p.strassen_min_m, 0);  // only the AVX-512 path has it
    return;
  }
  ASSERT_GT(p.strassen_min_m, 1);
  EXPECT_GT(p.sw.size(), 0u);
  // The size range of the rule, at its edges: K >= 2048 and N >= 1024.
  for (const auto& [k, n] : {std::pair{2047, 1024}, {2048, 1024}, {2048, 1023}}) {
    const auto w = random_matrix(size_t(n) * k, 33);
    EXPECT_EQ(pack_f32(w.data(), k, n).sw.size() > 0, k >= 2048 && n >= 1024) << "K=" << k << " N=" << n;
  }
  // Around the threshold at N = 1024 and at a wider N, where it is lower.
  const auto W2 = random_matrix(size_t(2048) * K, 34);
  const PackedF32 p2 = pack_f32(W2.data(), K, 2048);
  EXPECT_LT(p2.strassen_min_m, p.strassen_min_m);
  for (const auto& [pp, ww] : {std::pair{&p, &W}, {&p2, &W2}}) {
    const int m0 = pp->strassen_min_m, n = pp->N;
    const auto A = random_matrix(size_t(m0 + 1) * K, 32);
    for (int m : {m0 - 1, m0, m0 + 1}) {
      std::vector<float> C(size_t(m) * n, NAN);
      gemm_f32(*pp, A.data(), m, C.data(), &pool, Isa::kAvx512Vnni);
      SCOPED_TRACE(testing::Message() << "M=" << m << " N=" << n << " (threshold " << m0 << ")");
      expect_close_f32(*pp, *ww, A, m, C, {0, 1, m / 2, m - 2, m - 1});
    }
  }
}

// defaults: also the default shapes (M = 1 and 3), not only the odd ones.
void check_quant_mode(int bits, int block, bool defaults = true) {
  ThreadPool pool(2);
  for (const Shape& s : shapes_for(block > 0)) {
    if (!defaults && s.K * s.N >= 2560 * 1024) continue;
    const auto W = random_matrix(size_t(s.N) * s.K, 3);
    const auto A = random_matrix(size_t(s.M) * s.K, 4);
    const QuantMatrix w = quantize_bits(W.data(), s.K, s.N, bits, block);
    QuantActs a;
    a.resize(s.M, w);
    quantize_acts(A.data(), s.M, s.K, a, &pool);
    for (Isa isa : isas()) {
      std::vector<float> C(size_t(s.M) * s.N, NAN);
      gemm_quant(w, a, C.data(), &pool, isa);
      SCOPED_TRACE(testing::Message() << isa_name(isa) << " bits=" << bits << " block=" << block
                                      << " M=" << s.M << " K=" << s.K << " N=" << s.N);
      expect_close_quant(w, a, C, check_rows(s.M));
    }
  }
}

TEST(Gemm, int8_block0_matches_double_reference) {
  check_quant_mode(8, 0);
}
TEST(Gemm, int4_block64_matches_double_reference) {
  check_quant_mode(4, 64);
}
TEST(Gemm, w4a8_per_channel_matches_double_reference) {
  check_quant_mode(4, 0);
}
// gemv-bw's low-bit rows (block 64) at every default shape, and the same widths per channel (K padded to
// the 16-k group; no tool uses them) at the odd shapes.
TEST(Gemm, int3_and_int2_match_double_reference) {
  for (int bits : {3, 2}) {
    check_quant_mode(bits, 64);
    check_quant_mode(bits, 0, false);
  }
}

// The quantized kernels' full 8-row tiles next to their row, tile-group and partial-tile tails (the shapes
// above have at most 7 rows in the quantized modes), every row checked: 8 rows, 19 = 2 x 8 + 3, 17 with an
// odd number of 16-channel tiles and a partial last tile, K with several blocks (block 64) or a K tail
// (per-channel modes, K padded to the code group).
TEST(Gemm, quant_row_tiles_and_tails_match_double_reference) {
  ThreadPool pool(2);
  struct Mode {
    int bits, block;
  };
  for (const Mode mode :
       {Mode{4, 64}, Mode{4, 0}, Mode{8, 0}, Mode{3, 64}, Mode{2, 64}, Mode{3, 0}, Mode{2, 0}}) {
    std::vector<Shape> shapes = {{8, 128, 32}, {19, 320, 72}, {17, 1024, 49}, {24, 64, 16}};
    if (mode.block == 0) {
      shapes.push_back({9, 301, 48});
      shapes.push_back({12, 13, 33});
    }
    for (const Shape& s : shapes) {
      const auto W = random_matrix(size_t(s.N) * s.K, 13);
      const auto A = random_matrix(size_t(s.M) * s.K, 14);
      const QuantMatrix w = quantize_bits(W.data(), s.K, s.N, mode.bits, mode.block);
      QuantActs a;
      a.resize(s.M, w);
      quantize_acts(A.data(), s.M, s.K, a, &pool);
      std::vector<int> rows(size_t(s.M));
      for (int m = 0; m < s.M; ++m) rows[size_t(m)] = m;
      for (Isa isa : isas()) {
        for (ThreadPool* tp : {&pool, static_cast<ThreadPool*>(nullptr)}) {
          std::vector<float> C(size_t(s.M) * s.N, NAN);
          gemm_quant(w, a, C.data(), tp, isa);
          SCOPED_TRACE(testing::Message()
                       << isa_name(isa) << (tp ? " pool" : " no pool") << " bits=" << mode.bits
                       << " block=" << mode.block << " M=" << s.M << " K=" << s.K << " N=" << s.N);
          expect_close_quant(w, a, C, rows);
        }
      }
    }
  }
}

// The quantizers themselves: every dequantized weight lies within half a step of the original.
TEST(Gemm, quantized_weights_round_to_nearest_code) {
  const int K = 192, N = 20;
  const auto W = random_matrix(size_t(N) * K, 5);
  for (int bits : {8, 4, 3, 2}) {
    for (int block : {0, 64}) {
      const QuantMatrix w = quantize_bits(W.data(), K, N, bits, block);
      const float step = 2.0f / float((1 << bits) - 1);  // values span at most [-1, 1]
      for (int n = 0; n < N; ++n) {
        for (int k = 0; k < K; ++k) {
          ASSERT_NEAR(w.dequantize(n, k), W[size_t(n) * K + k], 0.51f * step + 2e-3f) << bits << " " << block;
        }
      }
    }
  }
}

TEST(Gemm, activation_quantization_is_symmetric_per_row_with_block_sums) {
  const int M = 3, K = 130;
  auto A = random_matrix(size_t(M) * K, 6);
  A[5] = 2.5f;  // row 0's max
  const auto W = random_matrix(size_t(16) * K, 7);
  const QuantMatrix w = quantize_int4(W.data(), K, 16, 0);
  QuantActs a;
  a.resize(M, w);
  quantize_acts(A.data(), M, K, a, nullptr);
  EXPECT_FLOAT_EQ(a.scales.as<float>()[0], 2.5f / 127.0f);
  EXPECT_EQ(a.q.as<int8_t>()[5], 127);
  for (int m = 0; m < M; ++m) {
    int sum = 0;
    for (int k = 0; k < a.Kp; ++k) sum += a.q.as<int8_t>()[size_t(m) * a.Kp + k];
    EXPECT_EQ(a.sums.as<int32_t>()[m], sum);
    for (int k = K; k < a.Kp; ++k) EXPECT_EQ(a.q.as<int8_t>()[size_t(m) * a.Kp + k], 0);
  }
}

TEST(Gemm, activation_quantization_equals_nearbyint_and_clamp_with_ties_to_even) {
  // Both row quantizers (the portable one and, where the CPU has it, the vectorized one) against the plain
  // definition: s = max|a| / 127, q = clamp(nearbyint(a / s), -127, 127), on rows of odd lengths (a 16-lane
  // body and a tail) with exact ties: a row whose max is 127 has s = 1, so x.5 values must round to even.
  for (Isa isa : {Isa::kScalar, best_isa()})
    for (int K : {1, 15, 17, 130, 2563}) {
      const int M = 3;
      auto A = random_matrix(size_t(M) * K, 9 + K);
      for (int k = 0; k < K; ++k) A[k] = float((k % 9) - 4) + 0.5f;  // row 0: -3.5 .. 4.5, all ties
      A[0] = 127.0f;
      const auto W = random_matrix(size_t(16) * K, 10);
      const QuantMatrix w = quantize_int4(W.data(), K, 16, 0);
      QuantActs a;
      a.resize(M, w);
      quantize_acts(A.data(), M, K, a, nullptr, isa);
      for (int m = 0; m < M; ++m) {
        float amax = 0.0f;
        for (int k = 0; k < K; ++k) amax = std::max(amax, std::fabs(A[size_t(m) * K + k]));
        const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
        ASSERT_EQ(a.scales.as<float>()[m], s) << "K " << K << " row " << m;
        for (int k = 0; k < K; ++k) {
          const float want = std::clamp(std::nearbyint(A[size_t(m) * K + k] * (1.0f / s)), -127.0f, 127.0f);
          ASSERT_EQ(a.q.as<int8_t>()[size_t(m) * a.Kp + k], int8_t(want))
              << isa_name(isa) << " K " << K << " [" << m << "][" << k << "]";
        }
      }
      if (K >= 9) {
        EXPECT_EQ(a.q.as<int8_t>()[1], -2);  // -2.5 -> -2 (even)
        EXPECT_EQ(a.q.as<int8_t>()[2], -2);  // -1.5 -> -2
        EXPECT_EQ(a.q.as<int8_t>()[4], 0);   // 0.5 -> 0
        EXPECT_EQ(a.q.as<int8_t>()[5], 2);   // 1.5 -> 2
      }
    }
}

TEST(Gemm, block64_requires_k_multiple_of_64) {
  const auto W = random_matrix(size_t(16) * 100, 8);
  EXPECT_THROW(quantize_int4(W.data(), 100, 16, 64), Error);
}

// Blocks hold whole code groups: 8 k for 8 and 4 bits, 16 k for 3 and 2 bits; other widths are refused.
TEST(Gemm, block_sizes_and_bit_widths_are_checked) {
  const auto W = random_matrix(size_t(16) * 96, 9);
  EXPECT_NO_THROW(quantize_bits(W.data(), 96, 16, 4, 8));
  EXPECT_NO_THROW(quantize_bits(W.data(), 96, 16, 3, 16));
  for (int bits : {3, 2}) {
    EXPECT_THROW(quantize_bits(W.data(), 96, 16, bits, 8), Error) << bits;
    EXPECT_THROW(quantize_bits(W.data(), 96, 16, bits, 24), Error) << bits;
  }
  for (int bits : {1, 5, 16}) EXPECT_THROW(quantize_bits(W.data(), 96, 16, bits, 0), Error) << bits;
}

// ---- MNN vocabulary ------------------------------------------------------------------------------------

TEST(GemmSpeedArgs, test_names_map_to_mnn_modes_in_order) {
  EXPECT_EQ(*modes_for_test("speed/GemmSpeedAll"),
            (std::vector<Mode>{Mode::kFloat, Mode::kInt8B0, Mode::kInt4B64}));
  EXPECT_EQ(*modes_for_test("speed/GemmSpeedFloat"), std::vector<Mode>{Mode::kFloat});
  EXPECT_EQ(*modes_for_test("speed/GemmSpeedInt8"), std::vector<Mode>{Mode::kInt8B0});
  EXPECT_EQ(*modes_for_test("speed/GemmSpeedInt4"), std::vector<Mode>{Mode::kInt4B64});
  EXPECT_EQ(*modes_for_test("GemmSpeedInt4A8"), std::vector<Mode>{Mode::kInt4A8});
  EXPECT_FALSE(modes_for_test("speed/GemmSpeedInt2").has_value());
  EXPECT_EQ(int(Mode::kInt4B64), 1);
  EXPECT_EQ(int(Mode::kInt8B0), 2);
}

TEST(GemmSpeedArgs, int4b64_skips_k_not_multiple_of_64_and_maxm_limits_m) {
  EXPECT_FALSE(config_runs({2561, 4096, 0}, 8, Mode::kInt4B64));
  EXPECT_TRUE(config_runs({2561, 4096, 0}, 8, Mode::kInt8B0));
  EXPECT_TRUE(config_runs({2561, 4096, 0}, 8, Mode::kFloat));
  EXPECT_TRUE(config_runs({2560, 4096, 0}, 512, Mode::kInt4B64));
  EXPECT_TRUE(config_runs({2560, 4096, 32}, 32, Mode::kFloat));
  EXPECT_FALSE(config_runs({2560, 4096, 32}, 128, Mode::kFloat));
}

TEST(GemmSpeedArgs, backend_and_precision_accept_mnn_numbers_and_names) {
  EXPECT_EQ(parse_backend("0"), Backend::kCpu);
  EXPECT_EQ(parse_backend("1"), Backend::kMetal);
  EXPECT_EQ(parse_backend("2"), Backend::kCuda);
  EXPECT_EQ(parse_backend("3"), Backend::kOpenCL);
  EXPECT_EQ(parse_backend("7"), Backend::kVulkan);
  EXPECT_EQ(parse_backend("opencl"), Backend::kOpenCL);
  EXPECT_THROW(parse_backend("4"), Error);
  EXPECT_THROW(parse_backend("gpu"), Error);
  EXPECT_EQ(parse_precision("0"), 0);
  EXPECT_EQ(parse_precision("2"), 2);
  EXPECT_EQ(parse_precision("low"), 2);
  EXPECT_THROW(parse_precision("3"), Error);
}

TEST(GemmSpeedArgs, cpu_threads_come_from_the_named_option_first_and_must_be_positive) {
  EXPECT_EQ(cpu_threads(-1, -1), 1);  // neither given: MNN's default
  EXPECT_EQ(cpu_threads(-1, 2), 2);   // MNN's positional form
  EXPECT_EQ(cpu_threads(3, 2), 3);    // --threads wins
  EXPECT_THROW(cpu_threads(0, -1), Error);
  EXPECT_THROW(cpu_threads(-1, 0), Error);
  EXPECT_THROW(cpu_threads(-1, -2), Error);
  EXPECT_THROW(cpu_threads(5000, -1), Error);
}

TEST(GemmSpeedArgs, gpu_mode_bitmask_is_parsed_and_validated) {
  const GpuMode g = parse_gpu_mode(68);
  EXPECT_EQ(g.memory, kMemoryBuffer);
  EXPECT_EQ(g.tuning, kTuningWide);
  const GpuMode f = parse_gpu_mode(80);
  EXPECT_EQ(f.memory, kMemoryBuffer);
  EXPECT_EQ(f.tuning, kTuningFast);
  const GpuMode d = parse_gpu_mode(0);  // OpenCL's defaults
  EXPECT_EQ(d.memory, kMemoryImage);
  EXPECT_EQ(d.tuning, kTuningWide);
  EXPECT_EQ(parse_gpu_mode(129).tuning, kTuningNone);
  EXPECT_THROW(parse_gpu_mode(32), Error);   // unknown bit
  EXPECT_THROW(parse_gpu_mode(256), Error);  // unknown bit
  EXPECT_THROW(parse_gpu_mode(192), Error);  // BUFFER and IMAGE
  EXPECT_THROW(parse_gpu_mode(6), Error);    // HEAVY and WIDE
  EXPECT_THROW(parse_gpu_mode(-1), Error);
  EXPECT_EQ(parse_tuning("fast") | parse_gpu_memory("buffer"), 80);
  EXPECT_THROW(parse_tuning("fastest"), Error);
  EXPECT_THROW(parse_gpu_memory("texture"), Error);
}

TEST(GemmSpeedArgs, shape_flag_takes_k_n_and_optional_max_m) {
  const ShapeConfig a = parse_shape("2560,4096");
  EXPECT_EQ(a.K, 2560);
  EXPECT_EQ(a.N, 4096);
  EXPECT_EQ(a.maxM, 0);
  const ShapeConfig b = parse_shape("896,4864,32");
  EXPECT_EQ(b.maxM, 32);
  EXPECT_THROW(parse_shape("2560"), Error);
  EXPECT_THROW(parse_shape("2560,0"), Error);
  EXPECT_THROW(parse_shape("2560,4096x"), Error);
  EXPECT_THROW(parse_shape("2560,4096,8,1"), Error);
}

TEST(GemmSpeedOutput, cpu_line_is_mnn_printf_format) {
  // The line from MNN's docs: M=32 K=2560 N=4096 at 3.768 ms (MNN printed 178.11 from its unrounded avg).
  char expect[256];
  std::snprintf(expect, sizeof expect, "  %-28s  M=%-5d K=%-5d N=%-5d  avg=%.3f ms  %.2f GFLOPS\n",
                "float-gemm", 32, 2560, 4096, 3.768, 2.0 * 32 * 2560 * 4096 / (3.768 * 1e6));
  EXPECT_EQ(cpu_line("float-gemm", 32, 2560, 4096, 3.768), expect);
  EXPECT_EQ(cpu_line("float-gemm", 32, 2560, 4096, 3.768),
            "  float-gemm                    M=32    K=2560  N=4096   avg=3.768 ms  178.10 GFLOPS\n");
}

TEST(GemmSpeedOutput, gpu_line_is_mnn_printf_format) {
  EXPECT_EQ(
      gpu_line("int4b64-gemm", 32, 2560, 4096, 1.633, 0.745),
      "  int4b64-gemm                  M=32    K=2560  N=4096   total=1.633 ms (410.95 GFLOPS)  gpu=0.745 ms "
      "(900.79 GFLOPS)\n");
}

TEST(GemmSpeedOutput, header_lines_are_mnns) {
  // GemmSpeed.cpp's banners, printBackendConfig and shape labels, as its MNN_PRINT formats make them.
  EXPECT_EQ(test_banner({Mode::kFloat}), "\n===== Float Conv1x1 GEMM Speed =====\n");
  EXPECT_EQ(test_banner({Mode::kInt8B0}), "\n===== Int8-Block0 Conv1x1 GEMM Speed =====\n");
  EXPECT_EQ(test_banner({Mode::kInt4B64}), "\n===== Int4-Block64 Conv1x1 GEMM Speed =====\n");
  EXPECT_EQ(test_banner(*modes_for_test("speed/GemmSpeedAll")), "\n===== All GEMM Speed Benchmark =====\n");
  EXPECT_EQ(backend_config_lines(Backend::kCpu, 2, 2), "Backend: CPU (type=0), precision=2, numthread=2\n");
  EXPECT_EQ(backend_config_lines(Backend::kOpenCL, 2, 68),
            "Backend: OpenCL (type=3), precision=2, numthread=68\n  OpenCL memory mode: BUFFER\n");
  EXPECT_EQ(backend_config_lines(Backend::kOpenCL, 0, 4),
            "Backend: OpenCL (type=3), precision=0, numthread=4\n  OpenCL memory mode: IMAGE\n");
  EXPECT_EQ(backend_config_lines(Backend::kOpenCL, 0, 0),
            "Backend: OpenCL (type=3), precision=0, numthread=0\n");
  EXPECT_EQ(backend_config_lines(Backend::kVulkan, 2, 0),
            "Backend: Vulkan (type=7), precision=2, numthread=0\n");
  EXPECT_EQ(backend_config_lines(Backend::kMetal, 0, 0),
            "Backend: Metal (type=1), precision=0, numthread=0\n");
  EXPECT_EQ(backend_config_lines(Backend::kCuda, 0, 0), "Backend: CUDA (type=2), precision=0, numthread=0\n");
  EXPECT_EQ(shape_label({2560, 4096, 0}, false), "--- K=2560 N=4096 ---\n");
  EXPECT_EQ(shape_label({9728, 2560, 0}, true), "\n--- K=9728 N=2560 ---\n");
}

}  // namespace
}  // namespace tilellm::gemm
