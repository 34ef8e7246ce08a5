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
    fail(
        "{}: tensor '{}' has type {}, which this engine cannot load (it loads F32, F16, BF16, Q4_0, Q4_1, "
        "Q5_0, "
        "Q5_1, Q8_0, Q4_K, Q5_K and Q6_K: files quantized as Q4_0, Q4_K_M, Q5_K_M, Q6_K or Q8_0, among "
        "others)",
        f.path(), t.name, type_name(t.type));
  }
}

// The tensor's bytes in the mapped file as n_rows rows of n_in weights (its shape already checked).
Weight mapped_rows(const GgufFile& f, const GgufTensor& t, const std::string& name, int64_t n_in,
                   int64_t n_rows) {
  check_type(f, t);
  Weight w;
  w.name = name;
  w.type = t.type;
  w.data = t.data;
  w.n_in = n_in;
  w.n_out = n_rows;
  w.row_bytes = row_size(t.type, n_in);
  w.file_mapped = true;
  return w;
}

Weight matrix(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out) {
  const GgufTensor& t = find_tensor(f, name);
  if (t.ne.size() != 2 || t.ne[0] != n_in || t.ne[1] != n_out) {
    fail("{}: tensor '{}' has shape {}, the architecture requires [{}, {}]", f.path(), name, shape_str(t.ne),
         n_in, n_out);
  }
  return mapped_rows(f, t, name, n_in, n_out);
}

// Rows [r0, r0 + n) of a matrix, as a matrix of its own (a fused tensor's parts share its bytes).
Weight rows(const Weight& m, int64_t r0, int64_t n, const char* part) {
  Weight w = m;
  w.name = m.name + "[" + part + "]";
  w.data = m.data + size_t(r0) * m.row_bytes;
  w.n_out = n;
  return w;
}

// The n_expert matrices [n_out][n_in] stacked in a 3-D tensor (GGUF ne = {n_in, n_out, n_expert}), each a
// view of its own rows.
std::vector<Weight> experts(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out,
                            int64_t n_expert) {
  const GgufTensor& t = find_tensor(f, name);
  if (t.ne.size() != 3 || t.ne[0] != n_in || t.ne[1] != n_out || t.ne[2] != n_expert) {
    fail("{}: tensor '{}' has shape {}, the architecture requires [{}, {}, {}]", f.path(), name,
         shape_str(t.ne), n_in, n_out, n_expert);
  }
  const Weight all = mapped_rows(f, t, name, n_in, n_out * n_expert);
  std::vector<Weight> out;
  for (int64_t e = 0; e < n_expert; ++e)
    out.push_back(rows(all, e * n_out, n_out, std::to_string(e).c_str()));
  return out;
}

