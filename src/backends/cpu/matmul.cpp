// y[t] = W x[t] for quantized or float weights, computed on the exact
// dequantized weights with float activations. Output rows are split across
// threads. For several tokens, each thread walks its rows in groups small
// enough to stay in cache while a tile of tokens is applied to them, so each
// weight block is decoded once per token tile.
#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "format/error.h"
#include "format/quants.h"
#include "format/quants_q8.h"

namespace tilellm {

CpuBackend::CpuBackend(ThreadPool& pool, ActivationMode mode, int64_t max_act_elems)
    : pool_(pool),
      mode_(mode),
      max_act_elems_(max_act_elems),
      // No activation format takes more than 4 bytes per element (Q8_K: 292 bytes per 256).
      act_q_(mode == ActivationMode::Quantized ? size_t(max_act_elems) * 4 : 0) {}

void CpuBackend::matmul(const Weight& w, const float* x, int64_t n_tok, float* y) {
  const int64_t n_in = w.n_in, n_out = w.n_out;
  constexpr int64_t kTokTile = 16;
  const GgmlType at = activation_type(w.type);
  if (mode_ == ActivationMode::Quantized && at != GgmlType::F32) {
    if (n_tok * n_in > max_act_elems_) {
      fail("internal: matmul of {}x{} activations exceeds the scratch of {}", n_tok, n_in, max_act_elems_);
    }
    const size_t rs = activation_row_size(at, n_in);
    uint8_t* xq = act_q_.as<uint8_t>();
    pool_.parallel_for(n_tok, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) quantize_activations(at, x + t * n_in, xq + size_t(t) * rs, n_in);
    });
    if (n_tok == 1) {
      pool_.parallel_for(n_out, 16, [&](int64_t b, int64_t e, int) {
        dot_rows_q(w.type, w.row(b), w.row_bytes, e - b, n_in, xq, y + b);
      });
      return;
    }
    pool_.parallel_for(n_out, 8, [&](int64_t b, int64_t e, int) {
      for (int64_t t0 = 0; t0 < n_tok; t0 += kTokTile) {
        const int n_vec = int(std::min(kTokTile, n_tok - t0));
        for (int64_t r = b; r < e; ++r) {
          dot_row_q_multi(w.type, w.row(r), n_in, xq + size_t(t0) * rs, rs, n_vec, y + t0 * n_out + r, n_out);
        }
      }
    });
    return;
  }
  if (n_tok == 1) {
    pool_.parallel_for(n_out, 16, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r) y[r] = dot_row(w.type, w.row(r), x, n_in);
    });
    return;
  }
  pool_.parallel_for(n_out, 8, [&](int64_t b, int64_t e, int) {
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTokTile) {
      const int n_vec = int(std::min(kTokTile, n_tok - t0));
      for (int64_t r = b; r < e; ++r) {
        dot_row_multi(w.type, w.row(r), n_in, x + t0 * n_in, n_in, n_vec, y + t0 * n_out + r, n_out);
      }
    }
  });
}

}  // namespace tilellm
