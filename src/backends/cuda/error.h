// CUDA errors as the engine reports them: the call, the error's name and the runtime's description, e.g.
// "CUDA: cudaMalloc(1073741824 bytes) failed: cudaErrorMemoryAllocation (out of memory)".
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace tilellm::cuda {

[[noreturn]] void check_failed(cudaError_t e, const std::string& call);

inline void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) check_failed(e, call);
}

// The launch just made: throws with the kernel's name when the launch failed (a bad configuration, or an
// error left by an earlier asynchronous failure).
void check_launch(const char* kernel);

}  // namespace tilellm::cuda
