// Vulkan gated linear unit (shaders/glu.comp): SiLU or GELU-tanh times up, elementwise.
#include "backends/vulkan/vulkan_backend.h"

namespace tilellm {

void VulkanBackend::glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) {
  if (replaying(out)) return;
  vulkan::Pipeline& p = act == FfnAct::SiLU ? p_glu_silu_ : p_glu_gelu_;
  if (p.on_cpu) {
    host_in(gate, n);
    host_in(up, n);
    host_out(out, n);
    return cpu_->glu(gate, up, out, n, act);
  }
  const vulkan::Buffer& dg = dev_in(gate, n, in_a_, "glu");
  const vulkan::Buffer& du = dev_in(up, n, in_b_, "glu");
  const vulkan::Buffer& dout = out == gate ? dg : dev_out(out, n, out_, "glu");
  const uint32_t pc = uint32_t(n);
  uint32_t gx = 0, gy = 0;
  elementwise_groups(n, p.local_size, gx, gy);
  rt_.dispatch(p, {&dg, &du, &dout}, &pc, gx, gy);
  dev_done(out, n, dout);
}

}  // namespace tilellm
