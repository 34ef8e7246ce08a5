// Residual add on the device (add.cl).
#include "backends/opencl/opencl_backend.h"

namespace tilellm {

void OpenclBackend::add(float* acc, const float* x, int64_t n) {
  if (n <= 0) return;
  if (k_add_.on_cpu) return cpu_->add(acc, x, n);
  check_in(n, "add");
  rt_.write(in_a_, 0, acc, size_t(n) * sizeof(float));
  rt_.write(in_b_, 0, x, size_t(n) * sizeof(float));
  const opencl::Kernel& k = k_add_;
  const cl_int nn = cl_int(n);
  opencl::set_arg(k, 0, in_a_);
  opencl::set_arg(k, 1, in_b_);
  opencl::set_arg(k, 2, nn);
  const size_t global[1] = {size_t(n)};
  rt_.launch(k, 1, global, nullptr);
  rt_.read(in_a_, 0, acc, size_t(n) * sizeof(float));
}

}  // namespace tilellm
