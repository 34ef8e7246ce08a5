// The mixture-of-experts op (backends/moe.h): the routing against an independent float64 evaluation (a full
// sort instead of the op's repeated selection), and Backend::moe_ffn — the default every backend inherits and
// the CPU backend's own — against a float64 evaluation of the mixture on random weights of odd sizes, with
// one, two and all experts a token, one token and several, with and without a (gated) shared expert. A
// backend that logs the matrices its ops are given shows that the default reads only the chosen experts'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "../common/forwarding_backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/moe.h"
#include "base/thread_pool.h"

namespace tilellm {
namespace {

// The routing in float64 from its definition: probabilities, a stable sort by descending probability (the
// lower index first among equal ones), the chosen weights, then normalisation and scale.
void reference_route(const MoeRouting& r, const std::vector<float>& logits, int64_t n_expert, int64_t k,
                     std::vector<int32_t>& ids, std::vector<double>& w) {
  std::vector<double> p(static_cast<size_t>(n_expert));
  for (int64_t e = 0; e < n_expert; ++e) p[size_t(e)] = logits[size_t(e)];
  if (r.gating == MoeGating::Softmax) {
    const double mx = *std::max_element(p.begin(), p.end());
    double sum = 0.0;
    for (double& v : p) sum += (v = std::exp(v - mx));
    for (double& v : p) v /= sum;
  } else if (r.gating == MoeGating::Sigmoid) {
    for (double& v : p) v = 1.0 / (1.0 + std::exp(-v));
  } else if (r.gating == MoeGating::SqrtSoftplus) {
    for (double& v : p) v = std::sqrt(std::log(1.0 + std::exp(v)));
  }
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
  ids.assign(order.begin(), order.begin() + k);
  w.clear();
  for (int32_t e : ids) w.push_back(p[size_t(e)]);
  if (r.gating == MoeGating::SoftmaxWeight) {
    const double mx = *std::max_element(w.begin(), w.end());
    double sum = 0.0;
    for (double& v : w) sum += (v = std::exp(v - mx));
    for (double& v : w) v /= sum;
  }
  if (r.norm_weights) {
    const double sum = std::max(std::accumulate(w.begin(), w.end(), 0.0), 6.103515625e-5);
    for (double& v : w) v /= sum;
  }
  for (double& v : w) v *= r.scale;
}

std::vector<float> randn(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

TEST(MoeRouting, MatchesFloat64SortForEveryGatingAndK) {
  std::mt19937 rng(11);
  const int64_t n_expert = 7, n_tok = 9;
  for (MoeGating g :
       {MoeGating::Softmax, MoeGating::Sigmoid, MoeGating::SoftmaxWeight, MoeGating::SqrtSoftplus}) {
    for (bool norm : {false, true}) {
      for (int64_t k : {1, 2, 5, 7}) {
        MoeRouting r{g, norm, norm ? 1.0f : 2.5f};
        const std::vector<float> logits = randn(rng, size_t(n_tok * n_expert), 2.0f);
        std::vector<int32_t> ids(size_t(n_tok * k));
        std::vector<float> w(static_cast<size_t>(n_tok * k)), probs(static_cast<size_t>(n_expert));
        route_experts(r, logits.data(), n_tok, n_expert, k, ids.data(), w.data(), probs.data());
        for (int64_t t = 0; t < n_tok; ++t) {
          std::vector<int32_t> want;
          std::vector<double> ww;
          reference_route(
              r, std::vector<float>(logits.begin() + t * n_expert, logits.begin() + (t + 1) * n_expert),
              n_expert, k, want, ww);
          for (int64_t j = 0; j < k; ++j) {
            EXPECT_EQ(ids[size_t(t * k + j)], want[size_t(j)])
                << "gating " << int(g) << " k " << k << " token " << t;
            EXPECT_NEAR(w[size_t(t * k + j)], ww[size_t(j)], 2e-6 * std::max(1.0, std::abs(ww[size_t(j)])));
          }
        }
      }
    }
  }
}

TEST(MoeRouting, EqualProbabilitiesGoToTheLowerIndexAndTheSumIsClampedAsLlamaCppDoes) {
  // Experts 1, 3 and 4 tie for the largest logit: the first two chosen are 1 and 3, in that order.
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
  int32_t ids[2];
  float w[2], probs[5];
  route_experts(MoeRouting{MoeGating::Softmax, true, 1.0f}, logits.data(), 1, 5, 2, ids, w, probs);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  EXPECT_FLOAT_EQ(w[1], 0.5f);
  // Sigmoids of -30 sum to ~1.9e-13: the sum is held at 2^-14, so the weights stay tiny instead of becoming
  // 1/2.
  const std::vector<float> low = {-30.0f, -30.5f, -31.0f};
  route_experts(MoeRouting{MoeGating::Sigmoid, true, 1.0f}, low.data(), 1, 3, 2, ids, w, probs);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  EXPECT_NEAR(w[0], (1.0 / (1.0 + std::exp(30.0))) / 6.103515625e-5, 1e-12);
}

// Random F32 experts and router of odd sizes, as Weight views like the model layer binds them.
struct Mixture {
  int64_t n_in, n_ff, n_expert, k, n_sh;
  std::vector<float> router, gate, up, down, sh_gate, sh_up, sh_down, sh_router;
  Weight w_router, w_sh_gate, w_sh_up, w_sh_down, w_sh_router;
  std::vector<Weight> w_gate, w_up, w_down;
  MoeFfn op;

  static Weight f32(const std::string& name, const float* d, int64_t n_in, int64_t n_out) {
    Weight w;
    w.name = name;
    w.type = GgmlType::F32;
    w.data = reinterpret_cast<const uint8_t*>(d);
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_bytes = size_t(n_in) * 4;
    return w;
  }

  Mixture(std::mt19937& rng, int64_t in, int64_t ff, int64_t ne, int64_t kk, int64_t sh, bool sh_gated,
          FfnAct act)
      : n_in(in), n_ff(ff), n_expert(ne), k(kk), n_sh(sh) {
    router = randn(rng, size_t(ne * in), 0.6f);
    gate = randn(rng, size_t(ne * ff * in), 0.3f);
    up = randn(rng, size_t(ne * ff * in), 0.3f);
    down = randn(rng, size_t(ne * in * ff), 0.3f);
    w_router = f32("router", router.data(), in, ne);
    for (int64_t e = 0; e < ne; ++e) {
      w_gate.push_back(f32("gate", gate.data() + e * ff * in, in, ff));
      w_up.push_back(f32("up", up.data() + e * ff * in, in, ff));
      w_down.push_back(f32("down", down.data() + e * in * ff, ff, in));
    }
    op.router = &w_router;
    op.gate = w_gate.data();
    op.up = w_up.data();
    op.down = w_down.data();
    op.n_expert = ne;
    op.n_used = kk;
    op.routing = MoeRouting{MoeGating::Softmax, true, 1.0f};
    op.act = act;
    if (sh > 0) {
      sh_gate = randn(rng, size_t(sh * in), 0.3f);
      sh_up = randn(rng, size_t(sh * in), 0.3f);
      sh_down = randn(rng, size_t(in * sh), 0.3f);
      sh_router = randn(rng, size_t(in), 0.5f);
      w_sh_gate = f32("sh_gate", sh_gate.data(), in, sh);
      w_sh_up = f32("sh_up", sh_up.data(), in, sh);
      w_sh_down = f32("sh_down", sh_down.data(), sh, in);
      w_sh_router = f32("sh_router", sh_router.data(), in, 1);
      op.sh_gate = &w_sh_gate;
      op.sh_up = &w_sh_up;
      op.sh_down = &w_sh_down;
      op.sh_router = sh_gated ? &w_sh_router : nullptr;
    }
  }

  static double act_of(FfnAct a, double g) {
    if (a == FfnAct::SiLU) return g / (1.0 + std::exp(-g));
    return 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
  }

  // One gated FFN in float64: down (act(gate x) * up x), matrices row-major [out][in].
  static std::vector<double> ffn(const float* g, const float* u, const float* d, int64_t in, int64_t ff,
                                 const float* x, FfnAct a) {
    std::vector<double> h(static_cast<size_t>(ff)), y(size_t(in), 0.0);
    for (int64_t r = 0; r < ff; ++r) {
      double sg = 0.0, su = 0.0;
      for (int64_t i = 0; i < in; ++i) {
        sg += double(g[r * in + i]) * x[i];
        su += double(u[r * in + i]) * x[i];
      }
      h[size_t(r)] = act_of(a, sg) * su;
    }
    for (int64_t r = 0; r < in; ++r) {
      for (int64_t i = 0; i < ff; ++i) y[size_t(r)] += double(d[r * ff + i]) * h[size_t(i)];
    }
    return y;
  }

  // acc + mixture(x) in float64, and the experts each token chose.
  std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& acc, int64_t n_tok,
                                std::set<int32_t>& chosen) const {
    std::vector<double> out(acc.begin(), acc.end());
    for (int64_t t = 0; t < n_tok; ++t) {
      const float* xt = x.data() + t * n_in;
      std::vector<float> logits(static_cast<size_t>(n_expert));
      for (int64_t e = 0; e < n_expert; ++e) {
        double s = 0.0;
        for (int64_t i = 0; i < n_in; ++i) s += double(router[size_t(e * n_in + i)]) * xt[i];
        logits[size_t(e)] = float(s);
      }
      std::vector<int32_t> ids;
      std::vector<double> w;
      reference_route(op.routing, logits, n_expert, k, ids, w);
      for (size_t j = 0; j < ids.size(); ++j) {
        const int64_t e = ids[j];
        chosen.insert(int32_t(e));
        const std::vector<double> y = ffn(gate.data() + e * n_ff * n_in, up.data() + e * n_ff * n_in,
                                          down.data() + e * n_in * n_ff, n_in, n_ff, xt, op.act);
        for (int64_t i = 0; i < n_in; ++i) out[size_t(t * n_in + i)] += w[j] * y[size_t(i)];
      }
      if (n_sh > 0) {
        const std::vector<double> y =
            ffn(sh_gate.data(), sh_up.data(), sh_down.data(), n_in, n_sh, xt, op.act);
        double g = 1.0;
        if (op.sh_router) {
          double s = 0.0;
          for (int64_t i = 0; i < n_in; ++i) s += double(sh_router[size_t(i)]) * xt[i];
          g = 1.0 / (1.0 + std::exp(-s));
        }
        for (int64_t i = 0; i < n_in; ++i) out[size_t(t * n_in + i)] += g * y[size_t(i)];
      }
    }
    return out;
  }
};

// Logs every matrix the ops are given; moe_ffn stays Backend's default.
class WeightLog final : public test::ForwardingBackend {
 public:
  explicit WeightLog(Backend& inner) : ForwardingBackend(inner) {}
  std::string_view name() const override { return "weight-log"; }
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override {
    used.insert(&w);
    inner().matmul(w, x, n_tok, y);
  }
  void matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tok) override {
    for (int i = 0; i < n; ++i) used.insert(ws[i]);
    inner().matmul_shared(ws, ys, n, x, n_tok);
  }
  void matmul_glu(const Weight& g, const Weight& u, const float* x, int64_t n_tok, FfnAct act, float* out,
                  float* up) override {
    used.insert(&g);
    used.insert(&u);
    inner().matmul_glu(g, u, x, n_tok, act, out, up);
  }
  // No attention in these tests: the mixture's inputs are given.
  void rope(float*, int64_t, int64_t, int64_t, int64_t, const int32_t*, const RopeTable&, RopeMode) override {
  }
  void kv_store(KvCache&, int64_t, const float*, const float*, const int32_t*, int64_t) override {}
  void attention(const float*, const KvCache&, int64_t, const int32_t*, int64_t, const AttnParams&,
                 float*) override {}
  std::set<const Weight*> used;
};

TEST(MoeFfn, DefaultAndCpuEqualFloat64AndReadOnlyTheChosenExperts) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  struct Case {
    int64_t n_expert, k, n_sh;
    bool gated;
    FfnAct act;
  };
  for (const Case& c : {Case{6, 1, 0, false, FfnAct::SiLU}, Case{6, 2, 23, true, FfnAct::SiLU},
                        Case{9, 9, 0, false, FfnAct::GeluTanh}, Case{8, 3, 17, false, FfnAct::SiLU}}) {
    const int64_t n_in = 45, n_ff = 29, n_batch = 7;
    Mixture m(rng, n_in, n_ff, c.n_expert, c.k, c.n_sh, c.gated, c.act);
    CpuBackend cpu(pool, ActivationMode::F32, n_batch * 64);
    for (int64_t n_tok : {int64_t(1), int64_t(5), n_batch}) {
      const std::vector<float> x = randn(rng, size_t(n_tok * n_in), 1.0f);
      const std::vector<float> acc0 = randn(rng, size_t(n_tok * n_in), 1.0f);
      std::set<int32_t> chosen;
      const std::vector<double> ref = m.reference(x, acc0, n_tok, chosen);
      MoeScratch s(n_batch, n_in, std::max(n_ff, c.n_sh), c.n_expert, c.k);
      for (bool use_default : {true, false}) {
        std::vector<float> acc = acc0;
        WeightLog log(cpu);
        if (use_default) {
          log.moe_ffn(m.op, x.data(), n_tok, acc.data(), s);
        } else {
          cpu.moe_ffn(m.op, x.data(), n_tok, acc.data(), s);
        }
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i < acc.size(); ++i) {
          num += (acc[i] - ref[i]) * (acc[i] - ref[i]);
          den += (ref[i] - acc0[i]) * (ref[i] - acc0[i]);
        }
        // Float32 sums of at most 45 products, a few such stages: far below 1e-5 of the mixture's size.
        EXPECT_LT(std::sqrt(num / den), 1e-5) << (use_default ? "default" : "cpu") << " experts "
                                              << c.n_expert << " k " << c.k << " tokens " << n_tok;
        if (!use_default) continue;
        std::set<const Weight*> want = {&m.w_router};
        for (int32_t e : chosen) {
          want.insert(&m.w_gate[size_t(e)]);
          want.insert(&m.w_up[size_t(e)]);
          want.insert(&m.w_down[size_t(e)]);
        }
        if (c.n_sh > 0) want.insert({&m.w_sh_gate, &m.w_sh_up, &m.w_sh_down});
        if (c.gated) want.insert(&m.w_sh_router);
        EXPECT_EQ(log.used, want) << "experts " << c.n_expert << " k " << c.k << " tokens " << n_tok;
        if (c.k < c.n_expert && n_tok == 1) {
          EXPECT_EQ(chosen.size(), size_t(c.k));
        }
      }
    }
  }
}

}  // namespace
}  // namespace tilellm
