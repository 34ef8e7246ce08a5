// A test backend that hands the ops every backend must have, and its weights, to another backend: a test's
// backend derives from it and overrides only what it changes (rounds, logs, pretends to offer).
#pragma once

#include <memory>
#include <utility>

#include "backends/backend.h"

namespace tilellm::test {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> owned) : owned_(std::move(owned)), inner_(*owned_) {}
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}

  void load_weights(const WeightSet& ws) override { inner_.load_weights(ws); }
  void embed(const Weight& t, const int32_t* ids, int64_t n, float scale, float* out) override {
    inner_.embed(t, ids, n, scale, out);
  }
  void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) override {
    inner_.rmsnorm(x, w, y, rows, n, eps);
  }
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override {
    inner_.matmul(w, x, n_tok, y);
  }
  void rope(float* x, int64_t n_tok, int64_t heads, int64_t hd, int64_t rd, const int32_t* pos,
            const RopeTable& t, RopeMode m) override {
    inner_.rope(x, n_tok, heads, hd, rd, pos, t, m);
  }
  void kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                int64_t n) override {
    inner_.kv_store(kv, layer, k, v, pos, n);
  }
  void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n,
                 const AttnParams& p, float* out) override {
    inner_.attention(q, kv, layer, pos, n, p, out);
  }
  void glu(const float* g, const float* u, float* out, int64_t n, FfnAct act) override {
    inner_.glu(g, u, out, n, act);
  }
  void add(float* acc, const float* x, int64_t n) override { inner_.add(acc, x, n); }

 protected:
  Backend& inner() { return inner_; }

 private:
  std::unique_ptr<Backend> owned_;  // null when the inner backend is someone else's
  Backend& inner_;
};

}  // namespace tilellm::test
