// CUDA RMSNorm (kernels/rmsnorm.cu), alone and fused with the residual add before it. In the quantized
// mode the norm also writes its output rounded for the products that read it next (the Q8 buffers), when
// the rows are whole blocks of 32.
#include "backends/cuda/cuda_backend.h"
#include "base/error.h"

namespace tilellm {

void CudaBackend::rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  if (replaying(y)) return;
  const int64_t total = n_rows * n;
  if (k_rmsnorm_.on_cpu) {
    host_in(x, total);
    host_out(y, total);
    return cpu_->rmsnorm(x, w, y, n_rows, n, eps);
  }
  const float* dx = dev_in(x, total, in_a_, "rmsnorm");
  // In place (x == y) outside the mirrors: in the staging copy of x.
  float* dy = dev_out(y, total, x == y ? in_a_ : out_, "rmsnorm");
  const float* dw = norm_weight(w, n);
  const bool quantize = quantized_ && n % 32 == 0 && q8_fits(total);
  const cuda::Q8 q8 = quantize ? q8_view(0) : cuda::Q8{};
  launch(k_rmsnorm_.name.c_str(),
         [&](cudaStream_t s) { cuda::rmsnorm(dx, dw, dy, int(n_rows), int(n), eps, nullptr, q8, s); });
  dev_done(y, total, dy);
  if (quantize) q8_hold(0, dy, n_rows, n);  // after dev_done, which forgets a Q8 source that y overlaps
}

void CudaBackend::add_rmsnorm(float* acc, const float* x, const float* w, float* y, int64_t n_rows, int64_t n,
                              float eps) {
  if (replaying(y)) return;
  const int64_t total = n_rows * n;
  if (k_add_rmsnorm_.on_cpu || k_add_.on_cpu || k_rmsnorm_.on_cpu) {
    // The unfused reference: each op on the device or the host as its own verdict says.
    add(acc, x, total);
    rmsnorm(acc, w, y, n_rows, n, eps);
    step_ops_ -= 2;  // one op, as a replay counts it
    return;
  }
  float* dacc = dev_out(acc, total, in_b_, "add_rmsnorm");
  if (mirrors_.find(acc, size_t(total) * sizeof(float), "add_rmsnorm") < 0)
    rt_.upload(in_b_, 0, acc, size_t(total) * sizeof(float));  // a host accumulator: its values go up
  const float* dx = dev_in(x, total, in_a_, "add_rmsnorm");
  float* dy = dev_out(y, total, out_, "add_rmsnorm");
  const float* dw = norm_weight(w, n);
  const bool quantize = quantized_ && n % 32 == 0 && q8_fits(total);
  const cuda::Q8 q8 = quantize ? q8_view(0) : cuda::Q8{};
  launch(k_add_rmsnorm_.name.c_str(),
         [&](cudaStream_t s) { cuda::rmsnorm(dx, dw, dy, int(n_rows), int(n), eps, dacc, q8, s); });
  dev_done(acc, total, dacc);
  dev_done(y, total, dy);
  if (quantize) q8_hold(0, dy, n_rows, n);
}

}  // namespace tilellm
