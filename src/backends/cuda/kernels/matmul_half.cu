// The operands of the prompts' fp16 tensor-core GEMM (cuBLAS, ../blas.h): weight rows dequantized exactly
// (common.cuh row_eight) and rounded to fp16; activations scaled by a power of two that puts their largest
// magnitude in [2^14, 2^15) (inside fp16's range, whatever the model's activations reach), then rounded.
// One thread writes eight consecutive halves with one 16-byte store.
#include <cuda_fp16.h>

#include "common.cuh"

namespace tilellm::cuda {
namespace {

// backends/f16_round.h f16_scale_exponent (that header is the engine's, kept out of the kernels).
__device__ __forceinline__ int f16_scale_exponent(float m) {
  if (!(m > 0.0f) || !(m <= 3.4e38f)) return 0;
  const int e = 14 - ilogbf(m);
  return e < -110 ? -110 : e > 110 ? 110 : e;
}

__device__ __forceinline__ uint4 pack_eight(const float* v) {
  uint4 q;
  __half2* h = reinterpret_cast<__half2*>(&q);
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
  return q;
}

// out [rows][n] = rows r0 .. of w; one thread per eight elements (n % 8 == 0; block formats n % 32 == 0).
template <int F>
__global__ void weight_rows_kernel(Matrix w, int r0, int rows, uint4* out) {
  const int64_t groups = int64_t(w.n_in) / 8;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(rows) * groups) return;
  const int64_t r = i / groups;
  const int g = int(i % groups);
  const uint8_t* row = w.data + size_t(r0 + r) * w.row_bytes;
  float v[8];
  row_eight<F>(row, w.n_in, g / 4, g % 4, v);
  out[i] = pack_eight(v);
}

// work[0] = the bits of max |x| (non-negative floats order as their bits); work zeroed before.
__global__ void absmax_kernel(const float* x, int64_t n, unsigned* work) {
  float m = 0.0f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(x[i]));
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) atomicMax(work, __float_as_uint(m));
}

// out = fp16(x * 2^e) for e from work[0] (f16_scale_exponent); scale = {2^-e, 0}: the GEMM's alpha and beta.
__global__ void to_half_kernel(const float* x, int64_t groups, const unsigned* work, uint4* out,
                               float* scale) {
  const int e = f16_scale_exponent(__uint_as_float(*work));
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i == 0) scale[0] = ldexpf(1.0f, -e), scale[1] = 0.0f;
  if (i >= groups) return;
  float v[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = ldexpf(x[8 * i + k], e);  // x need not be 16-byte aligned
  out[i] = pack_eight(v);
}

}  // namespace

void weight_rows_f16(const Matrix& w, int r0, int rows, void* out, cudaStream_t s) {
  const int64_t threads = int64_t(rows) * (w.n_in / 8);
  if (threads == 0) return;
  with_format(w.fmt, [&]<int F>() {
    weight_rows_kernel<F><<<ceil_div(threads, 256), 256, 0, s>>>(w, r0, rows, static_cast<uint4*>(out));
  });
}

void to_f16_scaled(const float* x, int64_t n, void* out, float* scale, unsigned* work, cudaStream_t s) {
  cudaMemsetAsync(work, 0, sizeof(unsigned), s);
  const int64_t groups = n / 8;
  absmax_kernel<<<std::min<unsigned>(ceil_div(n, 256), 1024), 256, 0, s>>>(x, n, work);
  to_half_kernel<<<std::max<unsigned>(ceil_div(groups, 256), 1), 256, 0, s>>>(
      x, groups, work, static_cast<uint4*>(out), scale);
}

}  // namespace tilellm::cuda
