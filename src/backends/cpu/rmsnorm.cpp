// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w. The sum of squares runs as four independent partial sums so the
// additions pipeline (and vectorize) instead of forming one serial dependency chain.
#include <cmath>

#include "backends/cpu/cpu_backend.h"

namespace tilellm {
namespace {

void rmsnorm_row(const float* x, const float* w, float* y, int64_t n, float eps) {
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i] * x[i];
    s1 += x[i + 1] * x[i + 1];
    s2 += x[i + 2] * x[i + 2];
    s3 += x[i + 3] * x[i + 3];
  }
  for (; i < n; ++i) s0 += x[i] * x[i];
  const float scale = 1.0f / std::sqrt((s0 + s1 + s2 + s3) / float(n) + eps);
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] * scale * w[j];
}

}  // namespace

void CpuBackend::rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  const int64_t grain = std::max<int64_t>(1, 4096 / n);
  pool_.parallel_for(n_rows, grain, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) rmsnorm_row(x + r * n, w, y + r * n, n, eps);
  });
}

}  // namespace tilellm
