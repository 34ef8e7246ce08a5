// The host copy of the CUDA backend's fp16 activation rounding (f16_round.h).
#include "backends/f16_round.h"

#include <cmath>

#include "base/fp16.h"

namespace tilellm {

int f16_scale_exponent(float m) {
  if (!(m > 0.0f) || !(m <= 3.4e38f)) return 0;
  const int e = 14 - std::ilogb(m);
  return e < -110 ? -110 : e > 110 ? 110 : e;
}

void round_activations_f16_scaled(const float* x, int64_t n, float* out) {
  // The kernel's largest magnitude is a maximum over bit patterns, where a NaN is above every number.
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::isnan(x[i]) || std::isnan(m) ? NAN : std::fmax(m, std::fabs(x[i]));
  const int e = f16_scale_exponent(m);
  for (int64_t i = 0; i < n; ++i) out[i] = std::ldexp(fp16_to_fp32(fp32_to_fp16(std::ldexp(x[i], e))), -e);
}

}  // namespace tilellm
