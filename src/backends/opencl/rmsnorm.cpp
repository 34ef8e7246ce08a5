// RMSNorm on the device: one work-group per row, a group reduction of the sum of squares (rmsnorm.cl).
#include "backends/opencl/opencl_backend.h"
#include "format/error.h"

namespace tilellm {

void OpenclBackend::rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  if (n_rows <= 0 || n <= 0) return;
  if (k_rmsnorm_.on_cpu) return cpu_->rmsnorm(x, w, y, n_rows, n, eps);
  check_in(n_rows * n, "rmsnorm");
  check_out(n_rows * n, "rmsnorm");
  if (n > opts_.max_width)
    fail("OpenCL backend: rmsnorm rows of {} exceed the width {} sized at start", n, opts_.max_width);
  rt_.write(in_a_, 0, x, size_t(n_rows * n) * sizeof(float));
  rt_.write(vec_, 0, w, size_t(n) * sizeof(float));
  const opencl::Kernel& k = k_rmsnorm_;
  const size_t wg = reduction_wg(k, 64, 1);
  const cl_int nn = cl_int(n);
  opencl::set_arg(k, 0, in_a_);
  opencl::set_arg(k, 1, vec_);
  opencl::set_arg(k, 2, out_);
  opencl::set_arg(k, 3, nn);
  opencl::set_arg(k, 4, eps);
  opencl::set_local_arg(k, 5, wg * sizeof(float));
  const size_t global[1] = {size_t(n_rows) * wg}, local[1] = {wg};
  rt_.launch(k, 1, global, local);
  rt_.read(out_, 0, y, size_t(n_rows * n) * sizeof(float));
}

}  // namespace tilellm
