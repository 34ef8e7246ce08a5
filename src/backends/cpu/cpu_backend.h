// The CPU backend: the reference for every other backend. Each op lives in its own file (embedding.cpp,
// rmsnorm.cpp, matmul.cpp, rope.cpp, kv_store.cpp, attention.cpp, glu.cpp, add.cpp, moe.cpp) and is split
// across the session's thread pool.
#pragma once

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/tiled_float.h"
#include "backends/cpu/tiled_weight.h"
#include "backends/modes.h"
#include "backends/registry.h"
#include "base/aligned.h"
#include "base/thread_pool.h"

namespace tilellm {

// The CPU's memory probes (bandwidth.cpp), over the threads of `pool`.
std::unique_ptr<MemoryProbe> make_cpu_memory_probe(ThreadPool& pool);

class CpuBackend final : public Backend {
 public:
  // max_act_elems: the most activation elements one matmul will see (n_batch * widest input), which sizes the
  // quantized-activation scratch once, here. weights: how load_weights holds the matrices.
  CpuBackend(ThreadPool& pool, ActivationMode mode = ActivationMode::F32, int64_t max_act_elems = 0,
             WeightsMode weights = WeightsMode::Native);
  std::string_view name() const override { return "cpu"; }

  // prepare_weights(ws, the constructor's weights mode).
  void load_weights(const WeightSet& ws) override { prepare_weights(ws, weights_); }

  // Repacks or converts the model's matrices once (tiled_weight.h, tiled_float.h) per `mode`; matmuls on
  // those weights then read the prepared copies. Native mode tiles Q4_0, Q4_1, Q8_0, Q4_K, Q5_K and Q6_K
  // when this CPU has a vector tile kernel, and F16 and BF16 when it has a vector float tile kernel for them,
  // with quantized activations (the F32 path keeps reading the GGUF rows, its exact reference). With F32
  // activations the converted 8/4-bit modes hold their exact weight values as F32 rows (the float
  // reference of those formats, as the OpenCL device computes them).
  // The weights must outlive the backend and stay where they are (they are looked up by address).
  void prepare_weights(const WeightSet& ws, WeightsMode mode);

  void embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) override;
  void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) override;
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override;
  void rounded_matmul_input(const Weight& w, const float* x, int64_t n_tok, float* out) const override;
  void matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tok) override;
  void rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const int32_t* pos,
            const RopeTable& table, RopeMode mode) override;
  void kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                int64_t n_tok) override;
  void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                 const AttnParams& p, float* out) override;
  void glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) override;
  void add(float* acc, const float* x, int64_t n) override;
  void moe_ffn(const MoeFfn& m, const float* x, int64_t n_tok, float* acc, MoeScratch& s) override;

  // --degrade tile-mask=F (tile_mask.cpp): with a fraction set before load_weights, each tiled feed-forward
  // gate/up matrix gets a mask of its F weakest 16-row tiles (smallest sum of squared weights); while
  // masking is on, matmuls neither read those tiles nor compute their rows, which read as zero (for a gate
  // or up row, a zero output of that feed-forward unit). Lossy: its perplexity cost is measured by the
  // caller. Off, results are exactly the unmasked ones.
  void set_tile_mask_fraction(double f) { mask_fraction_ = f; }
  bool has_tile_mask() const override;
  void set_tile_mask(bool on) override { masking_ = on; }

 private:
  ThreadPool& pool_;
  ActivationMode mode_;
  WeightsMode weights_;
  int64_t max_act_elems_;
  AlignedBuffer act_q_;  // quantized activation rows of the current matmul: [n_tok][activation_row_size]

  // A matrix as prepared by prepare_weights: tiles, or (F16 mode) converted rows.
  struct Prepared {
    bool tiled = false;  // integer tiles (tiles)
    TiledWeight tiles;
    bool float_tiled = false;  // F16 / BF16 tiles (float_tiles)
    TiledFloat float_tiles;
    Weight rows;  // F16 mode, or int4b64/int8b0 with F32 activations: the converted matrix (in rows_data)
    AlignedBuffer rows_data;
    std::vector<uint8_t> mask;  // [n_tiles] 1: the tile is skipped while masking (empty: never)
  };
  // The weakest `fraction` of w's 16-row tiles, as a mask of n_tiles entries (tile_mask.cpp).
  std::vector<uint8_t> select_tile_mask(const Weight& w, int64_t n_tiles, double fraction);
  // run(t0, t1) over the unmasked runs of tiles in [lo, hi); the rows of masked tiles zeroed in y
  // ([n_tok][n_out]).
  template <class Run>
  void masked_tiles(const Prepared& p, int64_t lo, int64_t hi, int64_t n_tok, float* y, int64_t n_out,
                    Run&& run) const {
    if (!masking_ || p.mask.empty()) return run(lo, hi);
    for (int64_t t = lo; t < hi;) {
      int64_t e = t;
      while (e < hi && p.mask[size_t(e)] == p.mask[size_t(t)]) ++e;
      if (!p.mask[size_t(t)]) {
        run(t, e);
      } else {
        const int64_t r0 = t * kTileRows, r1 = std::min(e * kTileRows, n_out);
        for (int64_t k = 0; k < n_tok; ++k) std::fill(y + k * n_out + r0, y + k * n_out + r1, 0.0f);
      }
      t = e;
    }
  }
  const Prepared* prepared(const Weight& w) const {
    if (prepared_.empty()) return nullptr;
    const auto it = prepared_.find(&w);
    return it == prepared_.end() ? nullptr : &it->second;
  }
  void matmul_tiled(const Prepared* const* ps, float* const* ys, int n, const float* x, int64_t n_tok);
  void matmul_float_tiled(const Prepared* const* ps, float* const* ys, int n, const float* x, int64_t n_tok);
  std::unordered_map<const Weight*, Prepared> prepared_;
  AlignedBuffer act_t_;        // tiled activations of the current matmul (tiled_weight.h, TiledActs)
  AlignedBuffer f32_scratch_;  // the F32 GEMM's packed activations (tiled_f32_gemm.h, scratch_floats)
  double mask_fraction_ = 0;
  bool masking_ = false;
};

}  // namespace tilellm
