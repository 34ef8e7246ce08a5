// Tests for the GGML block-format kernels (src/format/quants.h) and the half/bfloat16 conversions (fp16.h).
//
// Oracle: fixtures written by tests/reference/make_quant_cases.py with the Python gguf package (dequantized
// rows and float64 dot products for random rows of every supported type). Every check runs twice, on the
// vector path the CPU offers and on the portable scalar path (forced through select_cpu_isa).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_isa.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/ggml_types.h"
#include "format/quants.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tilellm {
namespace {

const std::string kFixtureDir = std::string(TILELLM_SOURCE_DIR) + "/tests/data/quants/";

const GgmlType kSupported[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                               GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                               GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// ---- Fixture reading (format documented in make_quant_cases.py) ----

struct Case {
  int64_t n = 0;
  int n_vec = 0;
  std::vector<uint8_t> row;
  std::vector<float> w;       // [n] exact dequantized row
  std::vector<float> x;       // [n_vec][n]
  std::vector<double> dot;    // [n_vec] float64 sum w*x
  std::vector<double> scale;  // [n_vec] float64 sum |w*x|
};

class Reader {
 public:
  explicit Reader(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("cannot open fixture " + path + " (run tests/reference/make_quant_cases.py)");
    bytes_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    path_ = path;
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
  std::string magic() {
    char m[4];
    take(m, 4);
    return std::string(m, 4);
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  void take(void* dst, size_t len) {
    if (len > bytes_.size() - pos_) throw Error("fixture " + path_ + " is truncated");
    std::memcpy(dst, bytes_.data() + pos_, len);
    pos_ += len;
  }
  std::vector<uint8_t> bytes_;
  size_t pos_ = 0;
  std::string path_;
};

std::vector<Case> load_cases(GgmlType t) {
  Reader r(kFixtureDir + std::string(type_name(t)) + ".bin");
  if (r.magic() != "TLQC" || r.get<uint32_t>() != 1) throw Error("bad fixture header");
  if (r.get<uint32_t>() != static_cast<uint32_t>(t)) throw Error("fixture holds another type");
  const uint32_t count = r.get<uint32_t>();
  std::vector<Case> cases(count);
  for (Case& c : cases) {
    c.n = r.get<uint32_t>();
    c.n_vec = static_cast<int>(r.get<uint32_t>());
    const uint32_t nbytes = r.get<uint32_t>();
    if (nbytes != row_size(t, c.n)) throw Error("fixture row size does not match the type");
    c.row = r.get_vec<uint8_t>(nbytes);
    c.w = r.get_vec<float>(c.n);
    c.x = r.get_vec<float>(static_cast<size_t>(c.n) * c.n_vec);
    c.dot = r.get_vec<double>(c.n_vec);
    c.scale = r.get_vec<double>(c.n_vec);
  }
  if (!r.done()) throw Error("trailing bytes in fixture");
  return cases;
}

// Error bound for a float dot product of n terms, relative to sum |w_i x_i| (w_i exact, checked separately).
// With products and sums rounded to float (u = 2^-24), a sum in which every term passes through at most L
// roundings satisfies |computed - exact| <= gamma_L * sum |w_i x_i|, gamma_L = L u / (1 - L u) (Higham,
// Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 3.1). Every kernel keeps at least 8
// independent partial sums: scalar 8 chains of n/8, AVX2 32 chains of n/32 plus a plain-type tail of at most
// 31, and dot_row_multi adds one addition per 1024-element chunk. Combining partial sums costs at most 5
// levels and the product 1 rounding, so L = n/8 + 64 bounds every path. The float64 oracle's own error (~n
// 2^-53) is negligible next to this; the absolute floor covers underflow in products with subnormal weights
// (2^-149 per operation at most).
double dot_tolerance(int64_t n, double abs_sum) {
  const double u = std::ldexp(1.0, -24);
  const double L = static_cast<double>(n) / 8.0 + 64.0;
  return L * u / (1.0 - L * u) * abs_sum + 1e-35;
}

uint32_t bits_of(float f) {
  return std::bit_cast<uint32_t>(f);
}

// ---- Block-format kernels against the gguf fixtures ----

struct Param {
  GgmlType type;
  bool simd;
};

std::string param_name(const testing::TestParamInfo<Param>& info) {
  return std::string(type_name(info.param.type)) + (info.param.simd ? "_simd" : "_scalar");
}

class QuantKernels : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override { select_cpu_isa(GetParam().simd ? "best" : "scalar"); }
  void TearDown() override { select_cpu_isa("best"); }
};

TEST_P(QuantKernels, dequantize_row_is_bit_exact_with_gguf) {
  const GgmlType t = GetParam().type;
  for (const Case& c : load_cases(t)) {
    // Copy the row one byte past an aligned start: kernels must not depend on the row's alignment.
    std::vector<uint8_t> storage(c.row.size() + 1);
    std::memcpy(storage.data() + 1, c.row.data(), c.row.size());
    std::vector<float> out(c.n + 1, 1234.5f);
    dequantize_row(t, storage.data() + 1, out.data(), c.n);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < c.n; ++i) {
      if (bits_of(out[i]) != bits_of(c.w[i]) && mismatches++ < 5) {
        ADD_FAILURE() << type_name(t) << " n=" << c.n << " element " << i << ": got " << out[i]
                      << " expected " << c.w[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << type_name(t) << " n=" << c.n;
    EXPECT_EQ(out[c.n], 1234.5f) << "wrote past the end of the row";
  }
}

TEST_P(QuantKernels, dot_row_matches_float64_reference_within_bound) {
  const GgmlType t = GetParam().type;
  for (const Case& c : load_cases(t)) {
    std::vector<uint8_t> storage(c.row.size() + 3);
    std::memcpy(storage.data() + 3, c.row.data(), c.row.size());
    for (int j = 0; j < c.n_vec; ++j) {
      const float got = dot_row(t, storage.data() + 3, c.x.data() + j * c.n, c.n);
      EXPECT_NEAR(got, c.dot[j], dot_tolerance(c.n, c.scale[j]))
          << type_name(t) << " n=" << c.n << " vec " << j;
    }
  }
}

TEST_P(QuantKernels, dot_row_multi_matches_float64_reference_with_strides) {
  const GgmlType t = GetParam().type;
  for (const Case& c : load_cases(t)) {
    // Vectors padded to a stride of n + 5 (odd, so unaligned), outputs every second float.
    const int64_t x_stride = c.n + 5, y_stride = 2;
    std::vector<float> x(static_cast<size_t>(x_stride) * c.n_vec, std::nanf(""));
    for (int j = 0; j < c.n_vec; ++j) std::copy_n(c.x.data() + j * c.n, c.n, x.data() + j * x_stride);
    std::vector<float> y(static_cast<size_t>(y_stride) * c.n_vec, -7.0f);
    dot_row_multi(t, c.row.data(), c.n, x.data(), x_stride, c.n_vec, y.data(), y_stride);
    for (int j = 0; j < c.n_vec; ++j) {
      EXPECT_NEAR(y[j * y_stride], c.dot[j], dot_tolerance(c.n, c.scale[j]))
          << type_name(t) << " n=" << c.n << " vec " << j;
      EXPECT_EQ(y[j * y_stride + 1], -7.0f) << "wrote between output strides";
    }
    // A single vector and more vectors than the kernels group at once (4) take the other code paths.
    float one = 0.0f;
    dot_row_multi(t, c.row.data(), c.n, c.x.data(), c.n, 1, &one, 1);
    EXPECT_NEAR(one, c.dot[0], dot_tolerance(c.n, c.scale[0]));
    const int many = 9;
    std::vector<float> xs(static_cast<size_t>(c.n) * many), ys(many);
    for (int j = 0; j < many; ++j) std::copy_n(c.x.data() + (j % c.n_vec) * c.n, c.n, xs.data() + j * c.n);
    dot_row_multi(t, c.row.data(), c.n, xs.data(), c.n, many, ys.data(), 1);
    for (int j = 0; j < many; ++j) {
      EXPECT_NEAR(ys[j], c.dot[j % c.n_vec], dot_tolerance(c.n, c.scale[j % c.n_vec])) << "vec " << j;
    }
  }
}

std::vector<Param> all_params() {
  std::vector<Param> p;
  for (GgmlType t : kSupported) {
    p.push_back({t, true});
    p.push_back({t, false});
  }
  return p;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantKernels, testing::ValuesIn(all_params()), param_name);

TEST(QuantFixtures, every_supported_type_has_a_fixture_with_cases) {
  // A missing fixture must fail loudly, not skip: load_cases throws, which fails the test.
  for (GgmlType t : kSupported) {
    std::vector<Case> cases;
    EXPECT_NO_THROW(cases = load_cases(t)) << type_name(t);
    EXPECT_GE(cases.size(), 3u) << type_name(t);
    for (const Case& c : cases) EXPECT_GT(c.n_vec, 0);
  }
  std::ifstream f(kFixtureDir + "fp16.bin", std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing " << kFixtureDir << "fp16.bin";
}

TEST(QuantDispatch, simd_path_is_used_when_the_cpu_has_one) {
  select_cpu_isa("best");
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  const bool cpu = f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  EXPECT_STREQ(quant_isa_name(), cpu ? "avx2" : "scalar");
#elif defined(__aarch64__)
  EXPECT_STREQ(quant_isa_name(), "neon");  // Advanced SIMD is part of ARMv8-A
#else
  EXPECT_STREQ(quant_isa_name(), "scalar");
#endif
  select_cpu_isa("scalar");
  EXPECT_STREQ(quant_isa_name(), "scalar");
  select_cpu_isa("best");
}

// A row of n elements of type t: random bytes, every scale patched to a finite half of sane size.
std::vector<uint8_t> random_row(GgmlType t, int64_t n, std::mt19937& rng) {
  const TypeTraits& tr = type_traits(t);
  std::vector<uint8_t> row(row_size(t, n));
  for (auto& b : row) b = static_cast<uint8_t>(rng());
  const int64_t nb = n / tr.block_size;
  std::uniform_real_distribution<float> scale(0.001f, 0.1f);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = row.data() + b * tr.type_size;
    auto put_half = [&](size_t off) {
      const uint16_t h = fp32_to_fp16(scale(rng));
      std::memcpy(blk + off, &h, 2);
    };
    switch (t) {
      case GgmlType::F32: {
        const float v = scale(rng) - 0.05f;
        std::memcpy(blk, &v, 4);
        break;
      }
      case GgmlType::F16:
        put_half(0);
        break;
      case GgmlType::BF16: {
        const uint16_t h = fp32_to_bf16(scale(rng) - 0.05f);
        std::memcpy(blk, &h, 2);
        break;
      }
      case GgmlType::Q6_K:
        put_half(offsetof(BlockQ6_K, d));
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put_half(0);
        put_half(2);
        break;
      default:
        put_half(0);
        break;
    }
  }
  return row;
}

TEST(QuantDispatch, simd_and_scalar_agree_on_larger_random_rows) {
  // Beyond the fixtures: long rows of random bytes (scales patched to finite halves) checked against the
  // scalar path's dequantization with a float64 dot, for 576 x 1536-like lengths.
  std::mt19937 rng(7);
  for (GgmlType t : kSupported) {
    const int64_t n = 1536;
    const std::vector<uint8_t> row = random_row(t, n, rng);
    std::vector<float> x(n);
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);

    select_cpu_isa("scalar");
    std::vector<float> w_ref(n);
    dequantize_row(t, row.data(), w_ref.data(), n);
    select_cpu_isa("best");
    std::vector<float> w(n);
    dequantize_row(t, row.data(), w.data(), n);
    double dot = 0.0, abs_sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(bits_of(w[i]), bits_of(w_ref[i])) << type_name(t) << " element " << i;
      dot += static_cast<double>(w_ref[i]) * x[i];
      abs_sum += std::fabs(static_cast<double>(w_ref[i]) * x[i]);
    }
    EXPECT_NEAR(dot_row(t, row.data(), x.data(), n), dot, dot_tolerance(n, abs_sum)) << type_name(t);
  }
}

TEST(QuantCodeGroups, scale_times_code_plus_offset_is_the_dequantized_weight_bit_for_bit) {
  // Every type with a code-group form, random rows of 3 K-blocks (24 blocks of 32): scale * code + offset in
  // float equals dequantize_row's value exactly, and the codes stay in each format's range.
  std::mt19937 rng(11);
  int checked = 0;
  for (GgmlType t : kSupported) {
    if (!has_code_groups(t)) continue;
    const int64_t n = 768;
    const std::vector<uint8_t> row = random_row(t, n, rng);
    std::vector<float> want(n), scale(n / 16), offset(n / 16);
    std::vector<int8_t> codes(n);
    dequantize_row(t, row.data(), want.data(), n);
    row_code_groups(t, row.data(), n, codes.data(), scale.data(), offset.data());
    for (int64_t i = 0; i < n; ++i) {
      const float got = scale[size_t(i / 16)] * static_cast<float>(codes[size_t(i)]) + offset[size_t(i / 16)];
      ASSERT_EQ(bits_of(got), bits_of(want[size_t(i)])) << type_name(t) << " element " << i;
      ASSERT_GE(codes[size_t(i)], t == GgmlType::Q6_K ? -32 : t == GgmlType::Q5_0 ? -16 : 0) << type_name(t);
      ASSERT_LE(codes[size_t(i)], t == GgmlType::Q4_K ? 15 : 31) << type_name(t);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 5);  // Q5_0, Q5_1, Q4_K, Q5_K, Q6_K
  std::vector<int8_t> c(32);
  std::vector<float> sc(2), of(2);
  const std::vector<uint8_t> q8 = random_row(GgmlType::Q8_0, 32, rng);
  EXPECT_THROW(row_code_groups(GgmlType::Q8_0, q8.data(), 32, c.data(), sc.data(), of.data()), Error);
  EXPECT_THROW(row_code_groups(GgmlType::Q4_K, q8.data(), 32, c.data(), sc.data(), of.data()), Error);
}

TEST(QuantErrors, unsupported_types_and_bad_lengths_are_clear_errors) {
  EXPECT_FALSE(is_supported(GgmlType::Q2_K));
  EXPECT_FALSE(is_supported(GgmlType::Q8_1));
  for (GgmlType t : kSupported) EXPECT_TRUE(is_supported(t)) << type_name(t);
  std::vector<uint8_t> buf(1024);
  std::vector<float> out(1024);
  try {
    dequantize_row(GgmlType::Q2_K, buf.data(), out.data(), 256);
    FAIL() << "Q2_K accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q2_K"), std::string::npos) << e.what();
  }
  try {
    dot_row(GgmlType::Q4_K, buf.data(), out.data(), 100);
    FAIL() << "row length 100 accepted for Q4_K";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dot_row_multi(GgmlType::Q8_0, buf.data(), 33, out.data(), 33, 1, out.data() + 100, 1), Error);
  EXPECT_FLOAT_EQ(dot_row(GgmlType::Q8_0, buf.data(), out.data(), 0), 0.0f);
}

// ---- fp16 / bf16 conversions ----

// Value of a half from its fields, computed in double: an oracle that shares no code with fp16_to_fp32.
double half_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  return e ? sign * std::ldexp(1024.0 + m, e - 25) : sign * std::ldexp(m, -24);
}

TEST(Fp16, every_half_converts_exactly_and_round_trips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = fp16_to_fp32(h);
    const double v = half_value(h);
    if (std::isnan(v)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (i & 0x8000) != 0);
      ASSERT_EQ(fp32_to_fp16(f), h | 0x0200) << "NaN payload kept and quieted, " << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(f), v) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (i & 0x8000) != 0) << std::hex << i;
      ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << i;
    }
  }
}

