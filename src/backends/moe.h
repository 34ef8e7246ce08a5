// Mixture-of-experts feed-forward as the op interface sees it (Backend::moe_ffn): the routing of tokens to
// experts, the op's parameters and its host scratch.
//
// One layer's mixture, for each token x (a row of the normed residual):
//   logits = router x                                   [n_expert]
//   probs  = gating(logits)                             softmax (Mixtral, Qwen), sigmoid, ...
//   the n_used experts of largest probs (the lower index first among equal ones), each with weight
//   w = probs[e] (SoftmaxWeight: softmax over the chosen logits), then optionally w / sum(w) (the sum held at
//   2^-14 or more, as llama.cpp clamps it) and w * scale;
//   out = sum_e w_e * down_e(act(gate_e x) * up_e x)  [+ g * down_s(act(gate_s x) * up_s x), the shared
//   expert,
//         g = sigmoid(router_s x) where it has a gate, else 1]
// Each expert's three matrices are Weight views into the file's 3-D expert tensors (expert e: rows
// [e * n_out, (e + 1) * n_out) of the stacked matrices), so every backend prepares and multiplies them as
// ordinary matrices in its own layouts, and a token reads only its chosen experts' weights.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/op_params.h"
#include "backends/weight.h"
#include "base/aligned.h"

namespace tilellm {

// The router's probability function, numbered as GGUF's `<arch>.expert_gating_func` numbers them (1..4).
enum class MoeGating { Softmax = 1, Sigmoid = 2, SoftmaxWeight = 3, SqrtSoftplus = 4 };

struct MoeRouting {
  MoeGating gating = MoeGating::Softmax;
  bool norm_weights = false;  // divide the chosen weights by their sum
  float scale = 1.0f;         // then multiply them by this
};

// The routing of n_tok tokens from the router's logits [n_tok][n_expert]: ids [n_tok][n_used] (int32, in
// descending order of probability) and their weights [n_tok][n_used]. probs: [n_expert] scratch.
void route_experts(const MoeRouting& r, const float* logits, int64_t n_tok, int64_t n_expert, int64_t n_used,
                   int32_t* ids, float* weights, float* probs);

// One layer's mixture as Backend::moe_ffn takes it. x has router->n_in values a row.
struct MoeFfn {
  const Weight* router = nullptr;  // [n_expert][n_in]
  // Arrays of n_expert views each: gate, up [n_ff_exp][n_in]; down [n_in][n_ff_exp].
  const Weight* gate = nullptr;
  const Weight* up = nullptr;
  const Weight* down = nullptr;
  int64_t n_expert = 0, n_used = 0;
  MoeRouting routing;
  FfnAct act = FfnAct::SiLU;
  // The shared expert (sh_gate null: none): gate, up [n_ff_shexp][n_in], down [n_in][n_ff_shexp]; sh_router
  // [1][n_in], its sigmoid gate (null: ungated).
  const Weight* sh_gate = nullptr;
  const Weight* sh_up = nullptr;
  const Weight* sh_down = nullptr;
  const Weight* sh_router = nullptr;
  int64_t n_in() const { return router->n_in; }
};

// Host memory of the op, sized once for n_batch tokens (ForwardScratch holds one): nothing is allocated while
// a forward pass runs. Not among the arrays a device backend mirrors, so the ops the default moe_ffn calls
// on it deliver their results to these host arrays (backends/backend.h).
struct MoeScratch {
  MoeScratch() = default;
  // n_ff: the widest expert (routed or shared).
  MoeScratch(int64_t n_batch, int64_t n_in, int64_t n_ff, int64_t n_expert, int64_t n_used);
  int64_t n_batch = 0, n_in = 0, n_ff = 0, n_expert = 0, n_used = 0;
  AlignedBuffer x;        // [n_batch][n_in]      the input, on the host
  AlignedBuffer logits;   // [n_batch + 1][n_expert]  the router's output; the last row the routing's scratch
  AlignedBuffer ids;      // [n_batch][n_used]    int32 chosen experts
  AlignedBuffer weights;  // [n_batch][n_used]    their weights
  AlignedBuffer order;    // [n_batch * n_used]   int32 (token * n_used + slot), grouped by expert
  AlignedBuffer count;    // [n_expert + 1]       int64 start of each expert's group in `order`
  AlignedBuffer xe;       // [n_batch][n_in]      one expert's tokens, gathered
  AlignedBuffer h, hup;   // [max(n_batch, n_used)][n_ff]  act(gate x) (in place) and up x
  AlignedBuffer y;        // [max(n_batch, n_used)][n_in]  down's output
  AlignedBuffer acc;      // [n_batch][n_in]      the mixture's sum
  AlignedBuffer g;        // [n_batch]            the shared expert's gate
};

class Backend;

// The mixture over host arrays through `be`'s ops: acc[t] += out(x[t]) (x, acc: [n_tok][n_in], host memory
// the backend does not mirror). The default Backend::moe_ffn runs it on a host copy of its input; the CPU
// backend on its arrays directly.
void moe_on_host(Backend& be, const MoeFfn& m, const float* x, int64_t n_tok, float* acc, MoeScratch& s);

}  // namespace tilellm
