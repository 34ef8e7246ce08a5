// A tiny random `llama` (optionally with experts, Mixtral's layout), `gemma3`, `qwen2moe` or `qwen3moe` model
// written as a GGUF file, for tests that need a whole model without the real ones: every hyper-parameter
// small and odd where the architecture allows, weights random (never zero).
#pragma once

#include <random>
#include <string>

#include "gguf_writer.h"

namespace tilellm::test {

struct TinySpec {
  std::string arch = "llama";
  uint32_t n_embd = 48, n_layer = 3, n_head = 6, n_head_kv = 2, n_ff = 80, n_vocab = 67, ctx = 256;
  uint32_t head_dim = 0;        // 0: n_embd / n_head
  uint32_t sliding_window = 5;  // gemma3 only
  // Experts (llama: Mixtral's layout, n_ff wide; qwen2moe / qwen3moe: n_ff_exp wide; qwen2moe adds a shared
  // expert n_ff_shexp wide with its sigmoid gate). n_expert 0: a dense FFN (llama only).
  uint32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 37, n_ff_shexp = 41;
  uint64_t seed = 1;
  std::string omit_tensor;       // leave this tensor out (a broken file)
  std::string transpose_tensor;  // store this matrix with its two dimensions swapped (a wrong shape)
  uint32_t block_count = 0;      // the block_count written; 0: n_layer (another: a broken file)
};

inline GgufWriter tiny_model(const TinySpec& s) {
  GgufWriter out;
  // Adds tensors through the spec's edits.
  struct Adder {
    const TinySpec& s;
    GgufWriter& w;
    void tensor_f32(const std::string& name, std::vector<uint64_t> ne, const std::vector<float>& v) {
      if (name == s.omit_tensor) return;
      if (name == s.transpose_tensor && ne.size() == 2) std::swap(ne[0], ne[1]);
      w.tensor_f32(name, ne, v);
    }
    void kv_str(const std::string& k, const std::string& v) { w.kv_str(k, v); }
    void kv_u32(const std::string& k, uint32_t v) { w.kv_u32(k, v); }
    void kv_f32(const std::string& k, float v) { w.kv_f32(k, v); }
    void kv_strs(const std::string& k, const std::vector<std::string>& v) { w.kv_strs(k, v); }
    void kv_i32s(const std::string& k, const std::vector<int32_t>& v) { w.kv_i32s(k, v); }
  } w{s, out};
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto rnd = [&](size_t n, float scale) {
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng) * scale;
    return v;
  };
  auto norm = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = 1.0f + 0.2f * nd(rng);
    return v;
  };
  const uint32_t hd = s.head_dim ? s.head_dim : s.n_embd / s.n_head;
  const std::string a = s.arch + ".";
  w.kv_str("general.architecture", s.arch);
  w.kv_str("general.name", "tiny " + s.arch);
  w.kv_u32(a + "embedding_length", s.n_embd);
  w.kv_u32(a + "block_count", s.block_count ? s.block_count : s.n_layer);
  w.kv_u32(a + "feed_forward_length", s.n_ff);
  w.kv_u32(a + "attention.head_count", s.n_head);
  w.kv_u32(a + "attention.head_count_kv", s.n_head_kv);
  w.kv_u32(a + "context_length", s.ctx);
  w.kv_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.kv_f32(a + "rope.freq_base", 10000.0f);
  if (s.arch == "gemma3" || s.arch == "qwen3moe") {
    w.kv_u32(a + "attention.key_length", hd);
    w.kv_u32(a + "attention.value_length", hd);
  }
  if (s.arch == "gemma3") w.kv_u32(a + "attention.sliding_window", s.sliding_window);
  if (s.n_expert > 0) {
    w.kv_u32(a + "expert_count", s.n_expert);
    w.kv_u32(a + "expert_used_count", s.n_expert_used);
    if (s.arch != "llama") w.kv_u32(a + "expert_feed_forward_length", s.n_ff_exp);
    if (s.arch == "qwen2moe") w.kv_u32(a + "expert_shared_feed_forward_length", s.n_ff_shexp);
  }
  // A byte-level tokenizer: one token per printable character, no merges.
  std::vector<std::string> toks;
  for (uint32_t i = 0; i < s.n_vocab; ++i) toks.push_back(std::string(1, char(33 + i)));
  w.kv_str("tokenizer.ggml.model", "gpt2");
  w.kv_str("tokenizer.ggml.pre", "default");
  w.kv_strs("tokenizer.ggml.tokens", toks);
  w.kv_i32s("tokenizer.ggml.token_type", std::vector<int32_t>(s.n_vocab, 1));
  w.kv_strs("tokenizer.ggml.merges", {});
  w.kv_u32("tokenizer.ggml.bos_token_id", 0);
  w.kv_u32("tokenizer.ggml.eos_token_id", 1);

  const float ws = 0.3f;
  w.tensor_f32("token_embd.weight", {s.n_embd, s.n_vocab}, rnd(size_t(s.n_embd) * s.n_vocab, 1.0f));
  w.tensor_f32("output_norm.weight", {s.n_embd}, norm(s.n_embd));
  if (s.arch != "gemma3")
    w.tensor_f32("output.weight", {s.n_embd, s.n_vocab}, rnd(size_t(s.n_embd) * s.n_vocab, ws));
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    w.tensor_f32(p + "attn_norm.weight", {s.n_embd}, norm(s.n_embd));
    w.tensor_f32(p + "attn_q.weight", {s.n_embd, hd * s.n_head}, rnd(size_t(s.n_embd) * hd * s.n_head, ws));
    w.tensor_f32(p + "attn_k.weight", {s.n_embd, hd * s.n_head_kv},
                 rnd(size_t(s.n_embd) * hd * s.n_head_kv, ws));
    w.tensor_f32(p + "attn_v.weight", {s.n_embd, hd * s.n_head_kv},
                 rnd(size_t(s.n_embd) * hd * s.n_head_kv, ws));
    w.tensor_f32(p + "attn_output.weight", {hd * s.n_head, s.n_embd},
                 rnd(size_t(s.n_embd) * hd * s.n_head, ws));
    w.tensor_f32(p + "ffn_norm.weight", {s.n_embd}, norm(s.n_embd));
    if (s.n_expert == 0) {
      w.tensor_f32(p + "ffn_gate.weight", {s.n_embd, s.n_ff}, rnd(size_t(s.n_embd) * s.n_ff, ws));
      w.tensor_f32(p + "ffn_up.weight", {s.n_embd, s.n_ff}, rnd(size_t(s.n_embd) * s.n_ff, ws));
      w.tensor_f32(p + "ffn_down.weight", {s.n_ff, s.n_embd}, rnd(size_t(s.n_embd) * s.n_ff, ws));
    } else {
      // The router's weights are large enough that tokens and layers choose different experts.
      const uint64_t ne = s.n_expert, ff = s.arch == "llama" ? s.n_ff : s.n_ff_exp;
      w.tensor_f32(p + "ffn_gate_inp.weight", {s.n_embd, ne}, rnd(size_t(s.n_embd) * ne, 1.0f));
      w.tensor_f32(p + "ffn_gate_exps.weight", {s.n_embd, ff, ne}, rnd(size_t(s.n_embd * ff * ne), ws));
      w.tensor_f32(p + "ffn_up_exps.weight", {s.n_embd, ff, ne}, rnd(size_t(s.n_embd * ff * ne), ws));
      w.tensor_f32(p + "ffn_down_exps.weight", {ff, s.n_embd, ne}, rnd(size_t(s.n_embd * ff * ne), ws));
      if (s.arch == "qwen2moe") {
        const uint64_t sh = s.n_ff_shexp;
        w.tensor_f32(p + "ffn_gate_inp_shexp.weight", {s.n_embd}, rnd(s.n_embd, 1.0f));
        w.tensor_f32(p + "ffn_gate_shexp.weight", {s.n_embd, sh}, rnd(size_t(s.n_embd * sh), ws));
        w.tensor_f32(p + "ffn_up_shexp.weight", {s.n_embd, sh}, rnd(size_t(s.n_embd * sh), ws));
        w.tensor_f32(p + "ffn_down_shexp.weight", {sh, s.n_embd}, rnd(size_t(s.n_embd * sh), ws));
      }
    }
    if (s.arch == "qwen2moe") {  // qwen2's biases of the q, k and v products
      w.tensor_f32(p + "attn_q.bias", {hd * s.n_head}, rnd(size_t(hd) * s.n_head, 0.5f));
      w.tensor_f32(p + "attn_k.bias", {hd * s.n_head_kv}, rnd(size_t(hd) * s.n_head_kv, 0.5f));
      w.tensor_f32(p + "attn_v.bias", {hd * s.n_head_kv}, rnd(size_t(hd) * s.n_head_kv, 0.5f));
    }
    if (s.arch == "qwen3moe") {
      w.tensor_f32(p + "attn_q_norm.weight", {hd}, norm(hd));
      w.tensor_f32(p + "attn_k_norm.weight", {hd}, norm(hd));
    }
    if (s.arch == "gemma3") {
      w.tensor_f32(p + "attn_q_norm.weight", {hd}, norm(hd));
      w.tensor_f32(p + "attn_k_norm.weight", {hd}, norm(hd));
      w.tensor_f32(p + "post_attention_norm.weight", {s.n_embd}, norm(s.n_embd));
      w.tensor_f32(p + "post_ffw_norm.weight", {s.n_embd}, norm(s.n_embd));
    }
  }
  return out;
}

}  // namespace tilellm::test
