// Vulkan residual add (shaders/add.comp).
#include "backends/vulkan/vulkan_backend.h"

namespace tilellm {

void VulkanBackend::add(float* acc, const float* x, int64_t n) {
  if (replaying(acc)) return;
  if (p_add_.on_cpu) {
    host_in(x, n);
    host_out(acc, n);
    return cpu_->add(acc, x, n);
  }
  const vulkan::Buffer& dx = dev_in(x, n, in_b_, "add");
  const vulkan::Buffer& da = dev_in(acc, n, in_a_, "add");
  const uint32_t pc = uint32_t(n);
  uint32_t gx = 0, gy = 0;
  elementwise_groups(n, p_add_.local_size, gx, gy);
  rt_.dispatch(p_add_, {&da, &dx}, &pc, gx, gy);
  dev_done(acc, n, da);
}

}  // namespace tilellm
