// Gated linear unit on the device (glu.cl): SiLU or GELU(tanh) of gate, times up.
#include "backends/opencl/opencl_backend.h"

namespace tilellm {

void OpenclBackend::glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) {
  if (n <= 0) return;
  if ((act == FfnAct::SiLU ? k_glu_silu_ : k_glu_gelu_).on_cpu) return cpu_->glu(gate, up, out, n, act);
  check_in(n, "glu");
  check_out(n, "glu");
  rt_.write(in_a_, 0, gate, size_t(n) * sizeof(float));
  rt_.write(in_b_, 0, up, size_t(n) * sizeof(float));
  const opencl::Kernel& k = act == FfnAct::SiLU ? k_glu_silu_ : k_glu_gelu_;
  const cl_int nn = cl_int(n);
  opencl::set_arg(k, 0, in_a_);
  opencl::set_arg(k, 1, in_b_);
  opencl::set_arg(k, 2, out_);
  opencl::set_arg(k, 3, nn);
  const size_t global[1] = {size_t(n)};
  rt_.launch(k, 1, global, nullptr);
  rt_.read(out_, 0, out, size_t(n) * sizeof(float));
}

}  // namespace tilellm
