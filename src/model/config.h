// Architecture hyper-parameters, read from GGUF metadata (`<arch>.*` keys). Nothing here is hard-coded per
// model file; the only per-architecture facts are the ones the architecture itself defines (e.g. Gemma's
// embedding scale).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/moe.h"
#include "backends/op_params.h"
#include "format/gguf.h"

namespace tilellm {

enum class Arch { Llama, Gemma3, Qwen2, Qwen3, Phi3, Qwen2Moe, Qwen3Moe };

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;  // general.architecture
  std::string name;       // general.name (for display)

  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;    // per-head size of q and k (key_length)
  int64_t head_dim_v = 0;  // per-head size of v (value_length)
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;

  RopeMode rope_mode = RopeMode::Norm;
  int64_t rope_dim = 0;            // leading dims of each head that rotate
  float rope_base = 10000.0f;      // global layers
  float rope_base_swa = 10000.0f;  // sliding-window (local) layers
  float rope_freq_scale = 1.0f;    // linear position scaling: position * scale
  float rope_attn_factor = 1.0f;   // cos and sin multiplied by it (rope.scaling.attn_factor; LongRoPE's)
  int64_t n_ctx_orig = 0;          // rope.scaling.original_context_length (default the training context):
                                   // LongRoPE's long factors apply to contexts longer than it
  bool longrope = false;           // rope_factors_short / rope_factors_long may be present (Phi-3; LongRoPE)

  int64_t sliding_window = 0;         // 0: no local layers
  std::vector<uint8_t> layer_is_swa;  // [n_layer]: 1 if the layer attends within sliding_window only
  bool swa_own_rope = false;          // local layers rotate with a table of their own (rope_base_swa)

  FfnAct ffn_act = FfnAct::SiLU;
  float embed_scale = 1.0f;          // token embedding multiplier (Gemma: sqrt(n_embd))
  float attn_scale = 0.0f;           // query scale before softmax
  bool qk_norm = false;              // per-head RMSNorm of q and k before RoPE
  bool qkv_bias = false;             // q, k and v products have a bias each (attn_q.bias, ...)
  bool fused_qkv_ffn = false;        // one attn_qkv matrix ([q | k | v] rows) and one ffn_up of gate then up
  bool post_norms = false;           // RMSNorm of the attention and FFN outputs before each residual add
  float final_logit_softcap = 0.0f;  // 0: off; else logits = cap * tanh(logits / cap)

  // Mixture of experts (n_expert > 0): every layer's feed-forward is a router over n_expert gated FFNs of
  // width n_ff_exp, of which each token runs the n_expert_used best (backends/moe.h has the routing), plus,
  // where n_ff_shexp > 0, one shared expert every token runs (its output scaled by a sigmoid gate where the
  // architecture has one: qwen2moe).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;
  bool shexp_gate = false;
  MoeRouting routing;

  static ModelConfig from_gguf(const GgufFile& f);
  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  int64_t kv_dim_v() const { return n_head_kv * head_dim_v; }
  bool moe() const { return n_expert > 0; }
  // The widest feed-forward row: n_ff, or the experts' and the shared expert's.
  int64_t ffn_width() const;
};

}  // namespace tilellm
