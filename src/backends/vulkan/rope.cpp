// Vulkan RoPE (shaders/rope.comp): the whole table on the device, the rows looked up by the positions there.
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                         const int32_t* pos, const RopeTable& table, RopeMode mode) {
  check_tokens(n_tok, "rope");
  if (replaying(x)) return;
  const int64_t n_half = rope_dim / 2, n = n_tok * n_heads * head_dim;
  if (rope_dim % 2 != 0 || rope_dim > head_dim || n_half != table.n_half)
    fail("rope: {} rotated dims of heads of {} do not match the table's {} pairs", rope_dim, head_dim,
         table.n_half);
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] < 0 || pos[t] >= table.n_pos)
      fail("rope: position {} outside the table of {}", pos[t], table.n_pos);
  }
  if (p_rope_.on_cpu) {
    host_out(x, n);  // read and written: host_wrote makes the host copy current first
    return cpu_->rope(x, n_tok, n_heads, head_dim, rope_dim, pos, table, mode);
  }
  const vulkan::Buffer& dx = dev_in(x, n, in_a_, "rope");
  const vulkan::Buffer& cs = dev_rope_table(table);
  const vulkan::Buffer& dpos = dev_positions(pos, n_tok);
  struct {
    uint32_t n_heads, head_dim, n_half, neox;
  } pc{uint32_t(n_heads), uint32_t(head_dim), uint32_t(n_half), mode == RopeMode::Neox ? 1u : 0u};
  rt_.dispatch(p_rope_, {&dx, &cs, &dpos}, &pc,
               uint32_t((n_half + p_rope_.local_size - 1) / p_rope_.local_size), uint32_t(n_heads),
               uint32_t(n_tok));
  dev_done(x, n, dx);
}

}  // namespace tilellm
