// Token embedding lookup: dequantize the selected rows of the embedding table.
#include "backends/cpu/cpu_backend.h"
#include "base/error.h"
#include "format/quants.h"

namespace tilellm {

void CpuBackend::embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) {
  const int64_t n = table.n_in;
  for (int64_t t = 0; t < n_tok; ++t) {
    if (ids[t] < 0 || ids[t] >= table.n_out)
      fail("token id {} is outside the vocabulary of {}", ids[t], table.n_out);
  }
  pool_.parallel_for(n_tok, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* o = out + t * n;
      dequantize_row(table.type, table.row(ids[t]), o, n);
      if (scale != 1.0f) {
        for (int64_t i = 0; i < n; ++i) o[i] *= scale;
      }
    }
  });
}

}  // namespace tilellm
