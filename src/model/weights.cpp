#include "model/weights.h"

#include <string_view>

#include "base/error.h"
#include "format/quants.h"

namespace tilellm {
namespace {

const GgufTensor& find_tensor(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.tensor(name);
  if (!t) fail("{}: tensor '{}' is missing (required by the architecture)", f.path(), name);
  return *t;
}

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

void check_type(const GgufFile& f, const GgufTensor& t) {
  if (!is_supported(t.type)) {
    fail("{}: tensor '{}' has type {}, which this engine cannot load", f.path(), t.name, type_name(t.type));
  }
}

Weight matrix(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out) {
  const GgufTensor& t = find_tensor(f, name);
  if (t.ne.size() != 2 || t.ne[0] != n_in || t.ne[1] != n_out) {
    fail("{}: tensor '{}' has shape {}, the architecture requires [{}, {}]", f.path(), name, shape_str(t.ne),
         n_in, n_out);
  }
  check_type(f, t);
  Weight w;
  w.name = name;
  w.type = t.type;
  w.data = t.data;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = row_size(t.type, n_in);
  w.file_mapped = true;
  return w;
}

// Rows [r0, r0 + n) of a matrix, as a matrix of its own (a fused tensor's parts share its bytes).
Weight rows(const Weight& m, int64_t r0, int64_t n, const char* part) {
  Weight w = m;
  w.name = m.name + "[" + part + "]";
  w.data = m.data + size_t(r0) * m.row_bytes;
  w.n_out = n;
  return w;
}

std::vector<float> vec(const GgufFile& f, const std::string& name, int64_t n) {
  const GgufTensor& t = find_tensor(f, name);
  if (t.nelements() != n || t.ne[0] != n) {
    fail("{}: tensor '{}' has shape {}, the architecture requires [{}]", f.path(), name, shape_str(t.ne), n);
  }
  check_type(f, t);
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t.type, t.data, out.data(), n);
  return out;
}

}  // namespace

ModelWeights ModelWeights::bind(const GgufFile& f, const ModelConfig& c) {
  ModelWeights w;
  w.tok_embd = matrix(f, "token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = vec(f, "output_norm.weight", c.n_embd);
  if (f.tensor("output.weight")) {
    w.output = matrix(f, "output.weight", c.n_embd, c.n_vocab);
  } else {
    w.output = w.tok_embd;
    w.tied_output = true;
  }
  if (f.tensor("rope_freqs.weight")) w.rope_freqs = vec(f, "rope_freqs.weight", c.rope_dim / 2);
  w.layers.resize(size_t(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    LayerWeights& L = w.layers[size_t(il)];
    const std::string p = "blk." + std::to_string(il) + ".";
    L.attn_norm = vec(f, p + "attn_norm.weight", c.n_embd);
    if (c.fused_qkv_ffn && f.tensor(p + "attn_qkv.weight")) {
      const Weight qkv = matrix(f, p + "attn_qkv.weight", c.n_embd, c.q_dim() + c.kv_dim() + c.kv_dim_v());
      L.wq = rows(qkv, 0, c.q_dim(), "q");
      L.wk = rows(qkv, c.q_dim(), c.kv_dim(), "k");
      L.wv = rows(qkv, c.q_dim() + c.kv_dim(), c.kv_dim_v(), "v");
    } else {
      L.wq = matrix(f, p + "attn_q.weight", c.n_embd, c.q_dim());
      L.wk = matrix(f, p + "attn_k.weight", c.n_embd, c.kv_dim());
      L.wv = matrix(f, p + "attn_v.weight", c.n_embd, c.kv_dim_v());
    }
    L.wo = matrix(f, p + "attn_output.weight", c.n_head * c.head_dim_v, c.n_embd);
    L.ffn_norm = vec(f, p + "ffn_norm.weight", c.n_embd);
    if (c.fused_qkv_ffn) {
      // One matrix of 2 n_ff rows: the gate's, then up's (the activation takes the first half).
      const Weight gate_up = matrix(f, p + "ffn_up.weight", c.n_embd, 2 * c.n_ff);
      L.w_gate = rows(gate_up, 0, c.n_ff, "gate");
      L.w_up = rows(gate_up, c.n_ff, c.n_ff, "up");
    } else {
      L.w_gate = matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff);
      L.w_up = matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff);
    }
    L.w_down = matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd);
    if (c.qkv_bias) {
      L.bq = vec(f, p + "attn_q.bias", c.q_dim());
      L.bk = vec(f, p + "attn_k.bias", c.kv_dim());
      L.bv = vec(f, p + "attn_v.bias", c.kv_dim_v());
    }
    if (c.qk_norm) {
      L.q_norm = vec(f, p + "attn_q_norm.weight", c.head_dim);
      L.k_norm = vec(f, p + "attn_k_norm.weight", c.head_dim);
    }
    if (c.post_norms) {
      L.post_attn_norm = vec(f, p + "post_attention_norm.weight", c.n_embd);
      L.post_ffn_norm = vec(f, p + "post_ffw_norm.weight", c.n_embd);
    }
  }
  // A tensor this implementation does not use (a bias, an expert, a vision tower...) means the file describes
  // a model variant it would run wrongly: refuse it by name rather than produce quietly wrong text.
  for (const GgufTensor& t : f.tensors()) {
    if (!w.uses(t.name, c)) {
      fail(
          "{}: tensor '{}' is not part of the {} architecture as this engine implements it (unsupported "
          "variant)",
          f.path(), t.name, c.arch_name);
    }
  }
  return w;
}

