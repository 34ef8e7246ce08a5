// CUDA embedding lookup (kernels/embedding.cu): rows of the table in its device format, dequantized and
// scaled on the device. A replayed decode step only refreshes its token id (a step input).
#include "backends/cuda/cuda_backend.h"
#include "base/error.h"

namespace tilellm {

void CudaBackend::embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) {
  check_tokens(n_tok, "embed");
  for (int64_t t = 0; t < n_tok; ++t) {
    if (ids[t] < 0 || ids[t] >= table.n_out)
      fail("token id {} is outside the vocabulary of {}", ids[t], table.n_out);
  }
  if (mode_ == StepMode::Replaying) rt_.set_step_input(kIdsSlot, ids, size_t(n_tok) * sizeof(int32_t));
  if (replaying(out)) return;
  const DeviceWeight& dw = find_weight(table, "embed");
  const int64_t n = n_tok * table.n_in;
  if (k_embed_[int(dw.fmt)].on_cpu) {
    host_out(out, n);
    return cpu_->embed(table, ids, n_tok, scale, out);
  }
  const int32_t* dids = dev_ids(ids, n_tok);
  float* dout = dev_out(out, n, out_, "embed");
  const cuda::Matrix m = dw.matrix();
  launch(k_embed_[int(dw.fmt)].name.c_str(),
         [&](cudaStream_t s) { cuda::embed(m, dids, int(n_tok), scale, dout, s); });
  dev_done(out, n, dout);
}

}  // namespace tilellm
