// Tests for the quantized-activation kernels (src/format/quants_q8.h).
//
// Oracle: fixtures written by tests/reference/make_q8_cases.py: ggml's activation quantizers re-implemented
// in NumPy (expected bytes), and float64 dot products of independently decoded weights with the dequantized
// activations. Every check runs on each kernel path (scalar, avx2, avxvnni, avx512vnni, neon, neondot;
// selected through select_cpu_isa, skipped only where the CPU lacks the instructions). A
// second, C++-side reference (dequantize_row from quants.h) checks long random rows on every path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/cpu_isa.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/ggml_types.h"
#include "format/quants.h"
#include "format/quants_kernels.h"
#include "format/quants_q8.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tilellm {
namespace {

const std::string kFixtureDir = std::string(TILELLM_SOURCE_DIR) + "/tests/data/q8/";

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                 GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// ---- Fixture reading (format documented in make_q8_cases.py) ----

struct Case {
  int64_t n = 0;
  int n_vec = 0;
  size_t act_bytes = 0;
  std::vector<uint8_t> row;
  std::vector<float> x;         // [n_vec][n]
  std::vector<uint8_t> act;     // [n_vec][act_bytes] expected quantized activations
  std::vector<double> dot;      // [n_vec] ggml's formula, float64
  std::vector<double> abs_sum;  // [n_vec] scale of the rounding error
  std::vector<double> dot_deq;  // [n_vec] gguf-dequantized weights . dequantized activations
};

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("cannot open fixture " + path + " (run tests/reference/make_q8_cases.py)");
    bytes_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  template <typename T>
  T get() {
    T v;
    take(&v, sizeof v);
    return v;
  }
  template <typename T>
  std::vector<T> get_vec(size_t count) {
    std::vector<T> v(count);
    take(v.data(), count * sizeof(T));
    return v;
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  void take(void* dst, size_t len) {
    if (len > bytes_.size() - pos_) throw Error("fixture " + path_ + " is truncated");
    std::memcpy(dst, bytes_.data() + pos_, len);
    pos_ += len;
  }
  std::string path_;
  std::vector<uint8_t> bytes_;
  size_t pos_ = 0;
};

std::vector<Case> load_cases(GgmlType wt) {
  Reader r(kFixtureDir + std::string(type_name(wt)) + ".bin");
  const auto magic = r.get_vec<char>(4);
  if (std::string(magic.begin(), magic.end()) != "TLQ8" || r.get<uint32_t>() != 1)
    throw Error("bad fixture header");
  if (r.get<uint32_t>() != static_cast<uint32_t>(wt)) throw Error("fixture holds another weight type");
  if (r.get<uint32_t>() != static_cast<uint32_t>(activation_type(wt)))
    throw Error("fixture's activation type");
  std::vector<Case> cases(r.get<uint32_t>());
  for (Case& c : cases) {
    c.n = r.get<uint32_t>();
    c.n_vec = static_cast<int>(r.get<uint32_t>());
    const uint32_t row_bytes = r.get<uint32_t>();
    c.act_bytes = r.get<uint32_t>();
    if (row_bytes != row_size(wt, c.n)) throw Error("fixture row size does not match the type");
    c.row = r.get_vec<uint8_t>(row_bytes);
    c.x = r.get_vec<float>(static_cast<size_t>(c.n) * c.n_vec);
    c.act = r.get_vec<uint8_t>(c.act_bytes * c.n_vec);
    c.dot = r.get_vec<double>(c.n_vec);
    c.abs_sum = r.get_vec<double>(c.n_vec);
    c.dot_deq = r.get_vec<double>(c.n_vec);
  }
  if (!r.done()) throw Error("trailing bytes in fixture");
  return cases;
}

// ---- Error bound ----

// Bound on |computed - exact| for a dot product, relative to abs_sum = sum of |contributions| (each weight's
// scaled quant and offset parts times its activation; see make_q8_cases.py). The integer block sums are
// exact; a float rounding (u = 2^-24) happens only where a contribution is scaled and accumulated. If every
// contribution passes through at most L roundings, |error| <= gamma_L * abs_sum, gamma_L = L u / (1 - L u)
// (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 3.1). Counting L:
//  - forming a block's float contribution: dx * dy (exact for two halves, one rounding with Q8_K's float d),
//    int -> float of the integer sum (exact below 2^24; Q6_K's can round once), the scaling multiply or fused
//    multiply-add, the addition of Q4_1/Q5_1's m * s (itself exact): at most 4;
//  - accumulation: the scalar path keeps 4 partial sums (chains of n_blocks / 4), the AVX2 path two
//    accumulators per row (chains of n_blocks / 2 per lane), dot_row_q_multi with more than four rows adds
//    one addition per chunk (at most n_blocks); combining partial sums costs at most 6 levels.
// So L <= 2 * n_blocks + 16 for the block types. The plain types round each product once and keep at least 8
// chains of n / 8 plus a tail of at most 31: L <= n / 8 + 32. The float64 oracle's own error (~n 2^-53) is
// negligible. extra_roundings adds to L for oracles whose weights were rounded to float once more.
double dot_tolerance(GgmlType wt, int64_t n, double abs_sum, int extra_roundings = 0) {
  const int64_t block = type_traits(wt).block_size;
  const double L =
      (block == 1 ? static_cast<double>(n) / 8.0 + 32.0 : 2.0 * static_cast<double>(n / block) + 16.0) +
      extra_roundings;
  const double u = std::ldexp(1.0, -24);
  return L * u / (1.0 - L * u) * abs_sum + 1e-35;
}

// For Q4_1/Q5_1: sum over blocks of |m| * |s - d * sum(q)|, by how much ggml's use of the stored (rounded) s
// can move the result away from the dot product of dequantized values. 0 for the other types.
double q8_1_s_rounding(GgmlType wt, const uint8_t* row, const uint8_t* act, int64_t n) {
  if (wt != GgmlType::Q4_1 && wt != GgmlType::Q5_1) return 0.0;
  const size_t wbytes = type_traits(wt).type_size;
  double total = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* y = act + b * sizeof(BlockQ8_1);
    const double m =
        fp16_to_fp32(quant_detail::load_u16(row + b * wbytes + 2));  // m follows d in both layouts
    const double d = fp16_to_fp32(quant_detail::load_u16(y + offsetof(BlockQ8_1, d)));
    const double s = fp16_to_fp32(quant_detail::load_u16(y + offsetof(BlockQ8_1, s)));
    double sum = 0.0;
    for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(y[offsetof(BlockQ8_1, qs) + j]);
    total += std::fabs(m) * std::fabs(s - d * sum);
  }
  return total;
}

