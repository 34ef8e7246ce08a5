// The "occupancy-test" backend (occupancy_backend.h).
#include "occupancy_backend.h"

#include <algorithm>
#include <memory>

#include "backends/registry.h"

namespace tilellm::test {
namespace {

class OccupancyBackend final : public Backend {
 public:
  explicit OccupancyBackend(const BackendParams& p)
      : inner_(host_backend().make(p)), mask_(p.tile_mask > 0) {}
  std::string_view name() const override { return "occupancy-test"; }
  void load_weights(const WeightSet& ws) override { inner_->load_weights(ws); }
  void embed(const Weight& t, const int32_t* ids, int64_t n, float scale, float* out) override {
    inner_->embed(t, ids, n, scale, out);
  }
  void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) override {
    inner_->rmsnorm(x, w, y, rows, n, eps);
  }
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override {
    inner_->matmul(w, x, n_tok, y);
  }
  void rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const int32_t* pos,
            const RopeTable& table, RopeMode mode) override {
    inner_->rope(x, n_tok, n_heads, head_dim, rope_dim, pos, table, mode);
  }
  void kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                int64_t n_tok) override {
    inner_->kv_store(kv, layer, k, v, pos, n_tok);
  }
  void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                 const AttnParams& p, float* out) override {
    inner_->attention(q, kv, layer, pos, n_tok, p, out);
  }
  void glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) override {
    inner_->glu(gate, up, out, n, act);
  }
  void add(float* acc, const float* x, int64_t n) override { inner_->add(acc, x, n); }

  int occupancy_steps() const override { return 2; }
  void set_occupancy_step(int step) override {
    occupancy_log().occupancy = step;
    occupancy_log().max_occupancy = std::max(occupancy_log().max_occupancy, step);
  }
  bool has_tile_mask() const override { return mask_; }
  void set_tile_mask(bool on) override {
    occupancy_log().mask = on;
    occupancy_log().mask_ever = occupancy_log().mask_ever || on;
  }

 private:
  std::unique_ptr<Backend> inner_;
  bool mask_;
};

BackendEntry occupancy_entry() {
  BackendEntry e;
  e.name = "occupancy-test";
  e.mnn_type = 98;
  e.summary = "the host backend's ops, with pacing measures to record (tests only)";
  e.devices = [](const std::string&) {
    return std::vector<DeviceInfo>{{"the host", "recorded", "  (none)\n"}};
  };
  e.make = [](const BackendParams& p) -> std::unique_ptr<Backend> {
    occupancy_log() = OccupancyLog();
    occupancy_log().mask_fraction = p.tile_mask;
    return std::make_unique<OccupancyBackend>(p);
  };
  return e;
}

}  // namespace

OccupancyLog& occupancy_log() {
  static OccupancyLog log;
  return log;
}

TILELLM_REGISTER_BACKEND(occupancy_entry);

}  // namespace tilellm::test
