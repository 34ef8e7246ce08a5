// A session: one conversation's state over a loaded model — the FB-KV cache, the RoPE tables, the activation
// scratch, the thread pool, the backend that runs the layer loop (from the backend registry, by name), the
// tokens in the cache and the logits. Everything is allocated in the constructor; eval() allocates nothing.
// save_state() / load_state() write the cached tokens, their KV rows and the last logits to a file and read
// them back (the file's layout: runtime/session_state.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/kv_cache.h"
#include "backends/modes.h"
#include "backends/registry.h"
#include "base/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"
#include "runtime/prefill_speeds.h"
#include "runtime/session_params.h"

namespace tilellm {

class Session {
 public:
  Session(const Model& model, const SessionOptions& opts);

  // Appends tokens at positions n_past().. and runs them through the model. Throws tilellm::Error, leaving
  // the session unchanged, when they do not fit in the context.
  void eval(const int32_t* tokens, int64_t n);
  // Logits [n_vocab] of the last token of the last eval() call.
  const float* logits() const;
  // With logits_all: logits of the i-th token of the last eval() call.
  const float* logits_at(int64_t i) const;
  // The last forward pass's final residual stream, before the output norm: [n][n_embd], n the tokens of the
  // last batch of the last eval() call (all of them when that call had at most n_batch() tokens). Only on a
  // host backend (on_host()), whose activations live in host memory; an Error otherwise. Embeddings pool it.
  const float* hidden_states(int64_t* n) const;

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  int64_t n_batch() const { return scratch_.n_batch; }  // tokens per forward pass of a prompt
  // The tokens in the cache, positions [0, n_past()).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Whether logits() holds the logits of the last cached token: after eval() or load_state() of a file that
  // had them; not in a new session or after truncate() forgot tokens.
  bool has_logits() const { return has_logits_; }
  void reset() { truncate(0); }
  // Forgets every cached token from position n on (the cache rows are simply overwritten later).
  void truncate(int64_t n) {
    if (n < n_past_) has_logits_ = false;
    n_past_ = n < n_past_ ? (n < 0 ? 0 : n) : n_past_;
    tokens_.resize(size_t(n_past_));
    host_kv_ = std::min(host_kv_, n_past_);
    dev_kv_ = std::min(dev_kv_, n_past_);
  }

  // Writes the cached tokens, their KV rows (from the device when the backend keeps them there) and the
  // last logits to `path`, with app_data (bytes of the caller's own, e.g. a chat's messages) beside them,
  // through a temporary file renamed at the end, so a failed save leaves no partial file. Throws
  // tilellm::Error (kind Io) when the file cannot be written.
  void save_state(const std::string& path, std::string_view app_data = {});
  // Replaces this session's tokens, KV rows and logits with those saved in `path` (KV rows going up to the
  // device when the backend keeps them there). The file must come from the same model (fingerprint), the
  // same context size and cache type: otherwise tilellm::Error of kind Mismatch naming both sides; a
  // truncated or damaged file (size or checksum) is kind Corrupt, an unreadable one Io. The session is
  // unchanged when the file is refused. The app_data saved with it goes to *app_data when given.
  void load_state(const std::string& path, std::string* app_data = nullptr);
  const Model& model() const { return model_; }
  const KvCache& kv_cache() const { return kv_; }
  int n_threads() const { return pool_.size(); }
  // The backend running the layer loop, by its registry name.
  std::string_view backend_name() const { return backend_->name(); }
  // Device time per kernel since the last reset (backends that time their kernels); empty otherwise.
  std::vector<KernelTime> kernel_times() const { return backend_->kernel_times(); }
  void reset_kernel_times() { backend_->reset_kernel_times(); }
  Backend::PassTimes pass_times() const { return backend_->pass_times(); }
  void reset_pass_times() { backend_->reset_pass_times(); }
  // Bytes of the host KV cache's storage: 0 when the cache lives only on a device.
  size_t host_kv_bytes() const { return kv_.bytes(); }
  // The backend's device memory line (Backend::memory_summary); empty for a backend in host memory.
  std::string device_memory_summary() const { return backend_->memory_summary(); }
  // Whether the backend running the layer loop is the host backend (registry.h).
  bool on_host() const;
  // --prefill auto: the two speeds its choice came from (null in the other modes).
  const PrefillSpeeds* prefill_speeds() const {
    return opts_.prefill == PrefillMode::Auto ? &speeds_ : nullptr;
  }

  // The pacing controller's measures (runtime/telemetry/pacer.h), taken between forward passes: host
  // threads taking work (1..n_threads()), the backend's lower occupancy steps and its lossy tile masking
  // (Backend: occupancy_steps, has_tile_mask).
  int active_threads() const { return pool_.active(); }
  void set_active_threads(int n) { pool_.set_active(n); }
  int occupancy_steps() const { return backend_->occupancy_steps(); }
  void set_occupancy_step(int step) { backend_->set_occupancy_step(step); }
  bool has_tile_mask() const { return backend_->has_tile_mask(); }
  void set_tile_mask(bool on) { backend_->set_tile_mask(on); }

 private:
  const Model& model_;
  SessionOptions opts_;
  ThreadPool pool_;
  KvCache kv_;
  RopeTable rope_global_;
  RopeTable rope_local_;
  ForwardScratch scratch_;
  AlignedBuffer logits_;  // [n_ctx or 1][n_vocab]
  // The chosen backend, and for hybrid prefill the host backend beside it (null otherwise). Declared after
  // scratch_, which a device backend mirrors, so they are destroyed first (a device backend finishes its
  // queue, whose pending uploads may still read scratch_).
  std::unique_ptr<Backend> host_;
  std::unique_ptr<Backend> backend_;
  std::vector<int32_t> tokens_;  // [n_past_] the cached tokens; capacity n_ctx, reserved up front
  int64_t n_past_ = 0;
  int64_t last_n_ = 0;
  bool has_logits_ = false;
  bool has_hidden_ = false;  // scratch_.x holds the last eval()'s final residual stream
  // Hybrid prefill: positions [0, host_kv_) are current in kv_, [0, dev_kv_) in the device cache.
  int64_t host_kv_ = 0;
  int64_t dev_kv_ = 0;
  PrefillSpeeds speeds_;  // --prefill auto
  bool prefill_on_host(int64_t n_tok) const;
  // Fills speeds_: kept ones, else timed on each side (the cache rows it writes are forgotten).
  void measure_prefill();
  // The device's timing passes double in size up to n_batch until one lasts this long (measure_prefill).
  static constexpr double kDeviceProbeSeconds = 0.25;
};

}  // namespace tilellm
