// RoPE on the device. The table stays on the host (two per session, possibly large); the device gets the rows
// of the call's positions, uploaded only when they differ from the rows it holds (dev_rope_rows), so a
// forward pass sends them once per table.
#include "backends/opencl/opencl_backend.h"
#include "base/error.h"

namespace tilellm {

void OpenclBackend::rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                         const int32_t* pos, const RopeTable& table, RopeMode mode) {
  if (rope_dim != 2 * table.n_half || rope_dim > head_dim) {
    fail("rope: {} rotated dims do not match the table's {} (head size {})", rope_dim, 2 * table.n_half,
         head_dim);
  }
  if (n_tok <= 0 || n_heads <= 0 || table.n_half == 0) return;
  const int64_t n = n_tok * n_heads * head_dim;
  if (k_rope_.on_cpu) {
    host_out(x, n);
    return cpu_->rope(x, n_tok, n_heads, head_dim, rope_dim, pos, table, mode);
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] < 0 || pos[t] >= table.n_pos)
      fail("position {} is outside the RoPE table of {}", pos[t], table.n_pos);
  }
  check_tokens(n_tok, "rope");
  if (2 * table.n_half > opts_.max_width) {
    fail("OpenCL backend: RoPE rows of {} exceed the width {} sized at start", 2 * table.n_half,
         opts_.max_width);
  }
  const opencl::Buffer& rows = dev_rope_rows(table, pos, n_tok);
  const opencl::Buffer& xb = dev_in(x, n, in_a_, "rope");
  const opencl::Kernel& k = k_rope_;
  const cl_int nt = cl_int(n_tok), nh = cl_int(n_heads), hd = cl_int(head_dim), half = cl_int(table.n_half),
               neox = mode == RopeMode::Neox ? 1 : 0;
  opencl::set_arg(k, 0, xb);
  opencl::set_arg(k, 1, rows);
  opencl::set_arg(k, 2, nt);
  opencl::set_arg(k, 3, nh);
  opencl::set_arg(k, 4, hd);
  opencl::set_arg(k, 5, half);
  opencl::set_arg(k, 6, neox);
  const size_t global[3] = {size_t(half), size_t(n_heads), size_t(n_tok)};
  rt_.launch(k, 3, global, nullptr);
  dev_done(x, n, xb);
}

}  // namespace tilellm
