// CUDA adds (kernels/add.cu): the residual add and a bias added to every row.
#include "backends/cuda/cuda_backend.h"
#include "base/error.h"

namespace tilellm {

void CudaBackend::add(float* acc, const float* x, int64_t n) {
  if (replaying(acc)) return;
  if (k_add_.on_cpu) {
    host_in(x, n);
    host_out(acc, n);
    return cpu_->add(acc, x, n);
  }
  float* dacc = dev_in(acc, n, in_b_, "add");
  const float* dx = dev_in(x, n, in_a_, "add");
  const bool broken = opts_.test_broken_kernel == "add";
  launch(k_add_.name.c_str(), [&](cudaStream_t s) { cuda::add(dacc, dx, n, broken, s); });
  dev_done(acc, n, dacc);
}

void CudaBackend::add_rows(float* x, const float* v, int64_t n_rows, int64_t n) {
  if (replaying(x)) return;
  const int64_t total = n_rows * n;
  if (k_add_rows_.on_cpu) {
    host_out(x, total);
    return cpu_->add_rows(x, v, n_rows, n);
  }
  float* dx = dev_in(x, total, in_a_, "add_rows");
  const float* dv = norm_weight(v, n);
  launch(k_add_rows_.name.c_str(), [&](cudaStream_t s) { cuda::add_rows(dx, dv, int(n_rows), int(n), s); });
  dev_done(x, total, dx);
}

}  // namespace tilellm
