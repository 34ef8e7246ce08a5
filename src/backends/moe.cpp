// The mixture-of-experts op's reference (backends/moe.h): the routing, the mixture over host arrays through a
// backend's own ops, and Backend::moe_ffn's default, which every backend inherits unless it has its own.
#include "backends/moe.h"

#include <algorithm>
#include <cmath>

#include "backends/backend.h"
#include "base/error.h"

namespace tilellm {
namespace {

// llama.cpp holds the sum of the chosen weights at the smallest normal half (2^-14) before dividing by it.
constexpr float kMinWeightSum = 6.103515625e-5f;

// Experts whose gate and up products one matmul_shared call takes for a lone token (two weights each).
constexpr int64_t kSharedExperts = 8;

float sigmoid(float v) {
  return float(1.0 / (1.0 + std::exp(-double(v))));
}

// p[0..n) = gating(logits[0..n)), in place. SoftmaxWeight keeps the logits (its softmax comes after the
// choice).
void gate_probs(MoeGating g, float* p, int64_t n) {
  switch (g) {
    case MoeGating::Softmax: {
      float mx = p[0];
      for (int64_t e = 1; e < n; ++e) mx = std::max(mx, p[e]);
      double sum = 0.0;
      for (int64_t e = 0; e < n; ++e) sum += std::exp(double(p[e]) - double(mx));
      for (int64_t e = 0; e < n; ++e) p[e] = float(std::exp(double(p[e]) - double(mx)) / sum);
      return;
    }
    case MoeGating::Sigmoid:
      for (int64_t e = 0; e < n; ++e) p[e] = sigmoid(p[e]);
      return;
    case MoeGating::SoftmaxWeight:
      return;
    case MoeGating::SqrtSoftplus:
      for (int64_t e = 0; e < n; ++e) {
        const double v = p[e];
        p[e] = float(std::sqrt(v > 20.0 ? v : std::log1p(std::exp(v))));
      }
      return;
  }
}

}  // namespace

MoeScratch::MoeScratch(int64_t nb, int64_t ni, int64_t nf, int64_t ne, int64_t nu)
    : n_batch(nb),
      n_in(ni),
      n_ff(nf),
      n_expert(ne),
      n_used(nu),
      x(size_t(nb * ni) * 4),
      logits(size_t((nb + 1) * ne) * 4),
      ids(size_t(nb * nu) * 4),
      weights(size_t(nb * nu) * 4),
      order(size_t(nb * nu) * 4),
      count(size_t(ne + 1) * 8),
      xe(size_t(nb * ni) * 4),
      h(size_t(std::max(nb, nu) * nf) * 4),
      hup(size_t(std::max(nb, nu) * nf) * 4),
      y(size_t(std::max(nb, nu) * ni) * 4),
      acc(size_t(nb * ni) * 4),
      g(size_t(nb) * 4) {}

void route_experts(const MoeRouting& r, const float* logits, int64_t n_tok, int64_t n_expert, int64_t n_used,
                   int32_t* ids, float* weights, float* probs) {
  if (n_used < 1 || n_used > n_expert) fail("internal: {} of {} experts chosen", n_used, n_expert);
  for (int64_t t = 0; t < n_tok; ++t) {
    std::copy(logits + t * n_expert, logits + (t + 1) * n_expert, probs);
    gate_probs(r.gating, probs, n_expert);
    int32_t* id = ids + t * n_used;
    float* w = weights + t * n_used;
    // The n_used largest, one at a time (n_used is small): each pass takes the largest not yet taken, the
    // lowest index among equal ones, so the choice is the same on every backend. A NaN is never larger.
    for (int64_t j = 0; j < n_used; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < n_expert; ++e) {
        if (std::find(id, id + j, int32_t(e)) != id + j) continue;
        if (best < 0 || probs[e] > probs[best]) best = e;
      }
      id[j] = int32_t(best);
      w[j] = probs[best];
    }
    if (r.gating == MoeGating::SoftmaxWeight) gate_probs(MoeGating::Softmax, w, n_used);
    if (r.norm_weights) {
      float sum = 0.0f;
      for (int64_t j = 0; j < n_used; ++j) sum += w[j];
      sum = std::max(sum, kMinWeightSum);
      for (int64_t j = 0; j < n_used; ++j) w[j] /= sum;
    }
    if (r.scale != 1.0f) {
      for (int64_t j = 0; j < n_used; ++j) w[j] *= r.scale;
    }
  }
}

