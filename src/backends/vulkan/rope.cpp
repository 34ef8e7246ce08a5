// Vulkan RoPE (shaders/rope.comp): the tokens' table rows go up once per set of positions.
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                         const int32_t* pos, const RopeTable& table, RopeMode mode) {
  check_tokens(n_tok, "rope");
  const int64_t n_half = rope_dim / 2, n = n_tok * n_heads * head_dim;
  if (rope_dim % 2 != 0 || rope_dim > head_dim || n_half != table.n_half)
    fail("rope: {} rotated dims of heads of {} do not match the table's {} pairs", rope_dim, head_dim,
         table.n_half);
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] < 0 || pos[t] >= table.n_pos)
      fail("rope: position {} outside the table of {}", pos[t], table.n_pos);
  }
  if (size_t(n_tok * n_half * 2) > rope_held_.size())
    fail("Vulkan backend: rope rows of {} x {} exceed the scratch sized at start", n_tok, n_half);
  if (p_rope_.on_cpu) {
    host_out(x, n);  // read and written: host_wrote makes the host copy current first
    return cpu_->rope(x, n_tok, n_heads, head_dim, rope_dim, pos, table, mode);
  }
  const vulkan::Buffer& dx = dev_in(x, n, in_a_, "rope");
  const vulkan::Buffer& cs = dev_rope_rows(table, pos, n_tok);
  struct {
    uint32_t n_heads, head_dim, n_half, neox;
  } pc{uint32_t(n_heads), uint32_t(head_dim), uint32_t(n_half), mode == RopeMode::Neox ? 1u : 0u};
  rt_.dispatch(p_rope_, {&dx, &cs}, &pc, uint32_t((n_half + p_rope_.local_size - 1) / p_rope_.local_size),
               uint32_t(n_heads), uint32_t(n_tok));
  dev_done(x, n, dx);
}

}  // namespace tilellm
