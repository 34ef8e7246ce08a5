#include "runtime/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "backends/registry.h"
#include "base/error.h"
#include "format/ggml_types.h"
#include "runtime/model_fingerprint.h"
#include "runtime/session_params.h"

namespace tilellm {

Session::Session(const Model& model, const SessionOptions& opts)
    : model_(model),
      opts_(opts),
      pool_(opts.n_threads > 0 ? opts.n_threads : ThreadPool::default_threads(), opts.cpus),
      // The geometry only: the storage comes below, when a backend's ops read or write the host cache.
      kv_(model.config().n_layer, session_context_size(model, opts), model.config().n_head_kv,
          model.config().head_dim, opts.kv_type, false),
      rope_global_(kv_.n_ctx(), model.config().rope_dim, model.config().rope_base,
                   model.config().rope_freq_scale, model.weights().rope_factors(model.config(), kv_.n_ctx()),
                   model.config().rope_attn_factor),
      rope_local_(model.config().swa_own_rope
                      ? RopeTable(kv_.n_ctx(), model.config().rope_dim, model.config().rope_base_swa,
                                  model.config().rope_freq_scale)
                      : RopeTable()),
      scratch_(model.config(), std::clamp<int64_t>(opts.n_batch, 1, kv_.n_ctx())),
      logits_(size_t((opts.logits_all ? kv_.n_ctx() : 1) * model.config().n_vocab) * sizeof(float)) {
  if (opts.n_batch <= 0) fail("batch size must be positive, got {}", opts.n_batch);
  const BackendEntry& entry = require_backend(opts.backend);
  if (entry.host && opts.prefill != PrefillMode::Gpu) {
    fail(
        "--prefill cpu|auto splits work between the host and a device: use it with a device backend (this "
        "build "
        "has {})",
        device_backend_names());
  }
  const WeightSet weights = model.weights().weight_set();
  BackendParams p = session_backend_params(model, opts, pool_, kv_, scratch_.n_batch);
  for (AlignedBuffer* a : scratch_.activations()) p.resident.push_back({a->as<void>(), a->size()});
  backend_ = entry.make(p);
  backend_->load_weights(weights);
  if (!entry.host && opts.prefill != PrefillMode::Gpu) {
    // Hybrid prefill: prompts run on the host backend's tiles, in the same --weights mode, over the host
    // cache. (Made after the device backend, whose upload reads the file pages the tiles then release.)
    BackendParams hp = session_backend_params(model, opts, pool_, kv_, scratch_.n_batch);
    hp.device = 0;
    hp.device_profile = "none";
    hp.gpu_memory = GpuMemory::Buffer;
    hp.kv_memory = KvMemory::Buffer;
    hp.profiling = false;
    hp.tile_mask = 0;  // pacing masks the device backend only
    hp.options = nullptr;
    host_ = host_backend().make(hp);
    host_->load_weights(weights);
  }
  if (host_ || backend_->needs_host_kv()) kv_.allocate();
  tokens_.reserve(size_t(kv_.n_ctx()));
  if (host_ && opts.prefill == PrefillMode::Auto) measure_prefill();
}

void Session::measure_prefill() {
  const ModelConfig& c = model_.config();
  // The host at most 64 tokens: a 512-token batch (the GPU backends' n_batch) would cost a 7B's CPU pass ~25
  // s on a small host, and past a few dozen tokens its tiles' speed no longer grows. The device at the batch
  // it will run, where its speed may still grow (the H200's OpenCL GEMM: 541 t/s at 64 tokens a pass, 1784 at
  // 512), reached by doubling from 8 tokens while a pass lasts under kDeviceProbeSeconds.
  const int64_t P = std::min({scratch_.n_batch, kv_.n_ctx(), int64_t(64)});
  const int64_t D = std::min(scratch_.n_batch, kv_.n_ctx());
  const std::string key = fmt::format(
      "model {:016x} {} layers, vocab {}\nbackend {} device {} profile {} memory {}/{}\nhost threads {} "
      "batch {} device batch {} context {}\nactivations {} weights {} cache {}\n{}{}",
      model_fingerprint(model_), c.n_layer, c.n_vocab, backend_->name(), opts_.device, opts_.device_profile,
      int(opts_.gpu_memory), int(opts_.kv_memory), pool_.size(), P, D, kv_.n_ctx(), int(opts_.activations),
      int(opts_.weights), type_name(opts_.kv_type),
      opts_.backend_options ? opts_.backend_options->settings : "", engine_build_identity());
  const std::string dir = backend_->files_dir();  // empty (the backend's cache off): no file
  if (std::optional<PrefillSpeeds> kept = find_prefill_speeds(key, dir)) {
    speeds_ = *kept;
    return;
  }
  speeds_ = PrefillSpeeds{};
  speeds_.tokens = P;
  speeds_.device_tokens = D;
  speeds_.source = "measured";
  if (P < 2) return;  // no prompt batch to place: both 0, the device keeps every pass
  std::vector<int32_t> ids(static_cast<size_t>(D));
  for (int64_t t = 0; t < D; ++t) ids[size_t(t)] = int32_t((t * 131 + 7) % c.n_vocab);
  const RopeTable& rope_local = c.swa_own_rope ? rope_local_ : rope_global_;
  float* out = logits_.as<float>();  // the last token's logits read back: the device's pass has finished
  auto timed = [&](Backend& be, int64_t n, bool host) {  // seconds of one pass of n tokens at position 0
    ForwardContext ctx{model_, be, kv_, rope_global_, rope_local, scratch_};
    const auto t0 = std::chrono::steady_clock::now();
    forward(ctx, ids.data(), n, 0, out, 1);
    if (host) backend_->kv_to_device(kv_, 0, n);  // as eval() sends a host batch's rows up
    return std::max(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1e-9);
  };
  // The host first: a few tokens touch every weight page, then the batch.
  backend_->kv_to_host(kv_, 0, 0);  // as eval() before a host batch: the device's queue finished
  timed(*host_, std::min<int64_t>(P, 4), true);
  speeds_.host_tps = double(P) / timed(*host_, P, true);
  // The device: each size after an untimed pass of the same size (a GPU backend may build a kernel on first
  // use). A pass of D tokens takes no less time than one of fewer, so D / (the time for n) bounds its speed
  // at D from above: where that bound already loses to the host (a slow device: lavapipe's 64-token batches
  // ran at 1.5 t/s), the bound is kept. Where the doubling stops early (a pass took kDeviceProbeSeconds),
  // the speed of the last size stands for D's, from below.
  for (int64_t n = std::min<int64_t>(D, 8);; n = std::min(2 * n, D)) {
    timed(*backend_, n, false);
    const double t = timed(*backend_, n, false);
    if (n == D) {
      speeds_.device_tps = double(D) / t;
      break;
    }
    if (double(D) / t < speeds_.host_tps) {
      speeds_.device_tps = double(D) / t;
      speeds_.source = fmt::format("measured; the device's at most, from {} tokens", n);
      break;
    }
    if (t >= kDeviceProbeSeconds) {
      speeds_.device_tps = double(n) / t;
      speeds_.device_tokens = n;
      break;
    }
  }
  keep_prefill_speeds(key, dir, speeds_);
}

void Session::eval(const int32_t* tokens, int64_t n) {
  if (n <= 0) return;
  if (n_past_ + n > kv_.n_ctx()) {
    fail_as(ErrorKind::ContextFull,
            "{} tokens do not fit in the context: {} are already in it and the "
            "context size is {} (raise it with -c)",
            n, n_past_, kv_.n_ctx());
  }
  const int64_t V = model_.config().n_vocab;
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= V) fail("token id {} is outside the vocabulary of {}", tokens[t], V);
  }
  const RopeTable& rope_local = model_.config().swa_own_rope ? rope_local_ : rope_global_;
  ForwardContext on_device{model_, *backend_, kv_, rope_global_, rope_local, scratch_};
  ForwardContext on_host{model_, host_ ? *host_ : *backend_, kv_, rope_global_, rope_local, scratch_};
  float* out = logits_.as<float>();
  for (int64_t b = 0; b < n; b += scratch_.n_batch) {
    const int64_t nb = std::min(scratch_.n_batch, n - b), pos = n_past_ + b;
    const bool host = prefill_on_host(nb);
    if (host) {
      // The host cache must hold every earlier position: bring down what the device decoded since. This
      // also finishes the device's queue before the host writes the activation arrays it mirrors.
      backend_->kv_to_host(kv_, host_kv_, pos);
      host_kv_ = pos;
    }
    ForwardContext& ctx = host ? on_host : on_device;
    if (opts_.logits_all) {
      forward(ctx, tokens + b, nb, pos, out + b * V, nb);
    } else {
      // Only the very last token's logits are wanted.
      forward(ctx, tokens + b, nb, pos, b + nb == n ? out : nullptr, 1);
    }
    if (host) {
      backend_->kv_to_device(kv_, pos, pos + nb);
      host_kv_ = dev_kv_ = pos + nb;
    } else if (host_) {
      dev_kv_ = pos + nb;
    } else {
      host_kv_ = dev_kv_ = pos + nb;
    }
  }
  tokens_.insert(tokens_.end(), tokens, tokens + n);  // within the capacity reserved: no allocation
  n_past_ += n;
  last_n_ = n;
  has_logits_ = true;
  has_hidden_ = true;
}