// ---- Fixture-driven tests, on both paths ----

const char* const kIsas[] = {"scalar", "avx2", "avxvnni", "avx512vnni", "neon", "neondot"};

struct Param {
  GgmlType type;
  const char* isa;
};

std::string param_name(const testing::TestParamInfo<Param>& info) {
  return std::string(type_name(info.param.type)) + "_" + info.param.isa;
}

class Q8Kernels : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!select_cpu_isa(GetParam().isa)) GTEST_SKIP() << "this CPU cannot run " << GetParam().isa;
  }
  void TearDown() override { select_cpu_isa("best"); }
};

TEST_P(Q8Kernels, quantize_activations_is_bit_exact_with_the_reference) {
  const GgmlType wt = GetParam().type, at = activation_type(wt);
  for (const Case& c : load_cases(wt)) {
    ASSERT_EQ(activation_row_size(at, c.n), c.act_bytes);
    for (int j = 0; j < c.n_vec; ++j) {
      // Output one byte past an aligned start, with a canary after the end.
      std::vector<uint8_t> out(c.act_bytes + 2, 0xA5);
      quantize_activations(at, c.x.data() + j * c.n, out.data() + 1, c.n);
      const uint8_t* want = c.act.data() + j * c.act_bytes;
      size_t first_bad = c.act_bytes;
      for (size_t i = 0; i < c.act_bytes && first_bad == c.act_bytes; ++i) {
        if (out[i + 1] != want[i]) first_bad = i;
      }
      EXPECT_EQ(first_bad, c.act_bytes)
          << type_name(at) << " n=" << c.n << " vec " << j << ": byte " << first_bad << " got "
          << int(out[first_bad + 1]) << " expected " << int(want[first_bad]);
      EXPECT_EQ(out[0], 0xA5);
      EXPECT_EQ(out[c.act_bytes + 1], 0xA5) << "wrote past the end";
    }
  }
}

