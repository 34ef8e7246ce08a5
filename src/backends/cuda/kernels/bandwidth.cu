// The read probe of gemv-bw: every byte of a buffer read once in 16-byte loads by a grid that fills the
// device (a few blocks per multiprocessor, grid-stride), the words folded into one value that only a
// condition no launch meets would store, so the compiler keeps every load.
#include "common.cuh"

namespace tilellm::cuda {
namespace {

__global__ void read_kernel(const uint4* p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u && threadIdx.x == 1023) *sink = acc;
}

}  // namespace

void read_probe(const void* p, size_t bytes, uint32_t* sink, int sms, cudaStream_t s) {
  read_kernel<<<unsigned(sms) * 4, 512, 0, s>>>(static_cast<const uint4*>(p), bytes / 16, sink);
}

}  // namespace tilellm::cuda