bool ModelWeights::uses(const std::string& name, const ModelConfig& c) const {
  if (name == "token_embd.weight" || name == "output_norm.weight" || name == "output.weight" ||
      name == "rope_freqs.weight") {
    return true;
  }
  if (name.rfind("blk.", 0) != 0) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return false;
  const std::string layer = name.substr(4, dot - 4);
  if (layer.empty() || layer.size() > 6 || layer.find_first_not_of("0123456789") != std::string::npos ||
      std::stoll(layer) >= c.n_layer) {
    return false;
  }
  static const char* kCommon[] = {"attn_norm.weight", "attn_q.weight",      "attn_k.weight",
                                  "attn_v.weight",    "attn_output.weight", "ffn_norm.weight",
                                  "ffn_gate.weight",  "ffn_up.weight",      "ffn_down.weight"};
  static const char* kQkNorm[] = {"attn_q_norm.weight", "attn_k_norm.weight"};
  static const char* kPostNorm[] = {"post_attention_norm.weight", "post_ffw_norm.weight"};
  static const char* kQkvBias[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
  const std::string rest = name.substr(dot + 1);
  if (c.fused_qkv_ffn) {
    if (rest == "attn_qkv.weight") return true;
    if (rest == "ffn_gate.weight") return false;  // the gate's rows lie in ffn_up
  }
  for (const char* n : kCommon) {
    if (rest == n) return true;
  }
  for (const char* n : kQkNorm) {
    if (c.qk_norm && rest == n) return true;
  }
  for (const char* n : kPostNorm) {
    if (c.post_norms && rest == n) return true;
  }
  for (const char* n : kQkvBias) {
    if (c.qkv_bias && rest == n) return true;
  }
  return false;
}

WeightSet ModelWeights::weight_set() const {
  WeightSet ws;
  ws.embedding = tok_embd.data ? &tok_embd : nullptr;
  for (const LayerWeights& l : layers) {
    for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      ws.matrices.push_back(w);
  }
  ws.matrices.push_back(&output);
  auto vec = [&ws](const std::vector<float>& v) {
    if (!v.empty()) ws.vectors.push_back({v.data(), int64_t(v.size())});
  };
  vec(output_norm);
  for (const LayerWeights& l : layers) {
    for (const std::vector<float>* v : {&l.attn_norm, &l.q_norm, &l.k_norm, &l.bq, &l.bk, &l.bv,
                                        &l.post_attn_norm, &l.ffn_norm, &l.post_ffn_norm}) {
      vec(*v);
    }
  }
  return ws;
}

}  // namespace tilellm
