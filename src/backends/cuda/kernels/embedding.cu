// Embedding lookup: out[t][i] = scale * element i of table row ids[t], formed exactly as the row's device
// format defines it. One thread per output element.
#include "common.cuh"

namespace tilellm::cuda {
namespace {

template <int F>
__global__ void embed_kernel(Matrix table, const int32_t* ids, int n_tok, float scale, float* out) {
  griddep_wait();
  griddep_launch_dependents();
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int n = table.n_in;
  if (idx >= int64_t(n_tok) * n) return;
  const int t = int(idx / n), i = int(idx % n);
  const uint8_t* row = table.data + size_t(ids[t]) * table.row_bytes;
  out[idx] = scale * row_at<F>(row, n, i);
}

}  // namespace

void embed(const Matrix& table, const int32_t* ids, int n_tok, float scale, float* out, cudaStream_t s) {
  const int64_t n = int64_t(n_tok) * table.n_in;
  if (n == 0) return;
  with_format(table.fmt, [&]<int F>() {
    launch_pdl(embed_kernel<F>, ceil_div(n, 256), 256, 0, s, table, ids, n_tok, scale, out);
  });
}

}  // namespace tilellm::cuda
