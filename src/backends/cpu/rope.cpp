// Rotary position embedding from the per-position cos/sin table (no trig in the loop).
// Norm mode rotates pairs (x[2i], x[2i+1]); Neox mode rotates (x[i], x[i + rope_dim/2]); pair i turns by
// angle i.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "base/error.h"

namespace tilellm {

void CpuBackend::rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                      const int32_t* pos, const RopeTable& table, RopeMode mode) {
  if (rope_dim != 2 * table.n_half || rope_dim > head_dim) {
    fail("rope: {} rotated dims do not match the table's {} (head size {})", rope_dim, 2 * table.n_half,
         head_dim);
  }
  const int64_t half = rope_dim / 2;
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] < 0 || pos[t] >= table.n_pos)
      fail("position {} is outside the RoPE table of {}", pos[t], table.n_pos);
  }
  pool_.parallel_for(n_tok * n_heads, 4, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      float* h = x + r * head_dim;
      const float* cs = table.at(pos[r / n_heads]);
      for (int64_t i = 0; i < half; ++i) {
        const int64_t i0 = mode == RopeMode::Norm ? 2 * i : i;
        const int64_t i1 = mode == RopeMode::Norm ? 2 * i + 1 : i + half;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float a = h[i0], bb = h[i1];
        h[i0] = a * c - bb * s;
        h[i1] = a * s + bb * c;
      }
    }
  });
}

}  // namespace tilellm
