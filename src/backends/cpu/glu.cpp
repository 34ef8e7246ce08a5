// Gated linear unit of the feed-forward block: out = act(gate) * up, with act SiLU (llama) or GELU in its
// tanh form (Gemma). Both exact (no lookup table or polynomial), so this op is its own reference.
#include <cmath>

#include "backends/cpu/cpu_backend.h"

namespace tilellm {

void CpuBackend::glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) {
  pool_.parallel_for(n, 2048, [&](int64_t b, int64_t e, int) {
    if (act == FfnAct::SiLU) {
      for (int64_t i = b; i < e; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    } else {
      // 0.5 x (1 + tanh z) written as x / (1 + e^(-2z)): the same function, but without the cancellation of
      // 1 + tanh z for very negative z, so it keeps full relative precision there.
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      for (int64_t i = b; i < e; ++i) {
        const float x = gate[i];
        const float z = kSqrt2OverPi * (x + 0.044715f * x * x * x);
        out[i] = x / (1.0f + std::exp(-2.0f * z)) * up[i];
      }
    }
  });
}

}  // namespace tilellm