// Nearest half to f (ties to even), by search over the ordered non-negative halves: the second oracle.
uint16_t nearest_half(float f) {
  if (std::isnan(f)) return 0x7e00;
  const double a = std::fabs(static_cast<double>(f));
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  // 65520 = 65504 + half an ulp: the tie goes to the even neighbour, which is "65536", i.e. inf.
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;  // largest half with value <= a
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (half_value(mid) <= a)
      lo = mid;
    else
      hi = static_cast<uint16_t>(mid - 1);
  }
  uint16_t best = lo;
  if (half_value(lo) != a) {
    const double up = lo == 0x7bff ? 65536.0 : half_value(static_cast<uint16_t>(lo + 1));
    const double dl = a - half_value(lo), du = up - a;
    if (du < dl || (du == dl && (lo & 1))) best = static_cast<uint16_t>(lo + 1);
  }
  return sign | best;
}

TEST(Fp16, float_to_half_rounds_to_nearest_even_over_a_sweep_of_floats) {
  // Every 4099th float bit pattern (all exponents and many mantissas) plus every float near the boundaries
  // where halves change behaviour: subnormal threshold, overflow threshold, exact ties.
  std::vector<uint32_t> patterns;
  for (uint64_t b = 0; b < (1ull << 32); b += 4099) patterns.push_back(static_cast<uint32_t>(b));
  for (float edge : {std::ldexp(1.0f, -25), std::ldexp(1.0f, -24), std::ldexp(1.0f, -14), 65504.0f, 65520.0f,
                     std::ldexp(1.5f, -24), 1.0f + std::ldexp(1.0f, -11)}) {
    const uint32_t b = bits_of(edge);
    for (uint32_t d = 0; d < 64; ++d) {
      patterns.push_back(b + d);
      patterns.push_back(b - d);
    }
  }
  for (uint32_t p : patterns) {
    for (uint32_t s : {0u, 0x80000000u}) {
      const float f = std::bit_cast<float>(p ^ s);
      const uint16_t got = fp32_to_fp16(f), want = nearest_half(f);
      if (std::isnan(f)) {
        ASSERT_TRUE(std::isnan(fp16_to_fp32(got))) << std::hex << (p ^ s);
      } else {
        ASSERT_EQ(got, want) << std::hex << "float bits 0x" << (p ^ s) << " (" << f << ")";
      }
    }
  }
}