bool Session::on_host() const {
  const BackendEntry* e = find_backend(backend_->name());
  return e && e->host;
}

const float* Session::logits() const {
  const int64_t V = model_.config().n_vocab;
  return opts_.logits_all ? logits_.as<float>() + (last_n_ - 1) * V : logits_.as<float>();
}

const float* Session::logits_at(int64_t i) const {
  if (!opts_.logits_all) fail("internal: logits_at() needs a session made with logits_all");
  if (i < 0 || i >= last_n_) fail("internal: logits row {} of a batch of {}", i, last_n_);
  return logits_.as<float>() + i * model_.config().n_vocab;
}

const float* Session::hidden_states(int64_t* n) const {
  if (!on_host())
    fail("hidden states are read on a host backend only; this session runs on {}", backend_name());
  if (!has_hidden_) fail("internal: hidden_states() before any eval()");
  // eval() ran its batches of n_batch tokens; the scratch holds the last one.
  *n = last_n_ - (last_n_ - 1) / scratch_.n_batch * scratch_.n_batch;
  return scratch_.x.as<float>();
}

bool Session::prefill_on_host(int64_t n_tok) const {
  if (!host_ || n_tok <= 1) return false;
  return opts_.prefill == PrefillMode::Cpu || (opts_.prefill == PrefillMode::Auto && speeds_.host_faster());
}

}  // namespace tilellm
