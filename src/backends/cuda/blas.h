// cuBLAS, opened at run time: the fp16 tensor-core GEMM of the prompt products (matmul.cpp "half GEMM").
// The library (libcublas.so.<major of the toolkit built with>, or the file TILELLM_CUBLAS names) is looked
// for when the backend starts; a machine without it keeps the backend's own int8 prompt kernel, and
// status() says which. The handle computes on the backend's stream, in a workspace the backend allocated
// (cuBLAS then allocates nothing while ops run), with alpha and beta read from device memory (the
// activations' scale is found on the device: kernels.h to_f16_scaled).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace tilellm::cuda {

class Blas {
 public:
  explicit Blas(cudaStream_t stream);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  bool available() const { return handle_ != nullptr; }
  // "cuBLAS 13.1.0" or why it is not used.
  const std::string& status() const { return status_; }

  void set_workspace(void* p, size_t bytes);

  // y [n][ldy] (row-major float, the first m of each row written) = alpha * b [n][k] times a [m][k]^T +
  // beta * y: a and b fp16 rows (k a multiple of 8, both 16-byte aligned), fp32 accumulation on the tensor
  // cores; alpha and beta are device floats.
  void gemm_f16(const void* a, int m, const void* b, int n, int k, const float* alpha, const float* beta,
                float* y, int ldy) const;

 private:
  struct Api;
  void* lib_ = nullptr;
  Api* api_ = nullptr;
  void* handle_ = nullptr;
  std::string status_;
};

}  // namespace tilellm::cuda
