// Per-op tests of the CPU backend (src/backends/cpu) against float64 NumPy references.
//
// Oracle: fixtures in tests/data/ops written by tests/reference/make_op_cases.py, which computes every op in
// float64 from its textbook definition (attention as a plain whole-row softmax, not the online softmax under
// test; quantized weights dequantized by the Python gguf package). A missing fixture fails the test.
//
// Every op runs on a 2-thread and on a 1-thread pool and the two outputs must be bit-identical: each output
// element is computed by one thread in a fixed order, so how the work is split must not change any bit. The
// 2-thread output is then compared with the reference under a bound derived in a comment at each check, in
// units of u = 2^-24, the unit roundoff of float32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/kv_cache.h"
#include "base/cpu_isa.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "format/ggml_types.h"
#include "op_cases.h"

namespace tilellm {
namespace {

using test::OpCase;

constexpr double kU = 0x1p-24;    // float32 unit roundoff
constexpr double kU16 = 0x1p-11;  // float16 unit roundoff
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> nans(size_t n) {
  return std::vector<float>(n, kNaN);
}

// Checks |got[i] - ref[i]| <= bound(i) for every i (NaN fails), names the first few offenders, and records
// the largest err/bound ratio as a test property (visible with --gtest_output=xml).
void expect_within(const std::string& what, const std::vector<float>& got, const std::vector<double>& ref,
                   const std::function<double(size_t)>& bound) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - ref[i]);
    const double b = bound(i);
    if (!(err <= b)) {
      if (bad < 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << ref[i] << " (error " << err
                      << " > bound " << b << ")";
      ++bad;
    } else if (b > 0.0) {
      worst = std::max(worst, err / b);
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements are out of bounds";
  ::testing::Test::RecordProperty(what + ".max_err_over_bound", std::to_string(worst));
}

// The reference rounded to float: the one right answer where the op is a single correctly rounded float
// operation on exact inputs.
void expect_exact(const std::string& what, const std::vector<float>& got, const std::vector<double>& ref) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != float(ref[i])) {
      if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << float(ref[i]);
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ";
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  // memcmp rather than ==: NaN outputs must match too. An empty vector's data() may be null.
  if (!a.empty()) {
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
  }
}

class CpuOps : public ::testing::Test {
 protected:
  // Runs op(backend, buffer) on both pools, each over its own copy of `init`, requires bit-identical results
  // and returns the 2-thread one.
  std::vector<float> run_both(const std::vector<float>& init,
                              const std::function<void(Backend&, std::vector<float>&)>& op) {
    std::vector<float> two = init, one = init;
    op(cpu2_, two);
    op(cpu1_, one);
    expect_same_bits(two, one, "the 1-thread and 2-thread results differ");
    return two;
  }

  void glu_matches_reference();

