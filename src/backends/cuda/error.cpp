// CUDA error reporting (error.h).
#include "backends/cuda/error.h"

#include "base/error.h"

namespace tilellm::cuda {

void check_failed(cudaError_t e, const std::string& call) {
  fail("CUDA: {} failed: {} ({})", call, cudaGetErrorName(e), cudaGetErrorString(e));
}

void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) check_failed(e, std::string("launching kernel ") + kernel);
}

}  // namespace tilellm::cuda
