// CUDA gated activation (kernels/glu.cu): out = act(gate) * up.
#include "backends/cuda/cuda_backend.h"

namespace tilellm {

void CudaBackend::glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) {
  if (replaying(out)) return;
  const int ai = act == FfnAct::SiLU ? 0 : 1;
  if (k_glu_[ai].on_cpu) {
    host_in(gate, n);
    host_in(up, n);
    host_out(out, n);
    return cpu_->glu(gate, up, out, n, act);
  }
  const float* dg = dev_in(gate, n, in_a_, "glu");
  const float* du = dev_in(up, n, in_b_, "glu");
  float* dout = dev_out(out, n, out_, "glu");
  launch(k_glu_[ai].name.c_str(), [&](cudaStream_t s) { cuda::glu(dg, du, dout, n, ai, s); });
  dev_done(out, n, dout);
}

}  // namespace tilellm
