// Token embedding lookup on the device: the ids go up, the dequantized (and scaled) rows come back.
#include "backends/opencl/opencl_backend.h"
#include "format/error.h"

namespace tilellm {

void OpenclBackend::embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) {
  if (n_tok <= 0) return;
  const DeviceWeight& dw = find_weight(table, "embed");
  if (embed_kernel(dw.type).on_cpu) return cpu_->embed(table, ids, n_tok, scale, out);
  for (int64_t t = 0; t < n_tok; ++t) {
    if (ids[t] < 0 || ids[t] >= table.n_out)
      fail("token id {} is outside the vocabulary of {}", ids[t], table.n_out);
  }
  check_tokens(n_tok, "embed");
  check_out(n_tok * dw.n_in, "embed");
  rt_.write(ints_, 0, ids, size_t(n_tok) * sizeof(int32_t));
  const opencl::Kernel& k = embed_kernel(dw.type);
  const cl_ulong row_bytes = dw.row_bytes;
  const cl_int n = cl_int(dw.n_in), nt = cl_int(n_tok);
  opencl::set_arg(k, 0, dw.buf);
  opencl::set_arg(k, 1, row_bytes);
  opencl::set_arg(k, 2, n);
  opencl::set_arg(k, 3, ints_);
  opencl::set_arg(k, 4, nt);
  opencl::set_arg(k, 5, scale);
  opencl::set_arg(k, 6, out_);
  const size_t global[2] = {size_t(n), size_t(n_tok)};
  rt_.launch(k, 2, global, nullptr);
  rt_.read(out_, 0, out, size_t(n_tok * dw.n_in) * sizeof(float));
}

}  // namespace tilellm
