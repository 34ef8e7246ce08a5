// Activations rounded to int8 per block of 32 for the quantized products (kernels.h "Q8"): one warp per
// block. The producers that can (rmsnorm.cu) quantize their own output; this kernel serves the rest.
#include "common.cuh"

namespace tilellm::cuda {
namespace {

__global__ void quantize_kernel(const float* x, int64_t n_blocks, Q8 q8) {
  griddep_wait();
  griddep_launch_dependents();
  const int64_t b = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (b >= n_blocks) return;  // whole warps leave together
  const int64_t i = 32 * b + (threadIdx.x & 31);
  quantize_block(x[i], i, b, q8);
}

}  // namespace

void quantize_q8(const float* x, int n_tok, int n, const Q8& q8, cudaStream_t s) {
  const int64_t blocks = int64_t(n_tok) * (n / 32);
  if (blocks > 0) launch_pdl(quantize_kernel, ceil_div(blocks, 8), 256, 0, s, x, blocks, q8);
}

}  // namespace tilellm::cuda
