// The layer loop: one pre-norm transformer block per layer, for every architecture the model layer knows,
//   h  = x + [post_attn_norm] Wo · Attn(RoPE([q_norm] (Wq · n(x) [+ bq])), RoPE([k_norm] (Wk · n(x) [+ bk])),
//                                       Wv · n(x) [+ bv])
//   x' = h + [post_ffn_norm] Wdown · (act(Wgate · n(h)) * Wup · n(h))
//   or, with experts, x' = h + MoE(n(h)) (backends/moe.h: the router's chosen experts and the shared one)
// where n() is the block's input RMSNorm (attn_norm, ffn_norm), the bracketed norms and biases are present
// only where the architecture has them (Gemma 3; Qwen2), and local (sliding-window) layers use their own RoPE
// table and see the last sliding_window positions only. After the last block: output_norm, then the output
// matrix (and Gemma's final soft cap) for the rows whose logits are asked for.
#include "model/forward.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "base/error.h"

namespace tilellm {

ForwardScratch::ForwardScratch(const ModelConfig& c, int64_t nb)
    : n_batch(nb),
      x(size_t(nb * c.n_embd) * 4),
      xn(size_t(nb * c.n_embd) * 4),
      q(size_t(nb * c.q_dim()) * 4),
      k(size_t(nb * c.kv_dim()) * 4),
      v(size_t(nb * c.kv_dim_v()) * 4),
      attn(size_t(nb * c.n_head * c.head_dim_v) * 4),
      o(size_t(nb * c.n_embd) * 4),
      gate(size_t(c.moe() ? 1 : nb * c.n_ff) * 4),
      up(size_t(c.moe() ? 1 : nb * c.n_ff) * 4),
      pos(size_t(nb) * 4),
      moe(c.moe() ? MoeScratch(nb, c.n_embd, std::max(c.n_ff_exp, c.n_ff_shexp), c.n_expert, c.n_expert_used)
                  : MoeScratch()) {}

namespace {

// Embedding and every block over n tokens that belong to the sequences of `spans` (the tokens of span i at
// [begin, begin + n) of the batch, at positions n_past.. of its own cache). Matmuls, norms and the FFN run
// over all n rows at once; RoPE, the cache write and attention run per span, on that span's rows and cache.
// Leaves the final residual stream in s.x. The backend's pass is begun (not ended) here.
// norm_out: the output norm of every row is wanted too; without experts the last block makes it in s.xn with
// its residual add, as every other block makes the next one's input norm (one call; on a device that leaves
// the norm to the products that read it, two launches fewer a token), and run_blocks returns true.
bool run_blocks(ForwardContext& ctx, const int32_t* tokens, int64_t n, const SeqSpan* spans, int n_spans,
                ForwardStep step, bool norm_out) {
  const ModelConfig& c = ctx.model.config();
  const ModelWeights& W = ctx.model.weights();
  Backend& be = ctx.backend;
  ForwardScratch& s = ctx.s;
  float* x = s.x.as<float>();
  float* xn = s.xn.as<float>();
  float* q = s.q.as<float>();
  float* k = s.k.as<float>();
  float* v = s.v.as<float>();
  float* attn = s.attn.as<float>();
  float* o = s.o.as<float>();
  float* gate = s.gate.as<float>();
  float* up = s.up.as<float>();
  int32_t* pos = s.pos.as<int32_t>();
  for (int i = 0; i < n_spans; ++i)
    for (int64_t t = 0; t < spans[i].n; ++t) pos[spans[i].begin + t] = int32_t(spans[i].n_past + t);
  step.pos = pos;
  // The op sequence below depends only on the model, n and whether logits are made: one decode step is
  // another's with new data, whatever passes (prompts) ran between them — when it writes the same cache (a
  // recorded step addresses its sequence's cache on the device). Not with experts: the routing, read back
  // during the pass, picks the matrices. A batch decode step likewise, over the same caches in order.
  const bool replayable = step.decode || step.batch_decode;
  bool same = replayable && s.last_decode_backend == &be && s.last_decode_n == n_spans;
  for (int i = 0; same && i < n_spans; ++i) same = s.last_decode_kvs[size_t(i)] == spans[i].kv;
  step.same_as_last = same;
  if (replayable) {
    s.last_decode_backend = &be;
    s.last_decode_n = n_spans;
    for (int i = 0; i < n_spans; ++i) s.last_decode_kvs[size_t(i)] = spans[i].kv;
  }
  be.begin_forward(step);
  // The leading run of one-token spans (a batch decode step's, or the decoding sequences' tokens that serve
  // puts before a prompt chunk) goes through the ops that take several sequences at once, with their caches;
  // V rows as wide as K rows (the layout rope_kv_store_seqs and attention_seqs assume).
  std::array<KvCache*, kMaxBatchDecode> kvs{};
  int n_seqs = 0;
  while (c.head_dim_v == c.head_dim && n_seqs < n_spans && n_seqs < kMaxBatchDecode && spans[n_seqs].n == 1) {
    kvs[size_t(n_seqs)] = spans[n_seqs].kv;
    ++n_seqs;
  }
  if (n_seqs < 2) n_seqs = 0;

  const int64_t E = c.n_embd, QD = c.q_dim(), KD = c.kv_dim(), VD = c.kv_dim_v(),
                AD = c.n_head * c.head_dim_v;
  be.embed(W.tok_embd, tokens, n, c.embed_scale, x);

  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& L = W.layers[size_t(il)];
    const bool local = c.layer_is_swa[size_t(il)] != 0;
    const RopeTable& rope = local ? ctx.rope_local : ctx.rope_global;

    // Attention block. Its input norm comes with the previous layer's last residual add (below).
    if (il == 0) be.rmsnorm(x, L.attn_norm.data(), xn, n, E, c.rms_eps);
    RopeShape rs;
    rs.n_head = c.n_head;
    rs.n_head_kv = c.n_head_kv;
    rs.head_dim = c.head_dim;
    rs.rope_dim = c.rope_dim;
    rs.table = &rope;
    rs.mode = c.rope_mode;
    const Weight* wqkv[3] = {&L.wq, &L.wk, &L.wv};
    // One sequence's tokens with nothing between the products and RoPE: the products, RoPE and the KV
    // write in one call.
    const bool qkv_rope =
        L.bq.empty() && !c.qk_norm && n_seqs == 0 && n_spans == 1 && spans[0].begin == 0 && spans[0].n == n;
    if (qkv_rope) {
      be.matmul_rope_kv_store(wqkv, xn, n, q, k, v, *spans[0].kv, il, pos, rs);
    } else {
      float* ys[3] = {q, k, v};
      be.matmul_shared(wqkv, ys, 3, xn, n);
    }
    if (!L.bq.empty()) {
      be.add_rows(q, L.bq.data(), n, c.q_dim());
      be.add_rows(k, L.bk.data(), n, c.kv_dim());
      be.add_rows(v, L.bv.data(), n, c.kv_dim_v());
    }
    if (c.qk_norm) {
      be.rmsnorm(q, L.q_norm.data(), q, n * c.n_head, c.head_dim, c.rms_eps);
      be.rmsnorm(k, L.k_norm.data(), k, n * c.n_head_kv, c.head_dim, c.rms_eps);
    }
    AttnParams ap;
    ap.n_head = c.n_head;
    ap.n_head_kv = c.n_head_kv;
    ap.head_dim = c.head_dim;
    ap.scale = c.attn_scale;
    ap.window = local ? c.sliding_window : 0;
    if (n_seqs > 0) {  // spans 0 .. n_seqs - 1 are rows 0 .. n_seqs - 1
      be.rope_kv_store_seqs(q, k, v, kvs.data(), il, pos, n_seqs, rs);
      be.attention_seqs(q, kvs.data(), il, pos, n_seqs, ap, attn);
    }
    for (int i = n_seqs; i < n_spans; ++i) {
      const SeqSpan& sp = spans[i];
      const int64_t b = sp.begin;
      if (!qkv_rope) be.rope_kv_store(q + b * QD, k + b * KD, v + b * VD, *sp.kv, il, pos + b, sp.n, rs);
      be.attention(q + b * QD, *sp.kv, il, pos + b, sp.n, ap, attn + b * AD);
    }
    // Feed-forward block: the output product, the residual add and the block's input norm in one call
    // (the norm after the product's own post-norm, where the architecture has one).
    if (c.post_norms) {
      be.matmul(L.wo, attn, n, o);
      be.rmsnorm(o, L.post_attn_norm.data(), o, n, E, c.rms_eps);
      be.add_rmsnorm(x, o, L.ffn_norm.data(), xn, n, E, c.rms_eps);
    } else {
      be.matmul_add_rmsnorm(L.wo, attn, n, o, x, L.ffn_norm.data(), xn, c.rms_eps);
    }
    if (c.moe()) {
      // The mixture adds its output to the residual stream itself.
      be.moe_ffn(W.moe(c, il), xn, n, x, s.moe);
      if (il + 1 < c.n_layer) be.rmsnorm(x, W.layers[size_t(il + 1)].attn_norm.data(), xn, n, E, c.rms_eps);
      continue;
    }
    be.matmul_glu(L.w_gate, L.w_up, xn, n, c.ffn_act, gate, up);
    // The norm after this block: the next block's input norm, or the output norm.
    const float* next_norm = il + 1 < c.n_layer ? W.layers[size_t(il + 1)].attn_norm.data()
                             : norm_out         ? W.output_norm.data()
                                                : nullptr;
    if (next_norm && !c.post_norms) {
      be.matmul_add_rmsnorm(L.w_down, gate, n, o, x, next_norm, xn, c.rms_eps);
      continue;
    }
    be.matmul(L.w_down, gate, n, o);
    if (c.post_norms) be.rmsnorm(o, L.post_ffn_norm.data(), o, n, E, c.rms_eps);
    if (next_norm) {
      be.add_rmsnorm(x, o, next_norm, xn, n, E, c.rms_eps);
    } else {
      be.add(x, o, n * E);
    }
  }
  return norm_out && !c.moe();
}

// Gemma-style soft cap; rare and cheap next to the output projection, so it stays a plain loop here.
void soft_cap(const ModelConfig& c, float* logits, int64_t rows) {
  if (c.final_logit_softcap <= 0.0f) return;
  const float cap = c.final_logit_softcap;
  for (int64_t i = 0; i < rows * c.n_vocab; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
}

}  // namespace

void forward(ForwardContext& ctx, const int32_t* tokens, int64_t n, int64_t n_past, float* logits,
             int64_t n_logits) {
  const ModelConfig& c = ctx.model.config();
  ForwardScratch& s = ctx.s;
  if (n <= 0 || n > s.n_batch) fail("internal: batch of {} tokens for a scratch of {}", n, s.n_batch);
  if (n_past + n > ctx.kv.n_ctx()) {
    fail(
        "the context is full: {} tokens already cached + {} new exceed the "
        "context size {}",
        n_past, n, ctx.kv.n_ctx());
  }
  if (logits && n_logits > n) fail("internal: {} logits rows requested from a batch of {}", n_logits, n);

  ForwardStep step;
  step.n_tok = n;
  step.n_past = n_past;
  step.n_logits = logits ? std::max<int64_t>(n_logits, 0) : 0;
  step.decode = n == 1 && step.n_logits == 1 && !c.moe();
  const SeqSpan span{&ctx.kv, n_past, 0, n};
  const bool normed = run_blocks(ctx, tokens, n, &span, 1, step, step.n_logits > 0);

  Backend& be = ctx.backend;
  if (!logits || n_logits <= 0) return be.end_forward();
  const int64_t E = c.n_embd;
  float* xn = s.xn.as<float>();
  if (normed) {
    xn += (n - n_logits) * E;  // every row's output norm is there: the last n_logits
  } else {
    const float* last = s.x.as<float>() + (n - n_logits) * E;
    be.rmsnorm(last, ctx.model.weights().output_norm.data(), xn, n_logits, E, c.rms_eps);
  }
  be.matmul(ctx.model.weights().output, xn, n_logits, logits);
  // The pass's last op: a backend that replays a recorded step fills the logits here.
  be.end_forward();
  soft_cap(c, logits, n_logits);
}

void forward_spans(ForwardContext& ctx, const int32_t* tokens, const SeqSpan* spans, int n_spans,
                   float* logits) {
  const ModelConfig& c = ctx.model.config();
  ForwardScratch& s = ctx.s;
  int64_t n = 0;
  for (int i = 0; i < n_spans; ++i) {
    const SeqSpan& sp = spans[i];
    if (sp.begin != n || sp.n <= 0) fail("internal: span {} of a batch is not the next non-empty run", i);
    if (sp.kv->n_ctx() != ctx.kv.n_ctx() || sp.kv->kv_dim() != ctx.kv.kv_dim() ||
        sp.kv->type() != ctx.kv.type())
      fail("internal: span {}'s cache has another geometry than the backend's", i);
    if (sp.n_past + sp.n > sp.kv->n_ctx())
      fail("the context is full: {} tokens already cached + {} new exceed the context size {}", sp.n_past,
           sp.n, sp.kv->n_ctx());
    n += sp.n;
  }
  if (n <= 0 || n > s.n_batch) fail("internal: batch of {} tokens for a scratch of {}", n, s.n_batch);

  ForwardStep step;
  step.n_tok = n;
  step.n_past = n_spans == 1 ? spans[0].n_past : 0;
  step.n_logits = n_spans;
  step.decode = n == 1 && !c.moe();
  step.batch_decode = n_spans > 1 && n == n_spans && n_spans <= kMaxBatchDecode && !c.moe();
  // One token a span (a batch decode step): row i is span i's last, so the last block's output norm of every
  // row is what the output matmul reads.
  const bool normed = run_blocks(ctx, tokens, n, spans, n_spans, step, n == n_spans);

  // Else each span's last row through the output norm (into consecutive rows of xn), then one output matmul.
  Backend& be = ctx.backend;
  const int64_t E = c.n_embd;
  const float* x = s.x.as<float>();
  float* xn = s.xn.as<float>();
  for (int i = 0; !normed && i < n_spans; ++i) {
    const SeqSpan& sp = spans[i];
    be.rmsnorm(x + (sp.begin + sp.n - 1) * E, ctx.model.weights().output_norm.data(), xn + i * E, 1, E,
               c.rms_eps);
  }
  be.matmul(ctx.model.weights().output, xn, n_spans, logits);
  be.end_forward();
  soft_cap(c, logits, n_spans);
}

}  // namespace tilellm
