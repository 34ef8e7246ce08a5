// The gated feed-forward's activation: out = act(gate) * up, SiLU (llama) or GELU with the tanh
// approximation (Gemma), in float with the library's exact expf / tanhf (no fast-math approximations).
#include "common.cuh"

namespace tilellm::cuda {
namespace {

__global__ void glu_kernel(const float* gate, const float* up, float* out, int64_t n, int act) {
  griddep_wait();
  griddep_launch_dependents();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = glu_act(gate[i], act) * up[i];
}

}  // namespace

void glu(const float* gate, const float* up, float* out, int64_t n, int act, cudaStream_t s) {
  if (n > 0) launch_pdl(glu_kernel, ceil_div(n, 256), 256, 0, s, gate, up, out, n, act);
}

}  // namespace tilellm::cuda
