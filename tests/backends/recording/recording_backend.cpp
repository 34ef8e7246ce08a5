// The recording test backend (recording_backend.h): every op delegates to the host backend the registry
// makes, after noting its name.
#include "recording_backend.h"

#include <memory>

#include "backends/registry.h"

namespace tilellm::test {
namespace {

struct RecordingOptions final : BackendOptions {
  std::string label = "unlabelled";
};

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(const BackendParams& p) : inner_(host_backend().make(p)) {}
  std::string_view name() const override { return "recording"; }

  void load_weights(const WeightSet& ws) override {
    recording().weights_loaded = int(ws.matrices.size());
    inner_->load_weights(ws);
  }
  void begin_forward(const ForwardStep& s) override {
    note("begin_forward");
    recording().steps.push_back(s);
    recording().positions.emplace_back(s.pos, s.pos + s.n_tok);
    inner_->begin_forward(s);
  }
  void end_forward() override {
    note("end_forward");
    ++recording().ended;
    inner_->end_forward();
  }
  void embed(const Weight& t, const int32_t* ids, int64_t n, float scale, float* out) override {
    note("embed");
    inner_->embed(t, ids, n, scale, out);
  }
  void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) override {
    note("rmsnorm");
    inner_->rmsnorm(x, w, y, rows, n, eps);
  }
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override {
    note("matmul");
    inner_->matmul(w, x, n_tok, y);
  }
  void matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tok) override {
    note("matmul_shared");
    inner_->matmul_shared(ws, ys, n, x, n_tok);
  }
  void rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const int32_t* pos,
            const RopeTable& table, RopeMode mode) override {
    note("rope");
    inner_->rope(x, n_tok, n_heads, head_dim, rope_dim, pos, table, mode);
  }
  void kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                int64_t n_tok) override {
    note("kv_store");
    inner_->kv_store(kv, layer, k, v, pos, n_tok);
  }
  void rope_kv_store(float* q, float* k, const float* v, KvCache& kv, int64_t layer, const int32_t* pos,
                     int64_t n_tok, const RopeShape& r) override {
    note("rope_kv_store");
    inner_->rope_kv_store(q, k, v, kv, layer, pos, n_tok, r);
  }
  void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                 const AttnParams& p, float* out) override {
    note("attention");
    inner_->attention(q, kv, layer, pos, n_tok, p, out);
  }
  void glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) override {
    note("glu");
    inner_->glu(gate, up, out, n, act);
  }
  void matmul_glu(const Weight& g, const Weight& u, const float* x, int64_t n_tok, FfnAct act, float* out,
                  float* up) override {
    note("matmul_glu");
    inner_->matmul_glu(g, u, x, n_tok, act, out, up);
  }
  void add(float* acc, const float* x, int64_t n) override {
    note("add");
    inner_->add(acc, x, n);
  }
  void add_rmsnorm(float* acc, const float* x, const float* w, float* y, int64_t rows, int64_t n,
                   float eps) override {
    note("add_rmsnorm");
    inner_->add_rmsnorm(acc, x, w, y, rows, n, eps);
  }

 private:
  static void note(const char* op) { recording().ops.push_back(op); }
  std::unique_ptr<Backend> inner_;
};

BackendEntry recording_entry() {
  BackendEntry e;
  e.name = "recording";
  e.mnn_type = 99;
  e.summary = "the host backend's ops, recorded (tests only)";
  e.devices = [](const std::string&) {
    return std::vector<DeviceInfo>{{"the host", "recorded", "  (none)\n"}};
  };
  e.make_options = [] { return std::make_unique<RecordingOptions>(); };
  OptionSpec label;
  label.flag = "--recording-label";
  label.help = "a word the backend records";
  label.default_value = "unlabelled";
  label.set = [](BackendOptions& o, const std::string& v) { static_cast<RecordingOptions&>(o).label = v; };
  e.options.push_back(label);
  e.make = [](const BackendParams& p) -> std::unique_ptr<Backend> {
    const auto* o = dynamic_cast<const RecordingOptions*>(p.options);
    recording().label = o ? o->label : "no options";
    return std::make_unique<RecordingBackend>(p);
  };
  return e;
}

}  // namespace

Recording& recording() {
  static Recording r;
  return r;
}

TILELLM_REGISTER_BACKEND(recording_entry);

}  // namespace tilellm::test