TEST_P(Q8Kernels, dot_row_q_matches_float64_reference_within_bound) {
  const GgmlType wt = GetParam().type;
  for (const Case& c : load_cases(wt)) {
    // Unaligned copies: kernels must not depend on alignment.
    std::vector<uint8_t> row(c.row.size() + 3), act(c.act_bytes + 1);
    std::memcpy(row.data() + 3, c.row.data(), c.row.size());
    for (int j = 0; j < c.n_vec; ++j) {
      std::memcpy(act.data() + 1, c.act.data() + j * c.act_bytes, c.act_bytes);
      const float got = dot_row_q(wt, row.data() + 3, act.data() + 1, c.n);
      EXPECT_NEAR(got, c.dot[j], dot_tolerance(wt, c.n, c.abs_sum[j]))
          << type_name(wt) << " n=" << c.n << " vec " << j;
      // Against gguf's dequantized weights: one more rounding per weight, and Q8_1's rounded s.
      const double s_dev = q8_1_s_rounding(wt, c.row.data(), c.act.data() + j * c.act_bytes, c.n);
      EXPECT_NEAR(got, c.dot_deq[j], dot_tolerance(wt, c.n, c.abs_sum[j], 1) + s_dev)
          << type_name(wt) << " n=" << c.n << " vec " << j;
    }
  }
}

TEST_P(Q8Kernels, dot_row_q_multi_matches_reference_with_strides_and_many_rows) {
  const GgmlType wt = GetParam().type;
  for (const Case& c : load_cases(wt)) {
    // The fixture's rows at an odd byte stride, outputs every second float with canaries between.
    const size_t stride = c.act_bytes + 7;
    const int64_t y_stride = 2;
    for (int n_vec : {1, 2, 3, 4, 5, 7, 9, 13}) {
      std::vector<uint8_t> xq(stride * n_vec + 1, 0xEE);
      for (int j = 0; j < n_vec; ++j)
        std::memcpy(xq.data() + 1 + j * stride, c.act.data() + (j % c.n_vec) * c.act_bytes, c.act_bytes);
      std::vector<float> y(y_stride * n_vec, -7.0f);
      dot_row_q_multi(wt, c.row.data(), c.n, xq.data() + 1, stride, n_vec, y.data(), y_stride);
      for (int j = 0; j < n_vec; ++j) {
        const int k = j % c.n_vec;
        EXPECT_NEAR(y[j * y_stride], c.dot[k], dot_tolerance(wt, c.n, c.abs_sum[k]))
            << type_name(wt) << " n=" << c.n << " n_vec=" << n_vec << " vec " << j;
        EXPECT_EQ(y[j * y_stride + 1], -7.0f) << "wrote between output strides";
      }
    }
  }
}

std::vector<Param> all_params() {
  std::vector<Param> p;
  for (GgmlType t : kWeightTypes) {
    for (const char* isa : kIsas) p.push_back({t, isa});
  }
  return p;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Q8Kernels, testing::ValuesIn(all_params()), param_name);

TEST(Q8Fixtures, every_weight_type_has_a_fixture_with_cases) {
  // A missing fixture must fail loudly, not skip: load_cases throws, which fails the test.
  for (GgmlType t : kWeightTypes) {
    std::vector<Case> cases;
    EXPECT_NO_THROW(cases = load_cases(t)) << type_name(t);
    EXPECT_GE(cases.size(), 3u) << type_name(t);
    for (const Case& c : cases) EXPECT_GT(c.n_vec, 0);
  }
}

