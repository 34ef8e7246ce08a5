// Vulkan embedding lookup (shaders/embedding.comp): rows of the table in its device format, dequantized, one
// dispatch per token (the table may lie in several buffers of rows; the ids are on the host).
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) {
  check_tokens(n_tok, "embed");
  for (int64_t t = 0; t < n_tok; ++t) {
    if (ids[t] < 0 || ids[t] >= table.n_out)
      fail("token id {} is outside the vocabulary of {}", ids[t], table.n_out);
  }
  const DeviceWeight& dw = find_weight(table, "embed");
  vulkan::Pipeline& p = p_embed_[int(dw.fmt)];
  const int64_t n = n_tok * table.n_in;
  if (p.on_cpu) {
    host_out(out, n);
    return cpu_->embed(table, ids, n_tok, scale, out);
  }
  const vulkan::Buffer& y = dev_out(out, n, out_, "embed");
  for (int64_t t = 0; t < n_tok; ++t) {
    const int64_t b = ids[t] / dw.rows_per_buf;
    struct {
      uint32_t row_bytes, n, row, t;
      float scale;
    } pc{uint32_t(dw.row_bytes), uint32_t(table.n_in), uint32_t(ids[t] - b * dw.rows_per_buf), uint32_t(t),
         scale};
    rt_.dispatch(p, {&dw.bufs[size_t(b)], &y}, &pc, uint32_t((table.n_in + p.local_size - 1) / p.local_size));
  }
  dev_done(out, n, y);
}

}  // namespace tilellm
