// The layer loop, written once against the Backend op interface for every supported architecture.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/kv_cache.h"
#include "base/aligned.h"
#include "model/model.h"

namespace tilellm {

// Activations for up to n_batch tokens, allocated once per session; every array is row-major [token][...].
struct ForwardScratch {
  ForwardScratch(const ModelConfig& c, int64_t n_batch);
  int64_t n_batch;
  AlignedBuffer x;     // [n_batch][n_embd]   residual stream
  AlignedBuffer xn;    // [n_batch][n_embd]   normed input of a block
  AlignedBuffer q;     // [n_batch][q_dim]
  AlignedBuffer k;     // [n_batch][kv_dim]
  AlignedBuffer v;     // [n_batch][kv_dim]
  AlignedBuffer attn;  // [n_batch][q_dim]    attention output before the projection
  AlignedBuffer o;     // [n_batch][n_embd]   block output before the residual add
  AlignedBuffer gate;  // [n_batch][n_ff]     (a model with experts: [1], unused)
  AlignedBuffer up;    // [n_batch][n_ff]     (likewise)
  AlignedBuffer pos;   // [n_batch] int32 positions
  MoeScratch moe;      // a model with experts: the mixture's host arrays (backends/moe.h); else empty

  // The backend of the last decode or batch decode step, from which the next one's ForwardStep::same_as_last
  // follows, and the caches it wrote in their order (a BatchSession has several).
  const Backend* last_decode_backend = nullptr;
  std::array<const KvCache*, kMaxBatchDecode> last_decode_kvs{};
  int last_decode_n = 0;

  // The float arrays (x .. up), which only ops read and write: a backend with its own memory may keep them
  // there between ops (the OpenCL backend mirrors them on the device).
  std::vector<AlignedBuffer*> activations() { return {&x, &xn, &q, &k, &v, &attn, &o, &gate, &up}; }
};

struct ForwardContext {
  const Model& model;
  Backend& backend;
  KvCache& kv;
  const RopeTable& rope_global;
  const RopeTable& rope_local;  // sliding-window layers (same as global when the model has none)
  ForwardScratch& s;
};

// Runs n_tok (<= n_batch) tokens at positions n_past.. through the model, writing their K/V into the cache.
// Logits: when `logits` is non-null, the logits of the last `n_logits` tokens of this batch are written to it
// as [n_logits][n_vocab]. The backend sees the pass whole: begin_forward before the first op, end_forward
// after the last (backends/backend.h, ForwardStep).
void forward(ForwardContext& ctx, const int32_t* tokens, int64_t n_tok, int64_t n_past, float* logits,
             int64_t n_logits);

// One sequence's run of tokens in a batch of several sequences: tokens [begin, begin + n) of the batch, at
// positions n_past.. of the sequence's own cache.
struct SeqSpan {
  KvCache* kv;
  int64_t n_past;
  int64_t begin;
  int64_t n;
};

// Several sequences in one pass (continuous batching): the spans lie one after another in `tokens` (total
// <= n_batch); every matmul, norm and FFN runs over all their rows at once, RoPE, the cache write and
// attention per span, on its own cache. logits: [n_spans][n_vocab], the last token of each span. The caches
// are passed to the backend's ops one by one, so this needs a backend whose cache ops work on the host cache
// they are handed (the host backend); ctx.kv gives the geometry every span's cache must share.
void forward_spans(ForwardContext& ctx, const int32_t* tokens, const SeqSpan* spans, int n_spans,
                   float* logits);

}  // namespace tilellm