// ---- Types, sizes, errors ----

TEST(Q8Types, activation_type_follows_ggml_vec_dot_types) {
  EXPECT_EQ(activation_type(GgmlType::Q4_0), GgmlType::Q8_0);
  EXPECT_EQ(activation_type(GgmlType::Q5_0), GgmlType::Q8_0);
  EXPECT_EQ(activation_type(GgmlType::Q8_0), GgmlType::Q8_0);
  EXPECT_EQ(activation_type(GgmlType::Q4_1), GgmlType::Q8_1);
  EXPECT_EQ(activation_type(GgmlType::Q5_1), GgmlType::Q8_1);
  EXPECT_EQ(activation_type(GgmlType::Q4_K), GgmlType::Q8_K);
  EXPECT_EQ(activation_type(GgmlType::Q5_K), GgmlType::Q8_K);
  EXPECT_EQ(activation_type(GgmlType::Q6_K), GgmlType::Q8_K);
  EXPECT_EQ(activation_type(GgmlType::F16), GgmlType::F16);
  EXPECT_EQ(activation_type(GgmlType::BF16), GgmlType::BF16);
  EXPECT_EQ(activation_type(GgmlType::F32), GgmlType::F32);
}

TEST(Q8Types, activation_row_sizes_follow_the_block_layouts) {
  EXPECT_EQ(activation_row_size(GgmlType::Q8_0, 7 * 32), 7 * sizeof(BlockQ8_0));
  EXPECT_EQ(activation_row_size(GgmlType::Q8_1, 7 * 32), 7 * sizeof(BlockQ8_1));
  EXPECT_EQ(activation_row_size(GgmlType::Q8_K, 3 * 256), 3 * sizeof(BlockQ8_K));
  EXPECT_EQ(activation_row_size(GgmlType::F16, 7), 14u);
  EXPECT_EQ(activation_row_size(GgmlType::BF16, 7), 14u);
  EXPECT_EQ(activation_row_size(GgmlType::F32, 7), 28u);
  EXPECT_EQ(activation_row_size(GgmlType::Q8_K, 0), 0u);
}

// Runs f, expects a tilellm::Error whose message contains every string in needles.
template <class F>
void expect_error(F&& f, std::initializer_list<const char*> needles) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one naming " << *needles.begin();
  } catch (const Error& e) {
    for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(Q8Errors, unsupported_types_and_bad_lengths_are_clear_errors) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> x(1024);
  float y[4];
  expect_error([] { activation_type(GgmlType::Q2_K); }, {"Q2_K"});
  expect_error([] { activation_type(GgmlType::Q8_K); }, {"Q8_K"});
  expect_error([] { activation_type(static_cast<GgmlType>(99)); }, {"99"});
  expect_error([&] { dot_row_q(GgmlType::Q3_K, buf.data(), buf.data(), 256); }, {"Q3_K"});
  expect_error([&] { dot_row_q_multi(GgmlType::Q8_1, buf.data(), 32, buf.data(), 36, 1, y, 1); }, {"Q8_1"});
  expect_error([&] { quantize_activations(GgmlType::Q4_0, x.data(), buf.data(), 32); }, {"Q4_0"});
  expect_error([] { activation_row_size(GgmlType::Q4_K, 256); }, {"Q4_K"});
  // Lengths that are not whole blocks name the block size.
  expect_error([&] { dot_row_q(GgmlType::Q4_K, buf.data(), buf.data(), 100); }, {"Q4_K", "256"});
  expect_error([&] { dot_row_q_multi(GgmlType::Q4_1, buf.data(), 33, buf.data(), 36, 1, y, 1); },
               {"Q4_1", "32"});
  expect_error([&] { quantize_activations(GgmlType::Q8_0, x.data(), buf.data(), 33); }, {"Q8_0", "32"});
  expect_error([] { activation_row_size(GgmlType::Q8_K, 300); }, {"Q8_K", "256"});
  // Empty rows are valid.
  EXPECT_EQ(dot_row_q(GgmlType::Q4_0, buf.data(), buf.data(), 0), 0.0f);
}