TEST(Fp16, bf16_conversions_round_to_nearest_even_and_round_trip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = bf16_to_fp32(h);
    ASSERT_EQ(bits_of(f), i << 16);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(f))));
    } else {
      ASSERT_EQ(fp32_to_bf16(f), h) << std::hex << i;
    }
  }
  // Oracle in double: the two bfloat16 neighbours of f, nearest wins, ties to the even one.
  for (uint64_t b = 0; b < (1ull << 32); b += 65537 * 3 + 2) {
    const auto p = static_cast<uint32_t>(b);
    const float f = std::bit_cast<float>(p);
    if (std::isnan(f)) continue;
    const uint32_t lo = p & 0xffff0000u;
    const double vlo = std::bit_cast<float>(lo);
    const uint32_t hi_bits = lo + 0x10000u;  // the next bfloat16 away from zero
    const double vhi = (hi_bits & 0x7fffffffu) == 0x7f800000u
                           ? std::copysign(std::ldexp(1.0, 128), vlo)
                           : static_cast<double>(std::bit_cast<float>(hi_bits));
    const double dl = std::fabs(f - vlo), dh = std::fabs(vhi - f);
    const uint32_t want = (dh < dl || (dh == dl && ((lo >> 16) & 1))) ? hi_bits : lo;
    ASSERT_EQ(fp32_to_bf16(f), static_cast<uint16_t>(want >> 16)) << std::hex << p;
  }
}

