// Residual add: acc += x.
#include "backends/cpu/cpu_backend.h"

namespace tilellm {

void CpuBackend::add(float* acc, const float* x, int64_t n) {
  pool_.parallel_for(n, 4096, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) acc[i] += x[i];
  });
}

}  // namespace tilellm
