#include "model/config.h"

#include <cmath>

#include "base/error.h"

namespace tilellm {
namespace {

int64_t positive(const GgufFile& f, const std::string& key, int64_t v) {
  if (v <= 0 || v > (int64_t(1) << 31)) fail("{}: metadata '{}' = {} is not a valid size", f.path(), key, v);
  return v;
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
  } else {
    fail("{}: architecture '{}' is not supported (supported: llama, gemma3, qwen2, qwen3, phi3)", f.path(),
         c.arch_name);
  }
  const std::string a = c.arch_name + ".";
  auto req = [&](const char* k) { return positive(f, a + k, f.get_int(a + k)); };

  c.n_embd = req("embedding_length");
  c.n_layer = req("block_count");
  c.n_ff = req("feed_forward_length");
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
  if (const auto type = f.get_string_opt(a + "rope.scaling.type"); type && *type != "none") {
    if (*type != "linear")
      fail("{}: rope scaling type '{}' is not supported (none, linear)", f.path(), *type);
    const double factor = f.get_float_or(a + "rope.scaling.factor", 1.0);
    if (!(factor > 0.0)) fail("{}: rope.scaling.factor must be > 0", f.path());
    c.rope_freq_scale = float(1.0 / factor);
  }
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
      c.rope_mode = RopeMode::Neox;
      c.ffn_act = FfnAct::SiLU;
      c.qk_norm = true;
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
      c.rope_base_swa = c.rope_base;
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
  return c;
}

}  // namespace tilellm