  ThreadPool pool1_{1};
  ThreadPool pool2_{2};
  CpuBackend cpu1_{pool1_};
  CpuBackend cpu2_{pool2_};
};

// ---- RMSNorm ----

TEST_F(CpuOps, RmsnormMatchesFloat64Reference) {
  for (const char* name : {"rmsnorm_5x589", "rmsnorm_1x37_large", "rmsnorm_3x37_near_eps",
                           "rmsnorm_heads_45x80", "rmsnorm_heads_9x256"}) {
    SCOPED_TRACE(name);
    const OpCase c(name);
    const std::vector<float> x = c.f32("x"), w = c.f32("w");
    const std::vector<double> ref = c.f64("y");
    const int64_t rows = int64_t(c.dims("x")[0]), n = int64_t(c.dims("x")[1]);
    const float eps = c.f32_scalar("eps");
    const std::vector<float> y = run_both(nans(x.size()), [&](Backend& be, std::vector<float>& out) {
      be.rmsnorm(x.data(), w.data(), out.data(), rows, n, eps);
    });
    // The sum of squares runs in four float partial sums of n/4 terms: relative error <= (n/4 + 3)u; the
    // square root halves that and 1/sqrt adds 2u; x * scale * w adds 2u. For n = 589 that is ~80u = 4.8e-6
    // in the worst case, so 1e-5 of |y| holds with margin, while a wrong mean, eps (the near-eps case) or
    // weight index is off by far more.
    expect_within(name, y, ref, [&](size_t i) { return 1e-5 * std::abs(ref[i]); });

    // y may alias x (the layer loop normalizes in place): same bits as out of place.
    std::vector<float> in_place = x;
    cpu2_.rmsnorm(in_place.data(), w.data(), in_place.data(), rows, n, eps);
    expect_same_bits(in_place, y, "in-place rmsnorm differs from out-of-place");
  }
}

// ---- RoPE ----

const char* const kRopeCases[] = {"rope_norm_64", "rope_norm_partial_80", "rope_neox_256",
                                  "rope_neox_partial_80"};

TEST_F(CpuOps, RopeTableHoldsCosSinOfEveryAngle) {
  for (const char* name : kRopeCases) {
    SCOPED_TRACE(name);
    const OpCase c(name);
    const int64_t rope_dim = c.int_scalar("rope_dim"), n_pos = c.int_scalar("n_pos");
    const RopeTable table(n_pos, rope_dim, c.f32_scalar("base"), c.f32_scalar("freq_scale"));
    ASSERT_EQ(table.n_pos, n_pos);
    ASSERT_EQ(table.n_half, rope_dim / 2);
    const std::vector<int32_t> pos = c.i32("pos");
    const std::vector<double> cs = c.f64("cos_sin");  // [n_tok][rope_dim/2][2]
    std::vector<float> got;
    for (int32_t p : pos) got.insert(got.end(), table.at(p), table.at(p) + rope_dim);
    // The table is cos/sin computed in double and rounded once to float: within half an ulp of values below 1
    // (2^-25), plus the double's own error (~1e-16 for the angles here, up to 4095 rad).
    expect_within(std::string(name) + ".table", got, cs, [](size_t) { return 0x1p-25 + 1e-12; });
  }
}

TEST_F(CpuOps, RopeMatchesFloat64Reference) {
  for (const char* name : kRopeCases) {
    SCOPED_TRACE(name);
    const OpCase c(name);
    const std::vector<float> x = c.f32("x");
    const std::vector<double> ref = c.f64("y");
    const std::vector<int32_t> pos = c.i32("pos");
    const int64_t n_tok = int64_t(c.dims("x")[0]), n_heads = int64_t(c.dims("x")[1]);
    const int64_t head_dim = int64_t(c.dims("x")[2]);
    const int64_t rope_dim = c.int_scalar("rope_dim"), half = rope_dim / 2;
    const RopeMode mode = c.int_scalar("mode") == 0 ? RopeMode::Norm : RopeMode::Neox;
    const RopeTable table(c.int_scalar("n_pos"), rope_dim, c.f32_scalar("base"), c.f32_scalar("freq_scale"));
    const std::vector<float> y = run_both(x, [&](Backend& be, std::vector<float>& v) {
      be.rope(v.data(), n_tok, n_heads, head_dim, rope_dim, pos.data(), table, mode);
    });
    // Index of the other element of i's rotation pair.
    auto partner = [&](size_t i) -> size_t {
      const int64_t d = int64_t(i) % head_dim;
      const int64_t pd = mode == RopeMode::Norm ? (d ^ 1) : (d < half ? d + half : d - half);
      return i - size_t(d) + size_t(pd);
    };
    // y0 = a*c - b*s with c, s rounded to float (2^-25 absolute each) and three float roundings (products and
    // difference, u relative to |a| + |b| at most each): |error| <= (0.5 + 3)u (|a| + |b|). 4u leaves a
    // margin.
    std::vector<float> rotated, unrotated, unrotated_in;
    std::vector<double> rotated_ref, scale;
    for (size_t i = 0; i < y.size(); ++i) {
      if (int64_t(i) % head_dim < rope_dim) {
        rotated.push_back(y[i]);
        rotated_ref.push_back(ref[i]);
        scale.push_back(std::abs(double(x[i])) + std::abs(double(x[partner(i)])));
      } else {
        unrotated.push_back(y[i]);
        unrotated_in.push_back(x[i]);
      }
    }
    expect_within(name, rotated, rotated_ref, [&](size_t i) { return 4 * kU * scale[i]; });
    // Dimensions past rope_dim pass through untouched.
    expect_same_bits(unrotated, unrotated_in, "dims past rope_dim changed");
  }
}

TEST_F(CpuOps, RopeRejectsPositionsOutsideTheTable) {
  const RopeTable table(8, 4, 10000.0f, 1.0f);
  std::vector<float> x(2 * 4, 1.0f);
  for (int32_t bad : {8, -1}) {
    const int32_t pos[2] = {0, bad};
    EXPECT_THROW(cpu2_.rope(x.data(), 2, 1, 4, 4, pos, table, RopeMode::Norm), Error) << bad;
  }
}

// ---- GLU and add ----

TEST_F(CpuOps, GluMatchesFloat64Reference) {
  // Both exponentials: the vectorized one (where the CPU has AVX2) and std::exp.
  for (bool simd : {true, false}) {
    select_cpu_isa(simd ? "best" : "scalar");
    glu_matches_reference();
  }
  select_cpu_isa("best");
}

TEST_F(CpuOps, GluVectorExponentialCoversTheFloatRange) {
  // A sweep over every magnitude the gate can take, including where e^-x overflows or underflows: the SiLU
  // result (up = 1) within the same 1e-6 relative bound as above (which allows the exponential 2 ulp), plus
  // an absolute 1e-36 for results flushed to zero because e^-x overflows a float (below x = -88.72, where
  // |x| e^x < 3e-37; std::exp gives the same there).
  std::vector<float> gate, up;
  for (float x = -120.0f; x <= 120.0f; x += 0.0137f) gate.push_back(x);
  for (float x : {-1e30f, -89.0f, -88.7f, -87.4f, -1e-30f, 0.0f, 1e-30f, 87.4f, 88.7f, 89.0f, 1e30f}) {
    gate.push_back(x);
  }
  up.assign(gate.size(), 1.0f);
  std::vector<float> y(gate.size());
  cpu2_.glu(gate.data(), up.data(), y.data(), int64_t(gate.size()), FfnAct::SiLU);
  for (size_t i = 0; i < gate.size(); ++i) {
    const double x = gate[i], ref = x / (1.0 + std::exp(-x));
    ASSERT_LE(std::abs(double(y[i]) - ref), 1e-6 * std::abs(ref) + 1e-36) << "x = " << x << ": " << y[i];
  }
}

void CpuOps::glu_matches_reference() {
  for (const char* name : {"glu_silu_589", "glu_silu_4109", "glu_gelu_589", "glu_gelu_4109"}) {
    SCOPED_TRACE(name);
    const OpCase c(name);
    const std::vector<float> gate = c.f32("gate"), up = c.f32("up");
    const std::vector<double> ref = c.f64("y");
    const FfnAct act = c.int_scalar("act") == 0 ? FfnAct::SiLU : FfnAct::GeluTanh;
    const std::vector<float> y = run_both(nans(gate.size()), [&](Backend& be, std::vector<float>& out) {
      be.glu(gate.data(), up.data(), out.data(), int64_t(gate.size()), act);
    });
    if (act == FfnAct::SiLU) {
      // x / (1 + e^-x) * up: expf within 1 ulp (2u), then the sum, quotient and product round once each, and
      // an exp error passes into 1/(1 + e) damped by e/(1+e) <= 1: <= ~6u = 3.6e-7 relative. 1e-6 of |y|.
      expect_within(name, y, ref, [&](size_t i) { return 1e-6 * std::abs(ref[i]); });
    } else {
      // 0.5x(1 + tanh z) * up. The products round to ~6u relative. 1 + tanh z is formed in float, so where
      // tanh z is near -1 (x below about -3) it carries an absolute error of a few ulps of 1 (tanhf within
      // 2u, the sum within u, z's own ~4u error damped by 1 - tanh^2 z): the result's error is bounded by
      // 8u * 0.5|x * up| there, although its relative error can be large (the exact value is tiny). This is
      // inherent to the tanh form evaluated in float, not a fault of the op.
      expect_within(name, y, ref, [&](size_t i) {
        return 1e-6 * std::abs(ref[i]) + 8 * kU * 0.5 * std::abs(double(gate[i]) * double(up[i]));
      });
    }
  }
}

TEST_F(CpuOps, AddIsCorrectlyRounded) {
  const OpCase c("add_4133");
  const std::vector<float> acc = c.f32("acc"), x = c.f32("x");
  const std::vector<double> ref = c.f64("y");
  const std::vector<float> y = run_both(
      acc, [&](Backend& be, std::vector<float>& a) { be.add(a.data(), x.data(), int64_t(x.size())); });
  // A float sum is correctly rounded, and so is float(double sum) (double holds 2*24+2 bits): equal bits.
  expect_exact("add_4133", y, ref);
}

// ---- Matmul and embedding ----

Weight weight_of(const OpCase& c, const std::vector<uint8_t>& raw, const std::string& what) {
  Weight w;
  w.name = what;
  w.type = GgmlType(uint32_t(c.int_scalar("type")));
  w.n_in = c.int_scalar("n_in");
  w.n_out = c.int_scalar("n_out");
  w.row_bytes = row_size(w.type, w.n_in);
  w.data = raw.data();
  EXPECT_EQ(raw.size(), w.row_bytes * size_t(w.n_out)) << "fixture row size disagrees for " << what;
  return w;
}

TEST_F(CpuOps, MatmulMatchesFloat64ReferenceForEveryWeightType) {
  for (const char* name :
       {"matmul_f32", "matmul_f16", "matmul_q8_0", "matmul_q4_0", "matmul_q4_k", "matmul_q6_k"}) {
    SCOPED_TRACE(name);
    const OpCase c(name);
    const std::vector<uint8_t> raw = c.u8("w");
    const Weight w = weight_of(c, raw, name);
    const std::vector<float> x = c.f32("x");
    const std::vector<double> ref = c.f64("y"), abs_ref = c.f64("y_abs");
    const int64_t all = int64_t(c.dims("x")[0]);
    // The float32 dot product of exact weights errs by at most about n/8 ulps (2u) of sum |w_i x_i| (the
    // contract of quants.h: eight-way partial sums); 4 more ulps cover the final reductions.
    const double tol = (double(w.n_in) / 8.0 + 4.0) * 2.0 * kU;
    // One token (the decode path), a partial token tile, and every token (full tiles plus a partial one).
    for (int64_t n_tok : {int64_t(1), int64_t(5), all}) {
      const std::string what = std::string(name) + ".tok" + std::to_string(n_tok);
      const std::vector<float> y =
          run_both(nans(size_t(n_tok * w.n_out)),
                   [&](Backend& be, std::vector<float>& out) { be.matmul(w, x.data(), n_tok, out.data()); });
      const std::vector<double> r(ref.begin(), ref.begin() + n_tok * w.n_out);
      expect_within(what, y, r, [&](size_t i) { return tol * abs_ref[i]; });
    }
  }
}

TEST_F(CpuOps, EmbedIsTheScaledDequantizedRow) {
  for (const char* name : {"embed_f16", "embed_q8_0", "embed_q4_k", "embed_q6_k"}) {
    SCOPED_TRACE(name);
    const OpCase c(name);
    const std::vector<uint8_t> raw = c.u8("table");
    const Weight table = weight_of(c, raw, name);
    const std::vector<int32_t> ids = c.i32("ids");
    const float scale = c.f32_scalar("scale");
    const std::vector<double> ref = c.f64("y");
    const std::vector<float> y =
        run_both(nans(ids.size() * size_t(table.n_in)), [&](Backend& be, std::vector<float>& out) {
          be.embed(table, ids.data(), int64_t(ids.size()), scale, out.data());
        });
    // Dequantization is exact by definition and the one product with the scale is correctly rounded, while
    // the float64 product of two floats is exact: the rounded reference is the only right answer.
    expect_exact(name, y, ref);

    std::vector<float> out(size_t(table.n_in));
    for (int32_t bad : {int32_t(table.n_out), -1}) {
      EXPECT_THROW(cpu2_.embed(table, &bad, 1, scale, out.data()), Error) << "id " << bad;
    }
  }
}

// ---- KV store and attention ----

struct AttnCase {
  int64_t n_head, n_head_kv, head_dim, window, n_past, n_ctx, n_tok, n_pos, kv_dim;
  float scale;
  double score_abs;
  std::vector<float> q, k, v, y_abs;
  std::vector<double> y, y_f16;
  std::vector<int32_t> pos;  // the query tokens' positions: n_past ..

