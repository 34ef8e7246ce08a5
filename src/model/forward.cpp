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

void forward(ForwardContext& ctx, const int32_t* tokens, int64_t n, int64_t n_past, float* logits,
             int64_t n_logits) {
  const ModelConfig& c = ctx.model.config();
  const ModelWeights& W = ctx.model.weights();
  Backend& be = ctx.backend;
  ForwardScratch& s = ctx.s;
  if (n <= 0 || n > s.n_batch) fail("internal: batch of {} tokens for a scratch of {}", n, s.n_batch);
  if (n_past + n > ctx.kv.n_ctx()) {
    fail(
        "the context is full: {} tokens already cached + {} new exceed the "
        "context size {}",
        n_past, n, ctx.kv.n_ctx());
  }

  if (logits && n_logits > n) fail("internal: {} logits rows requested from a batch of {}", n_logits, n);

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
  for (int64_t i = 0; i < n; ++i) pos[i] = int32_t(n_past + i);

  // The op sequence below depends only on the model, n and whether logits are made: one decode step is
  // another's with new data. Not with experts: the routing, read back during the pass, picks the matrices.
  ForwardStep step;
  step.n_tok = n;
  step.n_past = n_past;
  step.n_logits = logits ? std::max<int64_t>(n_logits, 0) : 0;
  step.pos = pos;
  step.decode = n == 1 && step.n_logits == 1 && !c.moe();
  step.same_as_last = step.decode && s.last_backend == &be && s.last_step.decode;
  s.last_step = step;
  s.last_backend = &be;
  be.begin_forward(step);

  const int64_t E = c.n_embd;
  be.embed(W.tok_embd, tokens, n, c.embed_scale, x);

  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& L = W.layers[size_t(il)];
    const bool local = c.layer_is_swa[size_t(il)] != 0;
    const RopeTable& rope = local ? ctx.rope_local : ctx.rope_global;

    // Attention block. Its input norm comes with the previous layer's last residual add (below).
    if (il == 0) be.rmsnorm(x, L.attn_norm.data(), xn, n, E, c.rms_eps);
    {
      const Weight* ws[3] = {&L.wq, &L.wk, &L.wv};
      float* ys[3] = {q, k, v};
      be.matmul_shared(ws, ys, 3, xn, n);
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
    RopeShape rs;
    rs.n_head = c.n_head;
    rs.n_head_kv = c.n_head_kv;
    rs.head_dim = c.head_dim;
    rs.rope_dim = c.rope_dim;
    rs.table = &rope;
    rs.mode = c.rope_mode;
    be.rope_kv_store(q, k, v, ctx.kv, il, pos, n, rs);
    AttnParams ap;
    ap.n_head = c.n_head;
    ap.n_head_kv = c.n_head_kv;
    ap.head_dim = c.head_dim;
    ap.scale = c.attn_scale;
    ap.window = local ? c.sliding_window : 0;
    be.attention(q, ctx.kv, il, pos, n, ap, attn);
    be.matmul(L.wo, attn, n, o);
    if (c.post_norms) be.rmsnorm(o, L.post_attn_norm.data(), o, n, E, c.rms_eps);

    // Feed-forward block: the residual add and its input norm in one call.
    be.add_rmsnorm(x, o, L.ffn_norm.data(), xn, n, E, c.rms_eps);
    if (c.moe()) {
      // The mixture adds its output to the residual stream itself.
      be.moe_ffn(W.moe(c, il), xn, n, x, s.moe);
      if (il + 1 < c.n_layer) be.rmsnorm(x, W.layers[size_t(il + 1)].attn_norm.data(), xn, n, E, c.rms_eps);
      continue;
    }
    be.matmul_glu(L.w_gate, L.w_up, xn, n, c.ffn_act, gate, up);
    be.matmul(L.w_down, gate, n, o);
    if (c.post_norms) be.rmsnorm(o, L.post_ffn_norm.data(), o, n, E, c.rms_eps);
    if (il + 1 < c.n_layer) {
      be.add_rmsnorm(x, o, W.layers[size_t(il + 1)].attn_norm.data(), xn, n, E, c.rms_eps);
    } else {
      be.add(x, o, n * E);
    }
  }

  if (!logits || n_logits <= 0) return be.end_forward();
  const float* last = x + (n - n_logits) * E;
  be.rmsnorm(last, W.output_norm.data(), xn, n_logits, E, c.rms_eps);
  be.matmul(W.output, xn, n_logits, logits);
  // The pass's last op: a backend that replays a recorded step fills the logits here.
  be.end_forward();
  if (c.final_logit_softcap > 0.0f) {
    // Gemma-style soft cap; rare and cheap next to the output projection, so it
    // stays a plain loop here.
    const float cap = c.final_logit_softcap;
    for (int64_t i = 0; i < n_logits * c.n_vocab; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
}

}  // namespace tilellm