void moe_on_host(Backend& be, const MoeFfn& m, const float* x, int64_t n, float* acc, MoeScratch& s) {
  const int64_t E = m.n_in(), k = m.n_used, nx = m.n_expert;
  const int64_t n_ff = m.gate[0].n_out;
  if (n > s.n_batch || E != s.n_in || nx != s.n_expert || k != s.n_used || n_ff > s.n_ff ||
      (m.sh_gate && m.sh_gate->n_out > s.n_ff)) {
    fail("internal: a mixture of {} tokens, {} inputs, {} of {} experts exceeds its scratch", n, E, k, nx);
  }
  float* logits = s.logits.as<float>();
  int32_t* ids = s.ids.as<int32_t>();
  float* w = s.weights.as<float>();
  float* h = s.h.as<float>();
  float* hup = s.hup.as<float>();
  float* y = s.y.as<float>();

  be.matmul(*m.router, x, n, logits);
  route_experts(m.routing, logits, n, nx, k, ids, w, logits + s.n_batch * nx);

  if (n == 1) {
    // One token: the chosen experts' gate and up products read the same input, so they go to matmul_shared
    // together (a few experts a call), then one glu over all of them, then each expert's down product.
    for (int64_t j0 = 0; j0 < k; j0 += kSharedExperts) {
      const int64_t nj = std::min(kSharedExperts, k - j0);
      const Weight* ws[2 * kSharedExperts];
      float* ys[2 * kSharedExperts];
      for (int64_t j = 0; j < nj; ++j) {
        ws[2 * j] = &m.gate[ids[j0 + j]];
        ws[2 * j + 1] = &m.up[ids[j0 + j]];
        ys[2 * j] = h + (j0 + j) * n_ff;
        ys[2 * j + 1] = hup + (j0 + j) * n_ff;
      }
      be.matmul_shared(ws, ys, int(2 * nj), x, 1);
    }
    be.glu(h, hup, h, k * n_ff, m.act);
    for (int64_t j = 0; j < k; ++j) be.matmul(m.down[ids[j]], h + j * n_ff, 1, y + j * E);
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t i = 0; i < E; ++i) acc[i] += w[j] * y[j * E + i];
    }
  } else {
    // The (token, slot) pairs grouped by expert (a counting sort), so each expert multiplies all its tokens
    // at once: its weights are read once a batch.
    int32_t* order = s.order.as<int32_t>();
    int64_t* start = s.count.as<int64_t>();
    std::fill(start, start + nx + 1, int64_t(0));
    for (int64_t i = 0; i < n * k; ++i) ++start[ids[i] + 1];
    for (int64_t e = 0; e < nx; ++e) start[e + 1] += start[e];
    for (int64_t i = 0; i < n * k; ++i) order[start[ids[i]]++] = int32_t(i);
    for (int64_t e = nx; e > 0; --e) start[e] = start[e - 1];
    start[0] = 0;
    float* xe = s.xe.as<float>();
    for (int64_t e = 0; e < nx; ++e) {
      const int64_t r0 = start[e], cnt = start[e + 1] - r0;
      if (cnt == 0) continue;
      for (int64_t r = 0; r < cnt; ++r) {
        const int64_t t = order[r0 + r] / k;
        std::copy(x + t * E, x + (t + 1) * E, xe + r * E);
      }
      be.matmul_glu(m.gate[e], m.up[e], xe, cnt, m.act, h, hup);
      be.matmul(m.down[e], h, cnt, y);
      for (int64_t r = 0; r < cnt; ++r) {
        const int64_t t = order[r0 + r] / k;
        const float wt = w[order[r0 + r]];
        float* a = acc + t * E;
        const float* yr = y + r * E;
        for (int64_t i = 0; i < E; ++i) a[i] += wt * yr[i];
      }
    }
  }

  if (m.sh_gate) {
    be.matmul_glu(*m.sh_gate, *m.sh_up, x, n, m.act, h, hup);
    be.matmul(*m.sh_down, h, n, y);
    float* g = s.g.as<float>();
    if (m.sh_router) {
      be.matmul(*m.sh_router, x, n, g);
      for (int64_t t = 0; t < n; ++t) g[t] = sigmoid(g[t]);
    } else {
      std::fill(g, g + n, 1.0f);
    }
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < E; ++i) acc[t * E + i] += g[t] * y[t * E + i];
    }
  }
}

void Backend::moe_ffn(const MoeFfn& m, const float* x, int64_t n_tok, float* acc, MoeScratch& s) {
  const int64_t n = n_tok * m.n_in();
  float* xh = s.x.as<float>();
  float* sum = s.acc.as<float>();
  read_back(x, n, xh);
  std::fill(sum, sum + n, 0.0f);
  moe_on_host(*this, m, xh, n_tok, sum, s);
  add(acc, sum, n);
}

}  // namespace tilellm
