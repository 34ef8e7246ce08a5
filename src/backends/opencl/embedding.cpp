// Token embedding lookup on the device: the ids go up, the dequantized (and scaled) rows are written into the
// output's device copy.
#include "backends/opencl/opencl_backend.h"
#include "base/error.h"

namespace tilellm {

void OpenclBackend::embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) {
  if (n_tok <= 0) return;
  const DeviceWeight& dw = find_weight(table, "embed");
  if (dw.img)
    fail("OpenCL backend: embed: weight {} is held in an image; the embedding reads buffers", table.name);
  for (int64_t t = 0; t < n_tok; ++t) {
    if (ids[t] < 0 || ids[t] >= table.n_out)
      fail("token id {} is outside the vocabulary of {}", ids[t], table.n_out);
  }
  if (embed_kernel(dw.fmt).on_cpu) {
    host_out(out, n_tok * dw.n_in);
    return cpu_->embed(table, ids, n_tok, scale, out);
  }
  check_tokens(n_tok, "embed");
  const opencl::Buffer& idb = dev_ids(ids, n_tok);
  const opencl::Buffer& y = dev_out(out, n_tok * dw.n_in, out_, "embed");
  const opencl::Kernel& k = embed_kernel(dw.fmt);
  const cl_ulong row_bytes = dw.row_bytes;
  const cl_int n = cl_int(dw.n_in), nt = cl_int(n_tok);
  opencl::set_arg(k, 0, dw.buf);
  opencl::set_arg(k, 1, row_bytes);
  opencl::set_arg(k, 2, n);
  opencl::set_arg(k, 3, idb);
  opencl::set_arg(k, 4, nt);
  opencl::set_arg(k, 5, scale);
  opencl::set_arg(k, 6, y);
  const size_t global[2] = {size_t(n), size_t(n_tok)};
  rt_.launch(k, 2, global, nullptr);
  dev_done(out, n_tok * dw.n_in, y);
}

}  // namespace tilellm
