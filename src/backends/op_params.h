// The parameters of the op interface's RoPE and attention ops (backends/backend.h): the rotary pairing mode,
// the precomputed rotation table, the shapes the fused ops take, and the feed-forward activation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tilellm {

// How RoPE pairs the dimensions of a head: Norm rotates (x[2i], x[2i+1]) (llama's GGUF layout, whose
// converter permutes q/k for it); Neox rotates (x[i], x[i + rope_dim/2]).
enum class RopeMode { Norm, Neox };

// The gated feed-forward's activation: SiLU (llama) or GELU with the tanh approximation (Gemma).
enum class FfnAct { SiLU, GeluTanh };

// cos/sin of every rotation angle, precomputed once per session: [pos < n_pos][i < rope_dim/2][cos, sin],
// angle = pos * freq_scale * base^(-2i/rope_dim) / factor[i], both multiplied by attn_factor, computed in
// double then rounded. The optional per-pair factors are Llama 3.1's `rope_freqs.weight` or one of LongRoPE's
// two sets (Phi-3's rope_factors_short / rope_factors_long); attn_factor is LongRoPE's attention scaling
// (rope.scaling.attn_factor): rotating q and k both by it scales every q.k by its square.
struct RopeTable {
  int64_t n_pos = 0;
  int64_t n_half = 0;
  std::vector<float> cos_sin;
  RopeTable() = default;
  RopeTable(int64_t n_pos, int64_t rope_dim, float base, float freq_scale, const float* factors = nullptr,
            float attn_factor = 1.0f);
  const float* at(int64_t pos) const { return cos_sin.data() + size_t(pos * n_half * 2); }
};

// What a device backend remembers of a RopeTable it copied to its memory, to know the table again without
// reading it all: its address, data pointer and shape, and its first and last values (a table freed and
// another made at the same address with the same shape is caught by its values).
struct RopeTableStamp {
  const RopeTable* table = nullptr;
  const float* data = nullptr;
  int64_t n_pos = 0, n_half = 0;
  float first = 0, last = 0;
  bool matches(const RopeTable& t) const;
  void take(const RopeTable& t);
};

struct AttnParams {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;  // query head h reads KV head h / (n_head / n_head_kv)
  int64_t head_dim = 0;
  float scale = 1.0f;  // applied to q·k before the softmax
  int64_t window = 0;  // >0: a query at position p sees keys at positions p-window+1 .. p only
};

// The heads RoPE turns in rope_kv_store: q's and k's counts, their size, the rotated dims (the first
// rope_dim of each head), the table rows and the pairing mode.
struct RopeShape {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0, rope_dim = 0;
  const RopeTable* table = nullptr;
  RopeMode mode = RopeMode::Norm;
  // Whether the shapes are those a one-pass RoPE + KV write takes (the GPU backends' fused kernels): a
  // table, the rotated dims its whole width within the head, whole pairs, and the cache rows (kv_dim wide)
  // exactly the K heads.
  bool fusable(int64_t kv_dim) const {
    return table && table->n_half > 0 && rope_dim == 2 * table->n_half && rope_dim <= head_dim &&
           head_dim % 2 == 0 && kv_dim == n_head_kv * head_dim;
  }
};

}  // namespace tilellm
