#include "engine.h"

#include "backends/registry.h"
#include "base/error.h"

namespace tilellm::serve {
namespace {

class BatchedEngine final : public Engine {
 public:
  BatchedEngine(const Model& m, const SessionOptions& o, int n)
      : s_(m, o, n), on_host_(require_backend(o.backend).host) {}
  int n_seq() const override { return s_.n_seq(); }
  int64_t n_ctx() const override { return s_.n_ctx(); }
  int64_t step_budget() const override { return s_.n_batch(); }
  int64_t entry_budget() const override { return s_.n_batch(); }
  const std::vector<int32_t>& tokens(int seq) const override { return s_.tokens(seq); }
  void truncate(int seq, int64_t n) override { s_.truncate(seq, n); }
  void eval(const Entry* e, int n) override { s_.eval(e, n); }
  const float* logits(int i) const override { return s_.logits(i); }
  const float* hidden_states(int i, int64_t* n) const override { return s_.hidden_states(i, n); }
  size_t kv_bytes() const override { return s_.kv_bytes(); }
  bool batched() const override { return true; }
  bool on_host() const override { return on_host_; }

 private:
  BatchSession s_;
  bool on_host_;
};

class SessionsEngine final : public Engine {
 public:
  SessionsEngine(const Model& m, const SessionOptions& o, int n) : order_(size_t(n)) {
    for (int i = 0; i < n; ++i) sessions_.push_back(std::make_unique<Session>(m, o));
    const ModelConfig& c = m.config();
    kv_bytes_ = size_t(n) * 2 * size_t(c.n_layer) * size_t(n_ctx()) * size_t(c.kv_dim()) *
                (o.kv_type == GgmlType::F32 ? 4 : 2);
  }
  int n_seq() const override { return int(sessions_.size()); }
  int64_t n_ctx() const override { return sessions_[0]->n_ctx(); }
  int64_t step_budget() const override { return sessions_[0]->n_batch() * n_seq(); }
  int64_t entry_budget() const override { return sessions_[0]->n_batch(); }
  const std::vector<int32_t>& tokens(int seq) const override { return sessions_[size_t(seq)]->tokens(); }
  void truncate(int seq, int64_t n) override { sessions_[size_t(seq)]->truncate(n); }
  void eval(const Entry* e, int n) override {
    for (int i = 0; i < n; ++i) {
      sessions_[size_t(e[i].seq)]->eval(e[i].tokens, e[i].n);
      order_[size_t(i)] = e[i].seq;
    }
  }
  const float* logits(int i) const override { return sessions_[size_t(order_[size_t(i)])]->logits(); }
  const float* hidden_states(int i, int64_t* n) const override {
    return sessions_[size_t(order_[size_t(i)])]->hidden_states(n);
  }
  size_t kv_bytes() const override { return kv_bytes_; }
  bool batched() const override { return false; }
  bool on_host() const override { return sessions_[0]->on_host(); }

 private:
  std::vector<std::unique_ptr<Session>> sessions_;
  std::vector<int> order_;  // [n_seq] the sequence of each entry of the last eval()
  size_t kv_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Engine> make_engine(const Model& model, const SessionOptions& opts, int n_seq) {
  const BackendEntry& e = require_backend(opts.backend);
  if (e.host || e.multi_seq) return std::make_unique<BatchedEngine>(model, opts, n_seq);
  return std::make_unique<SessionsEngine>(model, opts, n_seq);
}

}  // namespace tilellm::serve
