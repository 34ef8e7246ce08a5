// Mixture-of-experts feed-forward on the CPU: the shared reference (backends/moe.cpp, moe_on_host) run on the
// layer's own arrays, which already lie in host memory, so the input is not copied back and the weighted sum
// lands in acc directly. The experts' products go through this backend's matmuls on their tiles.
#include "backends/cpu/cpu_backend.h"

namespace tilellm {

void CpuBackend::moe_ffn(const MoeFfn& m, const float* x, int64_t n_tok, float* acc, MoeScratch& s) {
  moe_on_host(*this, m, x, n_tok, acc, s);
}

}  // namespace tilellm
