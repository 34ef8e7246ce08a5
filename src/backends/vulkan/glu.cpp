// Vulkan gated linear unit (shaders/glu.comp): SiLU or GELU-tanh times up, elementwise; under the integer
// decode products, an output of whole blocks of 32 that fits q8x_ (one token's) is also rounded for the
// product that reads it (shaders/glu_q8.comp, an invocation a block; q8_held_ then names the output).
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
  vulkan::Pipeline& pq = act == FfnAct::SiLU ? p_glu_silu_q8_ : p_glu_gelu_q8_;
  if (rounds_output(pq, 1, n)) {
    elementwise_groups(n / 32, pq.local_size, gx, gy);
    rt_.dispatch(pq, {&dg, &du, &dout, &q8x_}, &pc, gx, gy);
    dev_done(out, n, dout);
    q8_held_ = {dout.get(), n};
    return;
  }
  elementwise_groups(n, p.local_size, gx, gy);
  rt_.dispatch(p, {&dg, &du, &dout}, &pc, gx, gy);
  dev_done(out, n, dout);
}

}  // namespace tilellm