// ---- Dispatch and SIMD-vs-scalar on long random rows ----

TEST(Q8Dispatch, the_best_path_the_cpu_runs_is_used) {
  select_cpu_isa("best");
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  const bool avx2 = f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool vnni = __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4));
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
  EXPECT_STREQ(quant_q8_isa_name(), !avx2 ? "scalar" : avx512 ? "avx512vnni" : vnni ? "avxvnni" : "avx2");
  EXPECT_EQ(select_cpu_isa("avx2"), avx2);
  EXPECT_FALSE(select_cpu_isa("neon"));
#elif defined(__aarch64__)
  // Advanced SIMD is part of ARMv8-A; the dot product is optional and read from the kernel's HWCAP bits.
  const bool dotprod = cpu_features().neon_dotprod;
  EXPECT_STREQ(quant_q8_isa_name(), dotprod ? "neondot" : "neon");
  EXPECT_TRUE(select_cpu_isa("neon"));
  EXPECT_STREQ(quant_q8_isa_name(), "neon");
  EXPECT_EQ(select_cpu_isa("neondot"), dotprod);
  EXPECT_FALSE(select_cpu_isa("avx2"));
#else
  EXPECT_STREQ(quant_q8_isa_name(), "scalar");
#endif
  EXPECT_FALSE(select_cpu_isa("avx1024"));
  select_cpu_isa("scalar");
  EXPECT_STREQ(quant_q8_isa_name(), "scalar");
  EXPECT_TRUE(select_cpu_isa("scalar"));
  select_cpu_isa("best");
}

// A random row of n elements of type t: random bytes with every fp16 scale field replaced by a finite half of
// either sign (so each bit of the quants and packed scales is exercised, and results stay finite).
std::vector<uint8_t> random_row(GgmlType t, int64_t n, std::mt19937& rng) {
  const TypeTraits& tr = type_traits(t);
  std::vector<uint8_t> row(row_size(t, n));
  for (auto& b : row) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> mag(-12.0f, 0.0f);
  auto value = [&] { return std::exp2(mag(rng)) * ((rng() & 1) ? -1.0f : 1.0f); };
  auto put = [&](uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); };
  for (int64_t b = 0; b < n / tr.block_size; ++b) {
    uint8_t* blk = row.data() + b * tr.type_size;
    switch (t) {
      case GgmlType::F32: {
        const float v = value();
        std::memcpy(blk, &v, 4);
        break;
      }
      case GgmlType::BF16:
        put(blk, fp32_to_bf16(value()));
        break;
      case GgmlType::Q6_K:
        put(blk + offsetof(BlockQ6_K, d), fp32_to_fp16(value()));
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put(blk, fp32_to_fp16(value()));
        put(blk + 2, fp32_to_fp16(value()));
        break;
      default:  // F16 and the types whose first field is d
        put(blk, fp32_to_fp16(value()));
        break;
    }
  }
  return row;
}

// Independent C++ reference for a row against a quantized activation row: dequantize_row's exact weights
// (quants.h, checked against gguf) times the dequantized activations in float64, plus Q8_1's s correction.
// abs_sum bounds the sum of |contributions|: |A q| <= |w| + |B| for a weight w = A q + B, so
// sum (|A q| + |B|) |a| <= sum (|w| + 2 |B|) |a|, plus |m s| per block for Q4_1/Q5_1.
struct Reference {
  double dot = 0.0, abs_sum = 0.0;
};

