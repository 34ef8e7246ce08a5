// The KV write: k and v rows of n_tok tokens into the cache planes at their positions, as floats or as
// halves rounded to nearest even (the CPU backend's conversion).
#include "common.cuh"

namespace tilellm::cuda {
namespace {

__global__ void kv_store_kernel(const float* k, const float* v, int n_tok, int kv_dim, const int32_t* pos,
                                void* k_plane, void* v_plane, bool f16) {
  griddep_wait();
  griddep_launch_dependents();
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= 2 * int64_t(n_tok) * kv_dim) return;
  const int64_t per = int64_t(n_tok) * kv_dim;
  const bool is_v = idx >= per;
  const int64_t e = is_v ? idx - per : idx;
  const int t = int(e / kv_dim), j = int(e % kv_dim);
  const float x = (is_v ? v : k)[e];
  const int64_t at = int64_t(pos[t]) * kv_dim + j;
  void* plane = is_v ? v_plane : k_plane;
  if (f16)
    static_cast<__half*>(plane)[at] = __float2half_rn(x);
  else
    static_cast<float*>(plane)[at] = x;
}

}  // namespace

void kv_store(const float* k, const float* v, int n_tok, int kv_dim, const int32_t* pos, void* k_plane,
              void* v_plane, bool f16, cudaStream_t s) {
  const int64_t n = 2 * int64_t(n_tok) * kv_dim;
  if (n > 0)
    launch_pdl(kv_store_kernel, ceil_div(n, 256), 256, 0, s, k, v, n_tok, kv_dim, pos, k_plane, v_plane, f16);
}

}  // namespace tilellm::cuda