TEST(Fp16, conversions_match_numpy_and_gguf_on_fixture_values) {
  Reader r(kFixtureDir + "fp16.bin");
  ASSERT_EQ(r.magic(), "TLQH");
  ASSERT_EQ(r.get<uint32_t>(), 1u);
  const uint32_t count = r.get<uint32_t>();
  const auto in = r.get_vec<float>(count);
  const auto half = r.get_vec<uint16_t>(count);
  const auto bf = r.get_vec<uint16_t>(count);
  ASSERT_TRUE(r.done());
  for (uint32_t i = 0; i < count; ++i) {
    if (std::isnan(in[i])) {
      // numpy keeps a signalling NaN signalling; we quiet it like F16C hardware does. Both must stay NaN.
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(in[i]))));
      EXPECT_EQ(fp32_to_fp16(in[i]) & 0x8000, half[i] & 0x8000);
      EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(in[i]))));
      EXPECT_EQ(fp32_to_bf16(in[i]), bf[i]) << "gguf quiets NaN the same way";
      continue;
    }
    EXPECT_EQ(fp32_to_fp16(in[i]), half[i]) << std::hex << bits_of(in[i]);
    EXPECT_EQ(fp32_to_bf16(in[i]), bf[i]) << std::hex << bits_of(in[i]);
  }
}

}  // namespace
}  // namespace tilellm
