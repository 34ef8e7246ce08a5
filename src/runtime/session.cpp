#include "runtime/session.h"

#include <algorithm>

#include "format/error.h"
#ifdef TILELLM_HAVE_OPENCL
#include "backends/opencl/opencl_backend.h"
#endif

namespace tilellm {
namespace {

int64_t context_size(const Model& m, const SessionOptions& o) {
  const int64_t n = o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(m.config().n_ctx_train, 4096);
  if (n > (int64_t(1) << 24)) fail("context size {} is too large", n);
  return n;
}

// The widest matmul input (n_embd, n_ff or the attention width) times the tokens of one forward pass.
int64_t max_activation_elems(const Model& m, const SessionOptions& o) {
  const ModelConfig& c = m.config();
  const int64_t widest = std::max({c.n_embd, c.n_ff, c.n_head * c.head_dim_v});
  return widest * std::clamp<int64_t>(o.n_batch, 1, context_size(m, o));
}

// The OpenCL backend sized for this session (scratch for n_batch tokens, the device KV cache of kv's
// geometry), keeping the activation arrays of `s` on the device, with every weight uploaded.
std::unique_ptr<Backend> make_device_backend(const Model& m, const SessionOptions& o, const KvCache& kv,
                                             ForwardScratch& s) {
#ifdef TILELLM_HAVE_OPENCL
  const ModelConfig& c = m.config();
  OpenclBackendOptions g;
  g.device = o.device;
  g.profile = o.device_profile;
  g.profiling = o.profile_kernels;
  g.cache = o.program_cache;
  g.memory = o.gpu_memory;
  g.weights = o.weights;
  const int64_t n_batch = s.n_batch;
  g.max_tokens = n_batch;
  const int64_t widest = std::max({c.n_embd, c.n_ff, c.q_dim(), c.n_head * c.head_dim_v, c.kv_dim()});
  g.max_in_elems = n_batch * widest;
  g.max_out_elems = std::max(g.max_in_elems, (o.logits_all ? n_batch : 1) * c.n_vocab);
  g.max_width = std::max({c.n_embd, c.head_dim, c.rope_dim});
  g.kv_layers = kv.n_layer();
  g.kv_ctx = kv.n_ctx();
  g.kv_dim = kv.kv_dim();
  g.kv_type = kv.type();
  for (AlignedBuffer* a : s.activations()) g.resident.push_back({a->as<void>(), a->size()});
  auto be = std::make_unique<OpenclBackend>(g);
  be->upload_model(m.weights());
  return be;
#else
  (void)m, (void)o, (void)kv, (void)s;
  fail("this build has no OpenCL backend (CMake found no OpenCL headers and ICD loader when configuring it)");
#endif
}

}  // namespace

Session::Session(const Model& model, const SessionOptions& opts)
    : model_(model),
      opts_(opts),
      pool_(opts.n_threads > 0 ? opts.n_threads : ThreadPool::default_threads(), opts.cpus),
      backend_(pool_, opts.activations, max_activation_elems(model, opts)),
      // On a device with prompts there too, the host cache would never be read: its geometry only (the
      // storage comes later if the device backend runs a cache op on the host).
      kv_(model.config().n_layer, context_size(model, opts), model.config().n_head_kv,
          model.config().head_dim, opts.kv_type,
          !(opts.backend == BackendKind::OpenCL && opts.prefill == PrefillMode::Gpu)),
      rope_global_(kv_.n_ctx(), model.config().rope_dim, model.config().rope_base,
                   model.config().rope_freq_scale,
                   model.weights().rope_freqs.empty() ? nullptr : model.weights().rope_freqs.data()),
      rope_local_(model.config().sliding_window > 0
                      ? RopeTable(kv_.n_ctx(), model.config().rope_dim, model.config().rope_base_swa,
                                  model.config().rope_freq_scale)
                      : RopeTable()),
      scratch_(model.config(), std::clamp<int64_t>(opts.n_batch, 1, kv_.n_ctx())),
      logits_(size_t((opts.logits_all ? kv_.n_ctx() : 1) * model.config().n_vocab) * sizeof(float)) {
  if (opts.n_batch <= 0) fail("batch size must be positive, got {}", opts.n_batch);
  if (opts.backend == BackendKind::OpenCL) {
    // The device holds its own copy of the weights, in their GGUF types or converted per --weights with the
    // CPU's conversion; the CPU backend then only runs ops the self-check took off the device (the device
    // backend's own CPU fallback holds what those need), so it prepares nothing — unless it runs prompts
    // too (hybrid prefill), which it does on its tiles in the same --weights mode.
    device_backend_ = make_device_backend(model, opts, kv_, scratch_);
    if (device_backend_->needs_host_kv()) kv_.allocate();
    if (opts.prefill != PrefillMode::Gpu) backend_.prepare_weights(model.weights(), opts.weights);
  } else {
    if (opts.prefill != PrefillMode::Gpu)
      fail("--prefill cpu|auto splits work between the CPU and a device: use it with --backend opencl");
    if (opts.gpu_memory != GpuMemory::Buffer)
      fail("--gpu-memory {} places weights in device memory: use it with --backend opencl",
           gpu_memory_name(opts.gpu_memory));
    backend_.prepare_weights(model.weights(), opts.weights);
  }
}

void Session::eval(const int32_t* tokens, int64_t n) {
  if (n <= 0) return;
  if (n_past_ + n > kv_.n_ctx()) {
    fail(
        "{} tokens do not fit in the context: {} are already in it and the "
        "context size is {} (raise it with -c)",
        n, n_past_, kv_.n_ctx());
  }
  const int64_t V = model_.config().n_vocab;
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= V) fail("token id {} is outside the vocabulary of {}", tokens[t], V);
  }
  const RopeTable& rope_local = model_.config().sliding_window > 0 ? rope_local_ : rope_global_;
  ForwardContext on_cpu{model_, backend_, kv_, rope_global_, rope_local, scratch_};
  ForwardContext on_device{
      model_, device_backend_ ? *device_backend_ : backend_, kv_, rope_global_, rope_local, scratch_};
  float* out = logits_.as<float>();
  for (int64_t b = 0; b < n; b += scratch_.n_batch) {
    const int64_t nb = std::min(scratch_.n_batch, n - b), pos = n_past_ + b;
    const bool cpu = prefill_on_cpu(nb);
    if (cpu) {
      // The host cache must hold every earlier position: bring down what the device decoded since. This
      // also finishes the device's queue before the CPU writes the activation arrays it mirrors.
      device_backend_->kv_to_host(kv_, host_kv_, pos);
      host_kv_ = pos;
    }
    ForwardContext& ctx = cpu ? on_cpu : on_device;
    if (opts_.logits_all) {
      forward(ctx, tokens + b, nb, pos, out + b * V, nb);
    } else {
      // Only the very last token's logits are wanted.
      forward(ctx, tokens + b, nb, pos, b + nb == n ? out : nullptr, 1);
    }
    if (cpu) {
      device_backend_->kv_to_device(kv_, pos, pos + nb);
      host_kv_ = dev_kv_ = pos + nb;
    } else if (device_backend_) {
      dev_kv_ = pos + nb;
    } else {
      host_kv_ = pos + nb;
    }
  }
  n_past_ += n;
  last_n_ = n;
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

bool Session::prefill_on_cpu(int64_t n_tok) const {
  if (!device_backend_ || n_tok <= 1) return false;
  return opts_.prefill == PrefillMode::Cpu ||
         (opts_.prefill == PrefillMode::Auto && n_tok >= kAutoPrefillTokens);
}

std::vector<KernelTime> Session::kernel_times() const {
  return device_backend_ ? device_backend_->kernel_times() : std::vector<KernelTime>{};
}

void Session::reset_kernel_times() {
  if (device_backend_) device_backend_->reset_kernel_times();
}

}  // namespace tilellm
