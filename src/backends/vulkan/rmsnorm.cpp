// Vulkan RMSNorm and the residual add fused with it (shaders/rmsnorm.comp): one work-group per row.
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
  rt_.dispatch(p_rmsnorm_, {&dx, &dx, &dw, &dy}, &pc, uint32_t(n_rows));
  dev_done(y, total, dy);
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
  rt_.dispatch(p_add_rmsnorm_, {&da, &dx, &dw, &dy}, &pc, uint32_t(n_rows));
  dev_done(acc, total, da);
  dev_done(y, total, dy);
}

}  // namespace tilellm
