// Vulkan matmul (shaders/matmul.comp): one pipeline per device format, with 4 tokens a group for prompts
// and 1 for decode; a format whose pipeline failed the self-check multiplies on the host backend.
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::record_matmul(const DeviceWeight& dw, int64_t n_tok, const vulkan::Buffer& x,
                                  const vulkan::Buffer& y) {
  const bool one = n_tok == 1 && !p_matvec_[int(dw.fmt)].on_cpu;
  const vulkan::Pipeline& p = one ? p_matvec_[int(dw.fmt)] : p_matmul_[int(dw.fmt)];
  const int64_t tokens = one ? 1 : 4;
  // One dispatch per buffer of rows; each writes its rows' columns of y.
  for (size_t b = 0; b < dw.bufs.size(); ++b) {
    const int64_t r0 = int64_t(b) * dw.rows_per_buf, rows = std::min(dw.rows_per_buf, dw.n_out - r0);
    struct {
      uint32_t row_bytes, n_in, n_rows, n_tok, n_out, row0;
    } pc{uint32_t(dw.row_bytes), uint32_t(dw.n_in),  uint32_t(rows),
         uint32_t(n_tok),        uint32_t(dw.n_out), uint32_t(r0)};
    // Row groups past the device's x limit continue in z (the shader joins them).
    const uint64_t row_groups = (uint64_t(rows) + 3) / 4;
    const uint32_t gx = uint32_t(std::min<uint64_t>(row_groups, caps().max_group_count[0]));
    const uint32_t gz = uint32_t((row_groups + gx - 1) / gx);
    rt_.dispatch(p, {&dw.bufs[b], &x, &y}, &pc, gx, uint32_t((n_tok + tokens - 1) / tokens), gz);
  }
}

void VulkanBackend::matmul(const Weight& w, const float* x, int64_t n_tok, float* y) {
  check_tokens(n_tok, "matmul");
  const DeviceWeight& dw = find_weight(w, "matmul");
  const bool host = p_matmul_[int(dw.fmt)].on_cpu && (n_tok > 1 || p_matvec_[int(dw.fmt)].on_cpu);
  if (host) {
    host_in(x, n_tok * w.n_in);
    host_out(y, n_tok * w.n_out);
    return cpu_->matmul(w, x, n_tok, y);
  }
  const vulkan::Buffer& dx = dev_in(x, n_tok * w.n_in, in_a_, "matmul");
  const vulkan::Buffer& dy = dev_out(y, n_tok * w.n_out, out_, "matmul");
  record_matmul(dw, n_tok, dx, dy);
  dev_done(y, n_tok * w.n_out, dy);
}

}  // namespace tilellm
