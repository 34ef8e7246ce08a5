// CUDA RMSNorm (kernels/rmsnorm.cu), alone and fused with the residual add before it. In the quantized
// mode the norm also writes its output rounded for the products that read it next (the Q8 buffers), when
// the rows are whole blocks of 32.
//
// With fuse_norm (--cuda-fuse-norm), decode's matmul_add_rmsnorm launches no norm: its product adds each row
// into the residual as it writes it (MatvecJob::residual) and the norm stays pending until the product
// that reads its output forms it in its own launch (take_norm: MatvecJob::norm, every block from the
// residual, in the row kernel's order, so the same bits); anything else that touches the device arrays
// first launches it alone (flush_norm). A decode layer then runs two launches fewer.
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

void CudaBackend::matmul_add_rmsnorm(const Weight& wo, const float* x, int64_t n_tok, float* o, float* acc,
                                     const float* g, float* y, float eps) {
  if (n_tok == 1 && opts_.fuse_norm && mode_ != StepMode::Replaying &&
      record_matvec_add(wo, x, o, acc, g, y, eps)) {
    step_ops_ += 2;  // the reference's matmul and add_rmsnorm, as a replay counts them
    return;
  }
  Backend::matmul_add_rmsnorm(wo, x, n_tok, o, acc, g, y, eps);
}

bool CudaBackend::record_matvec_add(const Weight& wo, const float* x, float* o, float* acc, const float* g,
                                    float* y, float eps) {
  flush_norm();
  if (!quantized_ || k_matvec_norm_.on_cpu || k_add_rmsnorm_.on_cpu || k_add_.on_cpu || k_rmsnorm_.on_cpu)
    return false;
  const DeviceWeight& dw = find_weight(wo, "matmul");
  const int64_t n = dw.n_out;
  const size_t bytes = size_t(n) * sizeof(float);
  if (!quantized(dw.fmt) || !on_matvec(dw, 1) || n % 32 != 0 || !q8_fits(n) || o == x || y == acc || y == o ||
      mirrors_.find(acc, bytes, "add_rmsnorm") < 0 || mirrors_.find(y, bytes, "add_rmsnorm") < 0)
    return false;
  cuda::MatvecJob job;
  job.w[0] = dw.matrix();
  if (!cuda::matvec_residual_fits(job)) return false;
  const float* dx = dev_in(x, dw.n_in, in_a_, "matmul");
  job.y[0] = dev_out(o, n, out_, "matmul");
  job.residual = dev_out(acc, n, in_b_, "add_rmsnorm");
  const cuda::Q8 q8 = q8_view(q8_of(dx, 1, dw.n_in));
  launch(k_matvec_[dw.fmt].name.c_str(), [&](cudaStream_t s) { cuda::matvec_q8(job, q8, s); });
  dev_done(o, n, job.y[0]);
  dev_done(acc, n, job.residual);
  pending_norm_ = {acc, g, y, n, eps};
  return true;
}

void CudaBackend::flush_norm() {
  if (!pending_norm_.acc) return;
  const PendingNorm p = pending_norm_;
  pending_norm_ = {};
  const float* dacc = dev_in(p.acc, p.n, in_a_, "add_rmsnorm");
  float* dy = dev_out(p.y, p.n, out_, "add_rmsnorm");
  const float* dw = norm_weight(p.w, p.n);
  const cuda::Q8 q8 = q8_view(0);
  launch(k_add_rmsnorm_.name.c_str(),
         [&](cudaStream_t s) { cuda::rmsnorm(dacc, dw, dy, 1, int(p.n), p.eps, nullptr, q8, s); });
  dev_done(p.y, p.n, dy);
  q8_hold(0, dy, 1, p.n);
}

bool CudaBackend::take_norm(const float* x, cuda::MatvecJob& job) {
  const PendingNorm p = pending_norm_;
  if (!p.acc || p.y != x || job.w[0].n_in != p.n || k_matvec_norm_.on_cpu) return false;
  cuda::MatvecJob probe = job;
  probe.norm.acc = p.acc;
  if (!cuda::matvec_norm_fits(probe)) return false;
  pending_norm_ = {};
  const auto aligned = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  const float* dacc = dev_in(p.acc, p.n, in_a_, "add_rmsnorm");
  float* dy = dev_out(p.y, p.n, out_, "add_rmsnorm");
  const float* dw = norm_weight(p.w, p.n);
  if (!aligned(dacc) || !aligned(dy) || !aligned(dw)) {
    pending_norm_ = p;
    flush_norm();
    return false;
  }
  job.norm = {dacc, dw, dy, q8_view(0), p.eps};
  dev_done(p.y, p.n, dy);
  q8_hold(0, dy, 1, p.n);
  return true;
}

}  // namespace tilellm
