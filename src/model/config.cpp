#include "model/config.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tilellm {
namespace {

int64_t positive(const GgufFile& f, const std::string& key, int64_t v) {
  if (v <= 0 || v > (int64_t(1) << 31)) fail("{}: metadata '{}' = {} is not a valid size", f.path(), key, v);
  return v;
}

// The mixture-of-experts keys (ModelConfig's comment). Each architecture's own facts, as llama.cpp builds
// it: llama (Mixtral) and qwen3moe renormalise the chosen weights, qwen2moe does not and has a shared expert
// with a sigmoid gate; all three take a softmax over the router's logits. Where a file sets
// expert_gating_func, expert_weights_norm or expert_weights_scale, that is used instead (llama.cpp reads
// these keys for other architectures only; no converter writes them for these three).
void read_experts(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch_name + ".";
  const bool moe_arch = c.arch == Arch::Qwen2Moe || c.arch == Arch::Qwen3Moe;
  c.n_expert = f.get_int_or(a + "expert_count", 0);
  if (c.n_expert == 0) {
    if (moe_arch) fail("{}: {} needs metadata '{}expert_count' > 0", f.path(), c.arch_name, a);
    return;
  }
  if (c.arch != Arch::Llama && !moe_arch)
    fail("{}: '{}expert_count' is set, but this engine runs {} without experts", f.path(), a, c.arch_name);
  if (c.n_expert < 0 || c.n_expert > 1024)
    fail("{}: '{}expert_count' = {} is not between 1 and 1024", f.path(), a, c.n_expert);
  c.n_expert_used = f.get_int_or(a + "expert_used_count", 0);
  if (c.n_expert_used < 1 || c.n_expert_used > c.n_expert) {
    fail("{}: '{}expert_used_count' = {} must be between 1 and expert_count {}", f.path(), a, c.n_expert_used,
         c.n_expert);
  }
  // Mixtral's experts are n_ff wide; Qwen's have a key of their own (by default n_ff / n_expert_used).
  if (c.arch == Arch::Llama) {
    if (c.n_ff == 0) fail("{}: metadata '{}feed_forward_length' is missing", f.path(), a);
    c.n_ff_exp = c.n_ff;
  } else {
    c.n_ff_exp = positive(f, a + "expert_feed_forward_length",
                          f.get_int_or(a + "expert_feed_forward_length", c.n_ff / c.n_expert_used));
  }
  if (c.arch == Arch::Qwen2Moe) {
    c.n_ff_shexp = positive(f, a + "expert_shared_feed_forward_length",
                            f.get_int_or(a + "expert_shared_feed_forward_length", c.n_ff));
    c.shexp_gate = true;
  }
  c.routing.norm_weights = c.arch != Arch::Qwen2Moe;
  c.routing.norm_weights = f.get_bool_or(a + "expert_weights_norm", c.routing.norm_weights);
  int64_t gating = f.get_int_or(a + "expert_gating_func", 1);
  if (gating == 0) gating = 1;  // llama.cpp's "none": the architecture's own, a softmax here
  if (gating < 1 || gating > 4) {
    fail(
        "{}: '{}expert_gating_func' = {} is not supported (1 softmax, 2 sigmoid, 3 softmax of the chosen, 4 "
        "sqrt-softplus)",
        f.path(), a, gating);
  }
  c.routing.gating = MoeGating(gating);
  const double scale = f.get_float_or(a + "expert_weights_scale", 0.0);
  if (!std::isfinite(scale) || scale < 0.0) fail("{}: '{}expert_weights_scale' must be >= 0", f.path(), a);
  c.routing.scale = scale == 0.0 ? 1.0f : float(scale);  // 0: unset
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.arch_name = f.get_string("general.architecture");
  c.name = f.get_string_opt("general.name").value_or(c.arch_name);
  if (c.arch_name == "llama") {
    c.arch = Arch::Llama;
  } else if (c.arch_name == "gemma3") {
    c.arch = Arch::Gemma3;
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::Qwen2;
  } else if (c.arch_name == "qwen3") {
    c.arch = Arch::Qwen3;
  } else if (c.arch_name == "phi3") {
    c.arch = Arch::Phi3;
  } else if (c.arch_name == "qwen2moe") {
    c.arch = Arch::Qwen2Moe;
  } else if (c.arch_name == "qwen3moe") {
    c.arch = Arch::Qwen3Moe;
  } else {
    fail(
        "{}: architecture '{}' is not supported (supported: llama, gemma3, qwen2, qwen3, phi3, qwen2moe, "
        "qwen3moe)",
        f.path(), c.arch_name);
  }
  const std::string a = c.arch_name + ".";
  auto req = [&](const char* k) { return positive(f, a + k, f.get_int(a + k)); };

  c.n_embd = req("embedding_length");
  c.n_layer = req("block_count");
  // Every layer has tensors of its own (at least its norm): a count past the file's tensors is a corrupt
  // file, refused before anything is sized by it.
  if (c.n_layer > int64_t(f.tensors().size())) {
    fail("{}: {}block_count is {} but the file has only {} tensors", f.path(), a, c.n_layer,
         f.tensors().size());
  }
  // A model with experts may leave the dense width out (its experts' width is a key of its own).
  const bool experts = f.get_int_or(a + "expert_count", 0) > 0;
  c.n_ff = experts && !f.has(a + "feed_forward_length") ? 0 : req("feed_forward_length");
  c.n_head = req("attention.head_count");
  c.n_head_kv =
      positive(f, a + "attention.head_count_kv", f.get_int_or(a + "attention.head_count_kv", c.n_head));
  if (c.n_head % c.n_head_kv != 0) {
    fail("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), c.n_head, c.n_head_kv);
  }
  c.n_ctx_train = positive(f, a + "context_length", f.get_int_or(a + "context_length", 2048));
  c.head_dim =
      positive(f, a + "attention.key_length", f.get_int_or(a + "attention.key_length", c.n_embd / c.n_head));
  c.head_dim_v =
      positive(f, a + "attention.value_length", f.get_int_or(a + "attention.value_length", c.head_dim));
  if (c.head_dim_v != c.head_dim) fail("{}: key_length != value_length is not supported", f.path());
  if (c.head_dim > 512)
    fail("{}: head size {} is larger than the 512 this engine supports", f.path(), c.head_dim);
  c.rms_eps = float(f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(c.rms_eps > 0.0f)) fail("{}: metadata '{}attention.layer_norm_rms_epsilon' must be > 0", f.path(), a);

  // The vocabulary size comes from the tokenizer when the architecture key is absent (older converters).
  if (f.has(a + "vocab_size")) {
    c.n_vocab = req("vocab_size");
  } else if (const GgufValue* t = f.find("tokenizer.ggml.tokens")) {
    c.n_vocab = int64_t(t->count);
  } else {
    fail("{}: cannot tell the vocabulary size: neither '{}vocab_size' nor 'tokenizer.ggml.tokens' present",
         f.path(), a);
  }

  c.rope_dim = positive(f, a + "rope.dimension_count", f.get_int_or(a + "rope.dimension_count", c.head_dim));
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    fail("{}: rope.dimension_count {} must be even and at most the head size {}", f.path(), c.rope_dim,
         c.head_dim);
  }
  c.rope_base = float(f.get_float_or(a + "rope.freq_base", 10000.0));
  // As llama.cpp reads them: a scaling factor (any type but none) divides the positions, the attention
  // factor multiplies cos and sin, and LongRoPE's factor tensors are chosen by the context length against the
  // original context (Session). Phi-3's converter writes no type but the factors and the attention factor.
  const std::string scaling = f.get_string_opt(a + "rope.scaling.type").value_or("linear");
  if (scaling != "none" && scaling != "linear" && scaling != "longrope")
    fail("{}: rope scaling type '{}' is not supported (none, linear, longrope)", f.path(), scaling);
  if (scaling != "none" && f.has(a + "rope.scaling.factor")) {
    const double factor = f.get_float_or(a + "rope.scaling.factor", 1.0);
    if (!(factor >= 0.0)) fail("{}: rope.scaling.factor must be > 0", f.path());
    if (factor > 0.0) c.rope_freq_scale = float(1.0 / factor);  // 0: unset, as llama.cpp reads it
  }
  c.rope_attn_factor = float(f.get_float_or(a + "rope.scaling.attn_factor", 1.0));
  if (!(c.rope_attn_factor > 0.0f) || !std::isfinite(c.rope_attn_factor))
    fail("{}: {}rope.scaling.attn_factor must be a positive number", f.path(), a);
  c.n_ctx_orig = positive(f, a + "rope.scaling.original_context_length",
                          f.get_int_or(a + "rope.scaling.original_context_length", c.n_ctx_train));
  c.longrope = scaling == "longrope" || c.arch_name == "phi3";
  c.layer_is_swa.assign(size_t(c.n_layer), 0);

  switch (c.arch) {
    case Arch::Llama:
      c.rope_mode = RopeMode::Norm;
      c.ffn_act = FfnAct::SiLU;
      break;
    // Qwen2 and Qwen3 are Llama's layer with RoPE on the two halves of each head (NEOX), Qwen2 with biases
    // on the q, k and v products, Qwen3 with a per-head RMSNorm of q and k before RoPE instead.
    case Arch::Qwen2:
      c.rope_mode = RopeMode::Neox;
      c.ffn_act = FfnAct::SiLU;
      c.qkv_bias = true;
      break;
    case Arch::Qwen3:
    case Arch::Qwen3Moe:
      c.rope_mode = RopeMode::Neox;
      c.ffn_act = FfnAct::SiLU;
      c.qk_norm = true;
      break;
    // Qwen2-MoE (Qwen1.5-MoE): qwen2's attention, experts plus a shared expert with a sigmoid gate.
    case Arch::Qwen2Moe:
      c.rope_mode = RopeMode::Neox;
      c.ffn_act = FfnAct::SiLU;
      c.qkv_bias = true;
      break;
    // Phi-3: Llama's layer with NEOX RoPE, q/k/v in one matrix and gate/up in one, and where the file sets
    // phi3.attention.sliding_window every layer attends within that window (as the model defines it;
    // llama.cpp ignores the key, so the two differ only on sequences longer than the window).
    case Arch::Phi3:
      c.rope_mode = RopeMode::Neox;
      c.ffn_act = FfnAct::SiLU;
      c.fused_qkv_ffn = true;
      c.sliding_window = f.get_int_or(a + "attention.sliding_window", 0);
      if (c.sliding_window < 0) fail("{}: {}attention.sliding_window is negative", f.path(), a);
      c.layer_is_swa.assign(size_t(c.n_layer), c.sliding_window > 0 ? 1 : 0);
      c.rope_base_swa = c.rope_base;  // the window changes what a layer sees, not how it rotates
      break;
    case Arch::Gemma3: {
      c.rope_mode = RopeMode::Neox;
      c.ffn_act = FfnAct::GeluTanh;
      c.embed_scale = std::sqrt(float(c.n_embd));
      c.qk_norm = true;
      c.post_norms = true;
      c.final_logit_softcap = float(f.get_float_or(a + "final_logit_softcapping", 0.0));
      c.sliding_window = f.get_int_or(a + "attention.sliding_window", 0);
      if (c.sliding_window > 0) {
        // Gemma 3 interleaves five local layers with one global layer unless the file says otherwise.
        c.rope_base_swa = float(f.get_float_or(a + "rope.freq_base_swa", 10000.0));
        c.swa_own_rope = true;
        const std::string pk = a + "attention.sliding_window_pattern";
        const GgufValue* pv = f.find(pk);
        if (pv && pv->type == GgufType::ARRAY) {
          const auto flags = f.get_int_array(pk);
          if (int64_t(flags.size()) != c.n_layer) {
            fail("{}: '{}' has {} entries for {} layers", f.path(), pk, flags.size(), c.n_layer);
          }
          for (int64_t il = 0; il < c.n_layer; ++il) c.layer_is_swa[size_t(il)] = flags[size_t(il)] != 0;
        } else {
          const int64_t pattern = f.get_int_or(pk, 6);
          for (int64_t il = 0; il < c.n_layer; ++il) {
            c.layer_is_swa[size_t(il)] = pattern == 0 || (il % pattern < pattern - 1);
          }
        }
      }
      break;
    }
  }
  c.attn_scale = 1.0f / std::sqrt(float(c.head_dim));
  read_experts(f, c);
  return c;
}

int64_t ModelConfig::ffn_width() const {
  return std::max({n_ff, n_ff_exp, n_ff_shexp});
}

}  // namespace tilellm
