// Vulkan residual add (shaders/add.comp), and a bias added to one row from the model's vectors on the device.
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

// One row (decode) with a vector uploaded by load_weights: the add shader on that buffer, so the step stays
// free of staged uploads (and can be replayed); anything else row by row through add.
void VulkanBackend::add_rows(float* x, const float* v, int64_t n_rows, int64_t n) {
  const auto it = norms_.find(v);
  if (n_rows != 1 || p_add_.on_cpu || it == norms_.end() || it->second.bytes() < size_t(n) * sizeof(float))
    return Backend::add_rows(x, v, n_rows, n);
  if (replaying(x)) return;
  const vulkan::Buffer& dx = dev_in(x, n, in_a_, "add_rows");
  const uint32_t pc = uint32_t(n);
  uint32_t gx = 0, gy = 0;
  elementwise_groups(n, p_add_.local_size, gx, gy);
  rt_.dispatch(p_add_, {&dx, &it->second}, &pc, gx, gy);
  dev_done(x, n, dx);
}

}  // namespace tilellm
