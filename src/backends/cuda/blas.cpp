// cuBLAS opened at run time (blas.h). Only the types come from the toolkit's header; the functions are
// looked up in the library, so the binary has no link-time dependency on it.
#include "backends/cuda/blas.h"

#include <cublas_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

#include "base/error.h"

namespace tilellm::cuda {

struct Blas::Api {
  cublasStatus_t (*create)(cublasHandle_t*);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t);
  cublasStatus_t (*set_pointer_mode)(cublasHandle_t, cublasPointerMode_t);
  cublasStatus_t (*get_property)(libraryPropertyType, int*);
  const char* (*status_string)(cublasStatus_t);
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType_t, int, const void*, cudaDataType_t, int, const void*,
                            void*, cudaDataType_t, int, cublasComputeType_t, cublasGemmAlgo_t);
};

Blas::Blas(cudaStream_t stream) {
  const char* env = std::getenv("TILELLM_CUBLAS");
  const std::string file = env && *env ? env : fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  lib_ = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    status_ = fmt::format("{} not found: prompts use the int8 kernel", file);
    return;
  }
  api_ = new Api{};
  bool ok = true;
  auto need = [&](auto& fn, const char* n) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib_, n));
    ok = ok && fn != nullptr;
  };
  need(api_->create, "cublasCreate_v2");
  need(api_->destroy, "cublasDestroy_v2");
  need(api_->set_stream, "cublasSetStream_v2");
  need(api_->set_workspace, "cublasSetWorkspace_v2");
  need(api_->set_pointer_mode, "cublasSetPointerMode_v2");
  need(api_->get_property, "cublasGetProperty");
  need(api_->status_string, "cublasGetStatusString");
  need(api_->gemm_ex, "cublasGemmEx");
  if (!ok) {
    status_ = fmt::format("{} lacks a function this backend calls: prompts use the int8 kernel", file);
    return;
  }
  cublasHandle_t h = nullptr;
  cublasStatus_t st = api_->create(&h);
  if (st != CUBLAS_STATUS_SUCCESS) {
    status_ = fmt::format("cublasCreate failed ({}): prompts use the int8 kernel", api_->status_string(st));
    return;
  }
  st = api_->set_stream(h, stream);
  if (st == CUBLAS_STATUS_SUCCESS) st = api_->set_pointer_mode(h, CUBLAS_POINTER_MODE_DEVICE);
  if (st != CUBLAS_STATUS_SUCCESS) {
    api_->destroy(h);
    status_ = fmt::format("cuBLAS set-up failed ({}): prompts use the int8 kernel", api_->status_string(st));
    return;
  }
  handle_ = h;
  int v[3] = {};
  api_->get_property(MAJOR_VERSION, &v[0]);
  api_->get_property(MINOR_VERSION, &v[1]);
  api_->get_property(PATCH_LEVEL, &v[2]);
  status_ = fmt::format("cuBLAS {}.{}.{}", v[0], v[1], v[2]);
}

Blas::~Blas() {
  if (handle_) api_->destroy(static_cast<cublasHandle_t>(handle_));
  delete api_;
  if (lib_) dlclose(lib_);
}

void Blas::set_workspace(void* p, size_t bytes) {
  const cublasStatus_t st = api_->set_workspace(static_cast<cublasHandle_t>(handle_), p, bytes);
  if (st != CUBLAS_STATUS_SUCCESS) fail("CUDA: cublasSetWorkspace failed: {}", api_->status_string(st));
}

void Blas::gemm_f16(const void* a, int m, const void* b, int n, int k, const float* alpha, const float* beta,
                    float* y, int ldy) const {
  // Column-major, as cuBLAS sees these buffers: a is k x m (lda k), b is k x n (ldb k), y is m x n (ldy):
  // y = alpha a^T b + beta y.
  const cublasStatus_t st = api_->gemm_ex(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N, m,
                                          n, k, alpha, a, CUDA_R_16F, k, b, CUDA_R_16F, k, beta, y,
                                          CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    fail("CUDA: cublasGemmEx({} x {} x {}) failed: {}", m, n, k, api_->status_string(st));
}

}  // namespace tilellm::cuda