Reference reference_dot(GgmlType wt, const uint8_t* row, const uint8_t* act, int64_t n) {
  std::vector<float> w(n);
  dequantize_row(wt, row, w.data(), n);
  const GgmlType at = activation_type(wt);
  std::vector<double> a(n), offset(n, 0.0);
  const TypeTraits& tr = type_traits(wt);
  for (int64_t i = 0; i < n; ++i) {
    switch (at) {
      case GgmlType::Q8_0:
      case GgmlType::Q8_1: {
        const size_t bs = at == GgmlType::Q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ8_1);
        const uint8_t* y = act + (i / 32) * bs;
        a[i] = fp16_to_fp32(quant_detail::load_u16(y)) * static_cast<int8_t>(y[bs - 32 + i % 32]);
        break;
      }
      case GgmlType::Q8_K: {
        const uint8_t* y = act + (i / 256) * sizeof(BlockQ8_K);
        float d;
        std::memcpy(&d, y, 4);
        a[i] = static_cast<double>(d) * static_cast<int8_t>(y[offsetof(BlockQ8_K, qs) + i % 256]);
        break;
      }
      case GgmlType::F16:
        a[i] = fp16_to_fp32(quant_detail::load_u16(act + 2 * i));
        break;
      case GgmlType::BF16:
        a[i] = bf16_to_fp32(quant_detail::load_u16(act + 2 * i));
        break;
      default: {
        float v;
        std::memcpy(&v, act + 4 * i, 4);
        a[i] = v;
      }
    }
    const uint8_t* blk = row + (i / tr.block_size) * tr.type_size;
    if (wt == GgmlType::Q4_1 || wt == GgmlType::Q5_1) {
      offset[i] = fp16_to_fp32(quant_detail::load_u16(blk + 2));
    } else if (wt == GgmlType::Q4_K || wt == GgmlType::Q5_K) {
      int sc, mn;
      quant_detail::k_scale_min(blk + 4, static_cast<int>((i % 256) / 32), &sc, &mn);
      offset[i] = static_cast<double>(fp16_to_fp32(quant_detail::load_u16(blk + 2))) * mn;
    }
  }
  Reference r;
  for (int64_t i = 0; i < n; ++i) {
    r.dot += static_cast<double>(w[i]) * a[i];
    r.abs_sum += (std::fabs(w[i]) + 2.0 * std::fabs(offset[i])) * std::fabs(a[i]);
  }
  if (at == GgmlType::Q8_1) {  // ggml adds m * s with the block's stored s instead of m * d * sum(q)
    for (int64_t b = 0; b < n / 32; ++b) {
      const uint8_t* y = act + b * sizeof(BlockQ8_1);
      const double s = fp16_to_fp32(quant_detail::load_u16(y + offsetof(BlockQ8_1, s)));
      double ds = 0.0;
      for (int j = 0; j < 32; ++j) ds += a[32 * b + j];
      r.dot += offset[32 * b] * (s - ds);
      r.abs_sum += std::fabs(offset[32 * b] * s);
    }
  }
  return r;
}

// Row lengths that reach every code path: 4608 = 18 x 256 = 144 x 32 runs past the chunks that
// dot_row_q_multi decodes at a time; 34 and 5 blocks of 32 end in partial groups of two and one blocks (the
// fixtures have three); 1001 and 2 x 256 are odd lengths for the plain and K types.
std::vector<int64_t> random_row_lengths(GgmlType wt) {
  switch (type_traits(wt).block_size) {
    case 32:
      return {4608, 34 * 32, 5 * 32};
    case 256:
      return {4608, 2 * 256};
    default:
      return {4608, 1001};
  }
}

