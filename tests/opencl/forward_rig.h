// The forward pass on an OpenCL backend the test builds itself (a Session builds its own), so a test can use
// the backend's test hooks and counters: the same sizes, resident activation arrays and weights a Session
// gives it, over a KV cache of `n_ctx` positions. For models with one RoPE table (no sliding-window layers,
// no rope_freqs): SmolLM2.
#pragma once

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <vector>

#include "backends/opencl/opencl_backend.h"
#include "model/forward.h"
#include "model/model.h"
#include "test_device.h"

namespace tilellm::test {

struct OpenclForwardRig {
  const Model& model;
  KvCache kv;
  RopeTable rope;
  ForwardScratch s;
  std::vector<float> logits;          // [n_vocab]: the last token's
  std::unique_ptr<OpenclBackend> be;  // last, so destroyed first: its queue may still read s

  // Test hook as in OpenclBackendOptions: `kernel` (if not empty) is replaced by `source`. q8_plain_dot: the
  // integer prompt GEMM on any device (OpenclBackendOptions::q8_plain_dot). profiling: kernel timestamps
  // (be->kernel_times()). flush_every: OpenclBackendOptions::flush_every.
  OpenclForwardRig(const Model& m, int64_t n_ctx, int64_t n_batch, GgmlType kv_type, const char* kernel = "",
                   const char* source = "", bool q8_plain_dot = false, bool profiling = false,
                   int flush_every = 0)
      : model(m),
        kv(m.config().n_layer, n_ctx, m.config().n_head_kv, m.config().head_dim, kv_type),
        rope(n_ctx, m.config().rope_dim, m.config().rope_base, m.config().rope_freq_scale),
        s(m.config(), n_batch),
        logits(size_t(m.config().n_vocab)) {
    const ModelConfig& c = m.config();
    if (c.sliding_window > 0 || !m.weights().rope_freqs.empty())
      throw std::runtime_error("OpenclForwardRig: the model needs more than one plain RoPE table");
    OpenclBackendOptions o;
    o.device = opencl_test_device();
    o.max_tokens = n_batch;
    const int64_t widest = std::max({c.n_embd, c.n_ff, c.q_dim(), c.n_head * c.head_dim_v, c.kv_dim()});
    o.max_in_elems = n_batch * widest;
    o.max_out_elems = std::max(o.max_in_elems, c.n_vocab);
    o.max_width = std::max({c.n_embd, c.head_dim, c.rope_dim});
    o.kv_layers = kv.n_layer();
    o.kv_ctx = kv.n_ctx();
    o.kv_dim = kv.kv_dim();
    o.kv_type = kv_type;
    for (AlignedBuffer* a : s.activations()) o.resident.push_back({a->as<void>(), a->size()});
    o.test_kernel_name = kernel;
    o.test_kernel_source = source;
    o.q8_plain_dot = q8_plain_dot;
    o.profiling = profiling;
    o.flush_every = flush_every;
    be = std::make_unique<OpenclBackend>(o);
    be->upload_model(m.weights().weight_set());
  }
  // n tokens at positions n_past..; want_logits: the last token's logits into `logits`.
  void run(const int32_t* tokens, int64_t n, int64_t n_past, bool want_logits = true) {
    ForwardContext ctx{model, *be, kv, rope, rope, s};
    forward(ctx, tokens, n, n_past, want_logits ? logits.data() : nullptr, 1);
  }
};

}  // namespace tilellm::test
