// The model's tensors, bound by name and checked against the shapes the architecture requires.
// Matrices stay in the mapped GGUF file in their stored block format (no copy); small vectors (norm weights)
// are converted to float once at load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  Weight w_gate, w_up;                // [n_ff][n_embd]
  Weight w_down;                      // [n_embd][n_ff]
  std::vector<float> post_ffn_norm;   // [n_embd] (post_norms architectures)
};

struct ModelWeights {
  Weight tok_embd;                 // [n_vocab][n_embd]; rows are looked up
  std::vector<float> output_norm;  // [n_embd]
  Weight output;                   // [n_vocab][n_embd]; the embedding itself when the model ties them
  bool tied_output = false;
  std::vector<float>
      rope_freqs;  // [rope_dim/2] per-pair divisors of the RoPE frequencies (Llama 3.1), or empty
  std::vector<LayerWeights> layers;

  static ModelWeights bind(const GgufFile& f, const ModelConfig& c);
  // The matrices, the embedding table and the norm vectors, as a backend prepares them
  // (Backend::load_weights). Points into this object, which must outlive the set's use.
  WeightSet weight_set() const;
  // Whether a tensor of this name is one the architecture's layer loop reads.
  bool uses(const std::string& name, const ModelConfig& c) const;
};

}  // namespace tilellm
