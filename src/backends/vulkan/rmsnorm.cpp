// Vulkan RMSNorm and the residual add fused with it (shaders/rmsnorm.comp): one work-group per row. Under
// the integer decode products, one row's output is also rounded for them (the _q8 pipelines: q8x_ then
// holds y's rounding, and the products that read y skip their quantize dispatch).
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  if (replaying(y)) return;
  const int64_t total = n_rows * n;
  if (p_rmsnorm_.on_cpu) {
    host_in(x, total);
    host_out(y, total);
    return cpu_->rmsnorm(x, w, y, n_rows, n, eps);
  }
  const vulkan::Buffer& dx = dev_in(x, total, in_a_, "rmsnorm");
  // In place when y is x; else y's own buffer (or out_).
  const vulkan::Buffer& dy = y == x ? dx : dev_out(y, total, out_, "rmsnorm");
  const vulkan::Buffer& dw = norm_weight(w, n);
  struct {
    uint32_t n;
    float eps;
  } pc{uint32_t(n), eps};
  const bool q8 = rounds_output(p_rmsnorm_q8_, n_rows, n);
  rt_.dispatch(q8 ? p_rmsnorm_q8_ : p_rmsnorm_, {&dx, &dx, &dw, &dy, q8x_.get() ? &q8x_ : &vec_}, &pc,
               uint32_t(n_rows));
  dev_done(y, total, dy);
  if (q8) q8_held_ = {dy.get(), n};
}

void VulkanBackend::add_rmsnorm(float* acc, const float* x, const float* w, float* y, int64_t n_rows,
                                int64_t n, float eps) {
  if (p_add_rmsnorm_.on_cpu) return Backend::add_rmsnorm(acc, x, w, y, n_rows, n, eps);
  if (replaying(acc, y)) return;
  const int64_t total = n_rows * n;
  const vulkan::Buffer& dx = dev_in(x, total, in_b_, "add_rmsnorm");
  // acc is read and written: its own mirror, or in_a_ (filled, then copied back by dev_done).
  const vulkan::Buffer& da = dev_in(acc, total, in_a_, "add_rmsnorm");
  const vulkan::Buffer& dy = dev_out(y, total, out_, "add_rmsnorm");
  const vulkan::Buffer& dw = norm_weight(w, n);
  struct {
    uint32_t n;
    float eps;
  } pc{uint32_t(n), eps};
  const bool q8 = rounds_output(p_add_rmsnorm_q8_, n_rows, n);
  rt_.dispatch(q8 ? p_add_rmsnorm_q8_ : p_add_rmsnorm_, {&da, &dx, &dw, &dy, q8x_.get() ? &q8x_ : &vec_}, &pc,
               uint32_t(n_rows));
  dev_done(acc, total, da);
  dev_done(y, total, dy);
  if (q8) q8_held_ = {dy.get(), n};
}

}  // namespace tilellm
