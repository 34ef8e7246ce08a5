// Residual add on the device (add.cl), in place on acc's device copy.
#include "backends/opencl/opencl_backend.h"

namespace tilellm {

void OpenclBackend::add(float* acc, const float* x, int64_t n) {
  if (n <= 0) return;
  if (k_add_.on_cpu) {
    host_in(x, n);
    host_out(acc, n);
    return cpu_->add(acc, x, n);
  }
  const opencl::Buffer& a = dev_in(acc, n, in_a_, "add");
  const opencl::Buffer& b = dev_in(x, n, in_b_, "add");
  const opencl::Kernel& k = k_add_;
  const cl_int nn = cl_int(n);
  opencl::set_arg(k, 0, a);
  opencl::set_arg(k, 1, b);
  opencl::set_arg(k, 2, nn);
  const size_t global[1] = {size_t(n)};
  rt_.launch(k, 1, global, nullptr);
  dev_done(acc, n, a);
}

}  // namespace tilellm
