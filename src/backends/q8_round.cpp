// The host copy of the GPU backends' activation rounding (q8_round.h).
#include "backends/q8_round.h"

#include <cmath>

namespace tilellm {

void round_activations_q8(const float* x, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + 32 * b;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) out[32 * b + j] = d * std::round(v[j] * id);
  }
}

}  // namespace tilellm