  explicit AttnCase(const OpCase& c)
      : n_head(c.int_scalar("n_head")),
        n_head_kv(c.int_scalar("n_head_kv")),
        head_dim(c.int_scalar("head_dim")),
        window(c.int_scalar("window")),
        n_past(c.int_scalar("n_past")),
        n_ctx(c.int_scalar("n_ctx")),
        n_tok(int64_t(c.dims("q")[0])),
        n_pos(int64_t(c.dims("k")[0])),
        kv_dim(n_head_kv * head_dim),
        scale(c.f32_scalar("scale")),
        score_abs(c.f64_scalar("score_abs")),
        q(c.f32("q")),
        k(c.f32("k")),
        v(c.f32("v")),
        y_abs(c.f32("y_abs")),
        y(c.f64("y")),
        y_f16(c.f64("y_f16")),
        pos(size_t(n_tok)) {
    std::iota(pos.begin(), pos.end(), int32_t(n_past));
  }
  AttnParams params() const { return AttnParams{n_head, n_head_kv, head_dim, scale, window}; }
};

// A two-layer cache whose layer 1 holds the case's history, written the way the layer loop writes it: the
// earlier positions in one call, then the batch being attended. Every other row (all of layer 0, positions
// past the history in layer 1) holds NaN, so a read of a row the op must not touch poisons the output.
KvCache cache_for(Backend& be, const AttnCase& a, GgmlType type) {
  KvCache kv(2, a.n_ctx, a.n_head_kv, a.head_dim, type);
  const std::vector<float> poison(size_t(a.n_ctx * a.kv_dim), kNaN);
  std::vector<int32_t> every(size_t(a.n_ctx));
  std::iota(every.begin(), every.end(), 0);
  for (int64_t layer = 0; layer < 2; ++layer)
    be.kv_store(kv, layer, poison.data(), poison.data(), every.data(), a.n_ctx);
  if (a.n_past > 0) be.kv_store(kv, 1, a.k.data(), a.v.data(), every.data(), a.n_past);
  const size_t off = size_t(a.n_past * a.kv_dim);
  be.kv_store(kv, 1, a.k.data() + off, a.v.data() + off, a.pos.data(), a.n_tok);
  return kv;
}

const char* const kAttnCases[] = {"attention_gqa_64", "attention_window_80", "attention_mqa_256",
                                  "attention_sharp_64"};

TEST_F(CpuOps, AttentionMatchesPlainSoftmaxReference) {
  for (bool simd : {true, false}) {
    select_cpu_isa(simd ? "best" : "scalar");
    SCOPED_TRACE(simd ? "simd row kernels" : "scalar row kernels");
    for (const char* name : kAttnCases) {
      SCOPED_TRACE(name);
      const AttnCase a{OpCase(name)};
      const AttnParams p = a.params();
      const int64_t n_keys = a.window > 0 ? std::min(a.window, a.n_pos) : a.n_pos;
      // Scores: a float dot product of head_dim terms, then the scale: error <= (head_dim + 2)u * score_abs.
      // The softmax weights then err by twice that relative, plus ~n_keys u from the running denominator, and
      // the weighted sum of values adds ~n_keys u of sum_j p_j |v_j| (= y_abs). So, relative to y_abs:
      const double tol32 = 2.0 * double(a.head_dim + 2) * kU * a.score_abs + 2.0 * double(n_keys + 4) * kU;
      // F16 cache: keys and values are rounded to half (2^-11 relative), which moves every score by up to
      // 2^-11 * score_abs (twice that in the weights) and every value by 2^-11 relative.
      const double tol16 = tol32 + (2.0 * a.score_abs + 1.0) * kU16;

      for (GgmlType type : {GgmlType::F32, GgmlType::F16}) {
        const std::string what = std::string(name) + (type == GgmlType::F32 ? ".f32" : ".f16");
        const KvCache kv = cache_for(cpu2_, a, type);
        const std::vector<float> out = run_both(nans(a.q.size()), [&](Backend& be, std::vector<float>& o) {
          be.attention(a.q.data(), kv, 1, a.pos.data(), a.n_tok, p, o.data());
        });
        auto rel = [&](double tol) { return [&a, tol](size_t i) { return tol * double(a.y_abs[i]); }; };
        if (type == GgmlType::F32) {
          expect_within(what, out, a.y, rel(tol32));
        } else {
          // Against the reference on the half-rounded K/V the float32 bound holds; against exact K/V the
          // half rounding adds its own.
          expect_within(what + ".vs_f16_kv", out, a.y_f16, rel(tol32));
          expect_within(what + ".vs_f32_kv", out, a.y, rel(tol16));
        }
      }
    }
  }
  select_cpu_isa("best");
}

TEST_F(CpuOps, AttentionWithWindowOneReturnsTheCurrentValue) {
  const AttnCase a{OpCase("attention_gqa_64")};
  AttnParams p = a.params();
  p.window = 1;
  const int64_t group = a.n_head / a.n_head_kv;
  for (GgmlType type : {GgmlType::F32, GgmlType::F16}) {
    SCOPED_TRACE(type == GgmlType::F32 ? "f32 cache" : "f16 cache");
    const KvCache kv = cache_for(cpu2_, a, type);
    const std::vector<float> out = run_both(nans(a.q.size()), [&](Backend& be, std::vector<float>& o) {
      be.attention(a.q.data(), kv, 1, a.pos.data(), a.n_tok, p, o.data());
    });
    // One visible key: its weight is exp(0) / exp(0) = 1, so the output is that position's value row exactly
    // (as the cache holds it: rounded to half in an F16 cache).
    std::vector<float> want;
    for (int64_t t = 0; t < a.n_tok; ++t) {
      for (int64_t h = 0; h < a.n_head; ++h) {
        const float* vrow = a.v.data() + size_t((a.n_past + t) * a.kv_dim + (h / group) * a.head_dim);
        for (int64_t i = 0; i < a.head_dim; ++i)
          want.push_back(type == GgmlType::F32 ? vrow[i] : fp16_to_fp32(fp32_to_fp16(vrow[i])));
      }
    }
    expect_same_bits(out, want, "window 1 did not return V of the current position");
  }
}

TEST_F(CpuOps, KvStoreRejectsPositionsOutsideTheCacheAndWritesNothing) {
  constexpr int64_t kCtx = 8, kHeads = 2, kDim = 4, kKv = kHeads * kDim;
  for (GgmlType type : {GgmlType::F32, GgmlType::F16}) {
    KvCache kv(1, kCtx, kHeads, kDim, type);
    const std::vector<float> row(kKv, 0.5f), other(2 * kKv, -2.0f);
    const int32_t p3 = 3;
    cpu2_.kv_store(kv, 0, row.data(), row.data(), &p3, 1);
    const std::vector<uint8_t> before(kv.plane(0, 0), kv.plane(0, 0) + kv.bytes());
    for (int32_t bad : {int32_t(kCtx), -1, std::numeric_limits<int32_t>::max()}) {
      // A valid position first: the batch must be rejected as a whole, before any row is written.
      const int32_t pos[2] = {p3, bad};
      EXPECT_THROW(cpu2_.kv_store(kv, 0, other.data(), other.data(), pos, 2), Error) << bad;
    }
    EXPECT_EQ(std::memcmp(before.data(), kv.plane(0, 0), kv.bytes()), 0) << "a rejected store wrote rows";
  }
}

TEST_F(CpuOps, AttentionRejectsPositionsOutsideTheCache) {
  // Layer 0 of two, so that a read past the last row of a plane stays inside the cache's allocation (the next
  // plane) and a missing check shows up as a failed expectation rather than a crash.
  constexpr int64_t kCtx = 8, kDim = 4;
  KvCache kv(2, kCtx, 1, kDim, GgmlType::F32);
  const std::vector<float> rows(size_t(kCtx * kDim), 1.0f);
  std::vector<int32_t> every(kCtx);
  std::iota(every.begin(), every.end(), 0);
  cpu2_.kv_store(kv, 0, rows.data(), rows.data(), every.data(), kCtx);
  const AttnParams p{1, 1, kDim, 0.5f, 0};
  const std::vector<float> q(kDim, 1.0f);
  std::vector<float> out(kDim);
  for (int32_t bad : {int32_t(kCtx), -1}) {
    EXPECT_THROW(cpu2_.attention(q.data(), kv, 0, &bad, 1, p, out.data()), Error) << "position " << bad;
  }
}

TEST_F(CpuOps, KvStoreRoundsToHalfLikeTheReferenceConversion) {
  // The f16 cache rows are fp32_to_fp16 of the inputs bit for bit, whichever conversion the CPU runs: normal
  // values, halfway cases, values that become half subnormals, overflow to infinity, signed zeros. 37 values
  // per row, so a vector loop leaves a tail.
  constexpr int64_t kDim = 37, kRows = 5;
  KvCache kv(1, kRows, 1, kDim, GgmlType::F16);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-30, 17);
  std::vector<float> rows(size_t(kRows * kDim));
  for (auto& v : rows) v = std::ldexp(mant(rng), expo(rng)) * (rng() & 1 ? -1.0f : 1.0f);
  rows[0] = 1.0f + std::ldexp(1.0f, -11);  // exactly halfway between two halves: to even
  rows[1] = 65520.0f;                      // rounds up past the largest half: infinity
  rows[2] = -0.0f;
  rows[3] = std::ldexp(1.0f, -25);  // half the smallest subnormal: ties to even, zero
  std::vector<int32_t> pos(kRows);
  std::iota(pos.begin(), pos.end(), 0);
  cpu2_.kv_store(kv, 0, rows.data(), rows.data(), pos.data(), kRows);
  for (int kind = 0; kind < 2; ++kind) {
    for (int64_t t = 0; t < kRows; ++t) {
      const auto* h = reinterpret_cast<const uint16_t*>(kv.plane(0, kind) + size_t(t) * kv.row_bytes());
      for (int64_t i = 0; i < kDim; ++i)
        ASSERT_EQ(h[i], fp32_to_fp16(rows[size_t(t * kDim + i)])) << "row " << t << " element " << i;
    }
  }
}

}  // namespace
}  // namespace tilellm
