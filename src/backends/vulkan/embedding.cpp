// Vulkan embedding lookup (shaders/embedding.comp): rows of the table in its device format, dequantized; the
// ids are read by the shader from device memory (a replayed decode step's come from the step inputs).
#include <algorithm>
#include <cstring>

#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) {
  check_tokens(n_tok, "embed");
  for (int64_t t = 0; t < n_tok; ++t) {
    if (ids[t] < 0 || ids[t] >= table.n_out)
      fail("token id {} is outside the vocabulary of {}", ids[t], table.n_out);
  }
  if (replaying(out)) {
    rt_.set_step_input(kIdsSlot, ids, size_t(n_tok) * 4);
    std::memcpy(ids_held_.data(), ids, size_t(n_tok) * 4);
    ids_n_ = n_tok;
    return;
  }
  const DeviceWeight& dw = find_weight(table, "embed");
  vulkan::Pipeline& p = p_embed_[int(dw.fmt)];
  const int64_t n = n_tok * table.n_in;
  if (p.on_cpu) {
    host_out(out, n);
    return cpu_->embed(table, ids, n_tok, scale, out);
  }
  const vulkan::Buffer& y = dev_out(out, n, out_, "embed");
  const vulkan::Buffer& dids = dev_ids(ids, n_tok);
  // One dispatch per buffer of rows (one for every table but the largest); each writes its tokens' rows.
  for (size_t b = 0; b < dw.bufs.size(); ++b) {
    const int64_t r0 = int64_t(b) * dw.rows_per_buf;
    struct {
      uint32_t row_bytes, n, row0, rows;
      float scale;
    } pc{uint32_t(dw.row_bytes), uint32_t(table.n_in), uint32_t(r0),
         uint32_t(std::min(dw.rows_per_buf, dw.n_out - r0)), scale};
    rt_.dispatch(p, {&dw.bufs[b], &dids, &y}, &pc, uint32_t((table.n_in + p.local_size - 1) / p.local_size),
                 uint32_t(n_tok));
  }
  dev_done(out, n, y);
}

}  // namespace tilellm