// A 1-D tensor of n weights multiplied as a matrix of one row (the shared expert's gate).
Weight row_matrix(const GgufFile& f, const std::string& name, int64_t n) {
  const GgufTensor& t = find_tensor(f, name);
  if (t.nelements() != n || t.ne[0] != n) {
    fail("{}: tensor '{}' has shape {}, the architecture requires [{}]", f.path(), name, shape_str(t.ne), n);
  }
  check_type(f, t);
  Weight w;
  w.name = name;
  w.type = t.type;
  w.data = t.data;
  w.n_in = n;
  w.n_out = 1;
  w.row_bytes = row_size(t.type, n);
  w.file_mapped = true;
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
  if (c.longrope && (f.tensor("rope_factors_short.weight") || f.tensor("rope_factors_long.weight"))) {
    // Both sets or neither: which one applies depends on the context size a session asks for.
    w.rope_factors_short = vec(f, "rope_factors_short.weight", c.rope_dim / 2);
    w.rope_factors_long = vec(f, "rope_factors_long.weight", c.rope_dim / 2);
  }
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
    if (c.moe()) {
      L.router = matrix(f, p + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
      L.gate_exps = experts(f, p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
      L.up_exps = experts(f, p + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
      L.down_exps = experts(f, p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert);
      if (c.n_ff_shexp > 0) {
        L.gate_shexp = matrix(f, p + "ffn_gate_shexp.weight", c.n_embd, c.n_ff_shexp);
        L.up_shexp = matrix(f, p + "ffn_up_shexp.weight", c.n_embd, c.n_ff_shexp);
        L.down_shexp = matrix(f, p + "ffn_down_shexp.weight", c.n_ff_shexp, c.n_embd);
        if (c.shexp_gate) L.router_shexp = row_matrix(f, p + "ffn_gate_inp_shexp.weight", c.n_embd);
      }
    } else if (c.fused_qkv_ffn) {
      // One matrix of 2 n_ff rows: the gate's, then up's (the activation takes the first half).
      const Weight gate_up = matrix(f, p + "ffn_up.weight", c.n_embd, 2 * c.n_ff);
      L.w_gate = rows(gate_up, 0, c.n_ff, "gate");
      L.w_up = rows(gate_up, c.n_ff, c.n_ff, "up");
    } else {
      L.w_gate = matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff);
      L.w_up = matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff);
    }
    if (!c.moe()) L.w_down = matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd);
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
  if (c.longrope && (name == "rope_factors_short.weight" || name == "rope_factors_long.weight")) return true;
  if (name.rfind("blk.", 0) != 0) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return false;
  const std::string layer = name.substr(4, dot - 4);
  if (layer.empty() || layer.size() > 6 || layer.find_first_not_of("0123456789") != std::string::npos ||
      std::stoll(layer) >= c.n_layer) {
    return false;
  }
  static const char* kCommon[] = {"attn_norm.weight", "attn_q.weight",      "attn_k.weight",
                                  "attn_v.weight",    "attn_output.weight", "ffn_norm.weight"};
  static const char* kDense[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
  static const char* kExperts[] = {"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight",
                                   "ffn_down_exps.weight"};
  static const char* kShared[] = {"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"};
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
  for (const char* n : kDense) {
    if (!c.moe() && rest == n) return true;
  }
  for (const char* n : kExperts) {
    if (c.moe() && rest == n) return true;
  }
  for (const char* n : kShared) {
    if (c.n_ff_shexp > 0 && rest == n) return true;
  }
  if (c.shexp_gate && rest == "ffn_gate_inp_shexp.weight") return true;
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

const float* ModelWeights::rope_factors(const ModelConfig& c, int64_t n_ctx) const {
  if (!rope_freqs.empty()) return rope_freqs.data();
  if (rope_factors_long.empty()) return nullptr;
  return n_ctx > c.n_ctx_orig ? rope_factors_long.data() : rope_factors_short.data();
}

MoeFfn ModelWeights::moe(const ModelConfig& c, int64_t il) const {
  const LayerWeights& L = layers[size_t(il)];
  MoeFfn m;
  m.router = &L.router;
  m.gate = L.gate_exps.data();
  m.up = L.up_exps.data();
  m.down = L.down_exps.data();
  m.n_expert = c.n_expert;
  m.n_used = c.n_expert_used;
  m.routing = c.routing;
  m.act = c.ffn_act;
  if (L.gate_shexp.data) {
    m.sh_gate = &L.gate_shexp;
    m.sh_up = &L.up_shexp;
    m.sh_down = &L.down_shexp;
    m.sh_router = L.router_shexp.data ? &L.router_shexp : nullptr;
  }
  return m;
}

WeightSet ModelWeights::weight_set() const {
  WeightSet ws;
  ws.embedding = tok_embd.data ? &tok_embd : nullptr;
  for (const LayerWeights& l : layers) {
    for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router,
                            &l.gate_shexp, &l.up_shexp, &l.down_shexp, &l.router_shexp}) {
      if (w->data) ws.matrices.push_back(w);
    }
    for (const std::vector<Weight>* v : {&l.gate_exps, &l.up_exps, &l.down_exps}) {
      for (const Weight& w : *v) ws.matrices.push_back(&w);
    }
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
