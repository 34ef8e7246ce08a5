// The model's tensors, bound by name and checked against the shapes the architecture requires.
// Matrices stay in the mapped GGUF file in their stored block format (no copy); small vectors (norm weights)
// are converted to float once at load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/config.h"

namespace tilellm {

// A weight matrix W[n_out][n_in] (GGUF ne = {n_in, n_out}): row r holds the n_in input weights of output r,
// `row_bytes` bytes of `type` blocks, rows contiguous. y = W x.
struct Weight {
  std::string name;
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_bytes = 0;
  // data lies in the read-only file mapping of a GGUF file: its pages can be dropped and are read back from
  // the file on the next access. False for weights in ordinary memory (tests, converted copies).
  bool file_mapped = false;
  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
};

struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  Weight wq, wk, wv, wo;              // q: [q_dim][n_embd], k/v: [kv_dim][n_embd], o: [n_embd][q_dim]
  std::vector<float> q_norm, k_norm;  // [head_dim] (qk_norm architectures)
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
  // Whether a tensor of this name is one the architecture's layer loop reads.
  bool uses(const std::string& name, const ModelConfig& c) const;
};

}  // namespace tilellm
