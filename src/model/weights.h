// The model's tensors, bound by name and checked against the shapes the architecture requires.
// Matrices stay in the mapped GGUF file in their stored block format (no copy); small vectors (norm weights)
// are converted to float once at load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/moe.h"
#include "backends/weight.h"
#include "format/gguf.h"
#include "model/config.h"

namespace tilellm {

struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  Weight wq, wk, wv, wo;              // q: [q_dim][n_embd], k/v: [kv_dim][n_embd], o: [n_embd][q_dim]
  std::vector<float> q_norm, k_norm;  // [head_dim] (qk_norm architectures)
  std::vector<float> bq, bk, bv;      // [q_dim], [kv_dim], [kv_dim] (qkv_bias architectures)
  std::vector<float> post_attn_norm;  // [n_embd] (post_norms architectures)
  std::vector<float> ffn_norm;        // [n_embd]
  Weight w_gate, w_up;                // [n_ff][n_embd] (dense feed-forward)
  Weight w_down;                      // [n_embd][n_ff]
  std::vector<float> post_ffn_norm;   // [n_embd] (post_norms architectures)

  // Mixture of experts (ModelConfig::moe()), in place of w_gate / w_up / w_down: the router, each expert's
  // matrices as views into the file's 3-D tensors (backends/moe.h), and the shared expert where there is one.
  Weight router;                           // ffn_gate_inp: [n_expert][n_embd]
  std::vector<Weight> gate_exps, up_exps;  // n_expert views of [n_ff_exp][n_embd]
  std::vector<Weight> down_exps;           // n_expert views of [n_embd][n_ff_exp]
  Weight gate_shexp, up_shexp;             // [n_ff_shexp][n_embd]
  Weight down_shexp;                       // [n_embd][n_ff_shexp]
  Weight router_shexp;                     // ffn_gate_inp_shexp: [1][n_embd], the shared expert's gate
};

struct ModelWeights {
  Weight tok_embd;                 // [n_vocab][n_embd]; rows are looked up
  std::vector<float> output_norm;  // [n_embd]
  Weight output;                   // [n_vocab][n_embd]; the embedding itself when the model ties them
  bool tied_output = false;
  std::vector<float>
      rope_freqs;  // [rope_dim/2] per-pair divisors of the RoPE frequencies (Llama 3.1), or empty
  // [rope_dim/2] LongRoPE's divisors for contexts up to the original context and for longer ones (Phi-3), or
  // empty.
  std::vector<float> rope_factors_short, rope_factors_long;
  std::vector<LayerWeights> layers;

  // The per-pair RoPE divisors a session of n_ctx positions rotates with (llama.cpp's choice): rope_freqs
  // where present, else LongRoPE's long factors when n_ctx exceeds the original context, else its short ones;
  // null when the model has none.
  const float* rope_factors(const ModelConfig& c, int64_t n_ctx) const;

  static ModelWeights bind(const GgufFile& f, const ModelConfig& c);
  // The matrices, the embedding table and the norm vectors, as a backend prepares them
  // (Backend::load_weights). Points into this object, which must outlive the set's use.
  WeightSet weight_set() const;
  // Whether a tensor of this name is one the architecture's layer loop reads.
  bool uses(const std::string& name, const ModelConfig& c) const;
  // Layer il's mixture as the op takes it (pointing into this object).
  MoeFfn moe(const ModelConfig& c, int64_t il) const;
};

}  // namespace tilellm