TEST(Q8Dispatch, every_path_matches_the_reference_on_long_random_rows) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> spread(-6.0f, 6.0f);
  for (GgmlType wt : kWeightTypes) {
    for (const int64_t n : random_row_lengths(wt)) {
      const GgmlType at = activation_type(wt);
      const std::vector<uint8_t> row = random_row(wt, n, rng);
      const int n_vec = 6;
      std::vector<float> x(n * n_vec);
      float scale = 1.0f;  // changes every 32 elements: blocks of very different magnitudes
      for (int64_t i = 0; i < n * n_vec; ++i) {
        if (i % 32 == 0) scale = std::exp2(spread(rng));
        x[i] = nd(rng) * scale;
      }
      const size_t ab = activation_row_size(at, n);
      std::vector<uint8_t> act(ab * n_vec);
      ASSERT_TRUE(select_cpu_isa("scalar"));
      for (int j = 0; j < n_vec; ++j) quantize_activations(at, x.data() + j * n, act.data() + j * ab, n);

      for (const char* isa : kIsas) {
        if (!select_cpu_isa(isa)) continue;
        std::vector<uint8_t> act_isa(ab * n_vec);
        for (int j = 0; j < n_vec; ++j)
          quantize_activations(at, x.data() + j * n, act_isa.data() + j * ab, n);
        ASSERT_EQ(act_isa, act) << type_name(at) << ": the " << isa
                                << " quantizer differs from the scalar one";
        std::vector<float> multi(n_vec);
        dot_row_q_multi(wt, row.data(), n, act.data(), ab, n_vec, multi.data(), 1);
        for (int j = 0; j < n_vec; ++j) {
          const Reference ref = reference_dot(wt, row.data(), act.data() + j * ab, n);
          // One more rounding: dequantize_row rounds offset weights to float.
          const double tol = dot_tolerance(wt, n, ref.abs_sum, 1);
          EXPECT_NEAR(dot_row_q(wt, row.data(), act.data() + j * ab, n), ref.dot, tol)
              << type_name(wt) << " n=" << n << " " << isa << " vec " << j;
          EXPECT_NEAR(multi[j], ref.dot, tol)
              << type_name(wt) << " n=" << n << " " << isa << " multi vec " << j;
        }
      }
      select_cpu_isa("best");
    }
  }
}

TEST(Q8Quantize, zero_rows_quantize_to_zero_and_dot_to_zero) {
  for (GgmlType at : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K}) {
    for (const char* isa : kIsas) {
      if (!select_cpu_isa(isa)) continue;
      std::vector<float> x(512, 0.0f);
      std::vector<uint8_t> out(activation_row_size(at, 512), 0x55);
      quantize_activations(at, x.data(), out.data(), 512);
      for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 0) << type_name(at) << " byte " << i;
    }
  }
  select_cpu_isa("best");
}

}  // namespace
}  // namespace tilellm

namespace tilellm {
namespace {

// dot_rows_q is dot_row_q over consecutive rows with the checks hoisted: results must be bit-identical.
TEST(QuantsQ8, dot_rows_q_equals_dot_row_q_per_row) {
  constexpr int64_t n = 7 * 32, n_rows = 13;
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> w(static_cast<size_t>(n * n_rows)), x(static_cast<size_t>(n));
  for (auto& v : w) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  // A Q8_0 weight row and a Q8_0 activation row share one block format, so the activation quantizer makes
  // rows.
  const size_t rb = activation_row_size(GgmlType::Q8_0, n);
  std::vector<uint8_t> rows(rb * n_rows), xq(rb);
  for (int64_t r = 0; r < n_rows; ++r)
    quantize_activations(GgmlType::Q8_0, &w[size_t(r * n)], &rows[r * rb], n);
  quantize_activations(GgmlType::Q8_0, x.data(), xq.data(), n);
  std::vector<float> y(n_rows, -1.0f);
  dot_rows_q(GgmlType::Q8_0, rows.data(), rb, n_rows, n, xq.data(), y.data());
  for (int64_t r = 0; r < n_rows; ++r) {
    EXPECT_EQ(y[size_t(r)], dot_row_q(GgmlType::Q8_0, &rows[r * rb], xq.data(), n)) << "row " << r;
    EXPECT_NE(y[size_t(r)], 0.0f);
  }
  EXPECT_THROW(dot_rows_q(GgmlType::Q2_K, rows.data(), rb, 1, n, xq.data(), y.data()), Error);
}

}  // namespace
}  // namespace tilellm
