// Gated linear unit on the device (glu.cl): SiLU or GELU(tanh) of gate, times up.
#include "backends/opencl/opencl_backend.h"

namespace tilellm {

void OpenclBackend::glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) {
  if (n <= 0) return;
  const opencl::Kernel& k = act == FfnAct::SiLU ? k_glu_silu_ : k_glu_gelu_;
  if (k.on_cpu) {
    host_in(gate, n);
    host_in(up, n);
    host_out(out, n);
    return cpu_->glu(gate, up, out, n, act);
  }
  const opencl::Buffer& g = dev_in(gate, n, in_a_, "glu");
  const opencl::Buffer& u = dev_in(up, n, in_b_, "glu");
  const opencl::Buffer& y = dev_out(out, n, out_, "glu");
  const cl_int nn = cl_int(n);
  opencl::set_arg(k, 0, g);
  opencl::set_arg(k, 1, u);
  opencl::set_arg(k, 2, y);
  opencl::set_arg(k, 3, nn);
  const size_t global[1] = {size_t(n)};
  rt_.launch(k, 1, global, nullptr);
  dev_done(out, n, y);
}

}  // namespace tilellm
