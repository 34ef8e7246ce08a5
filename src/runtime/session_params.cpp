#include "runtime/session_params.h"

#include <algorithm>

#include "base/error.h"
#include "base/memory_info.h"

namespace tilellm {

int64_t session_context_size(const Model& m, const SessionOptions& o, int n_seq) {
  const ModelConfig& c = m.config();
  const int64_t n = o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(c.n_ctx_train, 4096);
  if (n > (int64_t(1) << 24)) fail("context size {} is too large (at most {})", n, int64_t(1) << 24);
  const BackendEntry* be = find_backend(o.backend);
  const double elem = o.kv_type == GgmlType::F32 ? 4.0 : 2.0;
  const double kv =
      (!be || be->host) ? 2.0 * double(c.n_layer) * double(n) * double(c.kv_dim()) * elem * n_seq : 0.0;
  const double rope = (c.swa_own_rope ? 2.0 : 1.0) * double(n) * double(c.rope_dim) * 4.0;
  const double logits = o.logits_all ? double(n) * double(c.n_vocab) * 4.0 : 0.0;
  const uint64_t avail = available_memory_bytes();
  if (avail > 0 && kv + rope + logits > double(avail)) {
    constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
    fail_as(ErrorKind::OutOfMemory,
            "a context of {} tokens{} needs {:.2f} GiB of host memory (KV cache {:.2f} GiB, RoPE tables "
            "{:.2f} GiB, logits {:.2f} GiB) but {:.2f} GiB are available: lower -c",
            n, n_seq > 1 ? fmt::format(" for each of {} sequences", n_seq) : "", (kv + rope + logits) / GiB,
            kv / GiB, rope / GiB, logits / GiB, double(avail) / GiB);
  }
  return n;
}

BackendParams session_backend_params(const Model& m, const SessionOptions& o, ThreadPool& pool,
                                     const KvCache& kv, int64_t n_batch, int64_t n_logits) {
  const ModelConfig& c = m.config();
  BackendParams p = backend_params(o);
  p.pool = &pool;
  p.max_tokens = n_batch;
  // With experts the ops also see the router's logits and one token's chosen experts side by side.
  const int64_t widest = std::max({c.n_embd, c.ffn_width(), c.q_dim(), c.n_head * c.head_dim_v, c.kv_dim(),
                                   c.n_expert, c.n_expert_used * c.n_ff_exp});
  p.max_in_elems = n_batch * widest;
  p.max_out_elems = std::max(p.max_in_elems, (o.logits_all ? n_batch : n_logits) * c.n_vocab);
  p.max_width = std::max({c.n_embd, c.head_dim, c.rope_dim});
  p.kv_layers = kv.n_layer();
  p.kv_ctx = kv.n_ctx();
  p.kv_dim = kv.kv_dim();
  p.kv_type = kv.type();
  return p;
}

BackendParams backend_params(const SessionOptions& o) {
  BackendParams p;
  p.device = o.device;
  p.device_profile = o.device_profile;
  p.weights = o.weights;
  p.activations = o.activations;
  p.gpu_memory = o.gpu_memory;
  p.kv_memory = o.kv_memory;
  p.profiling = o.profile_kernels;
  p.tile_mask = o.tile_mask;
  p.kv_type = o.kv_type;
  p.options = o.backend_options.get();
  return p;
}

}  // namespace tilellm
