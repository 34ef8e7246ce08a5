// Elementwise adds: the residual add (acc += x) and a bias added to every row (x[r] += v).
#include "common.cuh"

namespace tilellm::cuda {
namespace {

__global__ void add_kernel(float* acc, const float* x, int64_t n, bool broken) {
  griddep_wait();
  griddep_launch_dependents();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) acc[i] = broken ? x[i] : acc[i] + x[i];
}

__global__ void add_rows_kernel(float* x, const float* v, int rows, int n) {
  griddep_wait();
  griddep_launch_dependents();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < int64_t(rows) * n) x[i] += v[i % n];
}

}  // namespace

void add(float* acc, const float* x, int64_t n, bool broken, cudaStream_t s) {
  if (n > 0) launch_pdl(add_kernel, ceil_div(n, 256), 256, 0, s, acc, x, n, broken);
}

void add_rows(float* x, const float* v, int rows, int n, cudaStream_t s) {
  const int64_t total = int64_t(rows) * n;
  if (total > 0) launch_pdl(add_rows_kernel, ceil_div(total, 256), 256, 0, s, x, v, rows, n);
}

}  // namespace tilellm::cuda
