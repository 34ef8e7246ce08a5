// y[t] = W x[t] for quantized or float weights, computed on the exact
// dequantized weights with float activations. Output rows are split across
// threads. For several tokens, each thread walks its rows in groups small
// enough to stay in cache while a tile of tokens is applied to them, so each
// weight block is decoded once per token tile.
#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "format/quants.h"

namespace tilellm {

void CpuBackend::matmul(const Weight& w, const float* x, int64_t n_tok, float* y) {
  const int64_t n_in = w.n_in, n_out = w.n_out;
  if (n_tok == 1) {
    pool_.parallel_for(n_out, 16, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r) y[r] = dot_row(w.type, w.row(r), x, n_in);
    });
    return;
  }
  constexpr int64_t kTokTile = 16;
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
