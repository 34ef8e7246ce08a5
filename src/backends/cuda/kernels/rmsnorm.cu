// RMSNorm, y = x / sqrt(mean(x^2) + eps) * w, one block per row; optionally the residual add before it
// (acc += x, then the norm of acc: add_rmsnorm) and the output quantized for the next products (Q8).
//
// Rows of a multiple of 4 floats (every model's) take rmsnorm4_kernel: up to 1024 threads a row, each
// holding up to 4 float4s in registers between the sum of squares and the output (16 384 floats a row),
// so a decode step's single row is one load and one store a thread; eight consecutive threads hold one
// block of 32 of the Q8 rounding; the norm's weights are loaded before waiting for the kernel before
// (common.cuh: programmatic dependent launch). Other rows take the plain kernel (a warp's 32 consecutive
// outputs one block).
#include "common.cuh"

namespace tilellm::cuda {
namespace {

template <bool Add, bool Quantize>
__global__ void rmsnorm_kernel(const float* x, const float* w, float* y, int n, float eps, float* acc,
                               Q8 q8) {
  __shared__ float red[32];
  griddep_wait();
  griddep_launch_dependents();
  const int64_t r = blockIdx.x;
  const float* xr = x + r * n;
  float* ar = Add ? acc + r * n : nullptr;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float v = xr[i];
    if constexpr (Add) {
      v += ar[i];
      ar[i] = v;
    }
    ss += v * v;
  }
  ss = block_sum(ss, red);  // its barrier also orders every read of x before any write of y (y may be x)
  const float inv = 1.0f / sqrtf(ss / float(n) + eps);
  const float* src = Add ? ar : xr;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = src[i] * inv * w[i];
    y[r * n + i] = v;
    // blockDim.x is a multiple of 32 and n of 32 here: a warp's i are one whole block.
    if constexpr (Quantize) quantize_block(v, r * n + i, (r * n + i) / 32, q8);
  }
}

constexpr int kHeld = 4;  // float4s a thread keeps in registers

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

template <bool Add, bool Quantize>
__global__ void __launch_bounds__(1024)
    rmsnorm4_kernel(const float* x, const float* w, float* y, int n, float eps, float* acc, Q8 q8) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const int n4 = n / 4, tid = threadIdx.x, T = blockDim.x;
  const float4* w4 = reinterpret_cast<const float4*>(w);
  // The norm's weights (no kernel writes them) before waiting for the kernel before: in decode their load
  // overlaps that kernel's end instead of following the sum of squares.
  float4 held_w[kHeld];
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const int i = tid + k * T;
    if (i < n4) held_w[k] = w4[i];
  }
  griddep_wait();
  griddep_launch_dependents();
  const float4* xr = reinterpret_cast<const float4*>(x + r * n);
  float4* ar = Add ? reinterpret_cast<float4*>(acc + r * n) : nullptr;
  float4* yr = reinterpret_cast<float4*>(y + r * n);
  float4 held[kHeld];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const int i = tid + k * T;
    held[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < n4) {
      float4 v = xr[i];
      if constexpr (Add) {
        v = add4(v, ar[i]);
        ar[i] = v;
      }
      held[k] = v;
      ss += sq4(v);
    }
  }
  for (int i = tid + kHeld * T; i < n4; i += T) {  // rows longer than the registers hold
    float4 v = xr[i];
    if constexpr (Add) {
      v = add4(v, ar[i]);
      ar[i] = v;
    }
    ss += sq4(v);
  }
  ss = block_sum(ss, red);  // its barrier orders every read of x before any write of y (y may be x)
  const float inv = 1.0f / sqrtf(ss / float(n) + eps);
  const float4* src = Add ? ar : xr;
  // Output: the held float4s, then (long rows) the rest read again; both loops uniform over the block, so
  // every lane reaches the quantization's shuffles.
  auto out = [&](int i, float4 s, const float4* held_g) {
    const bool in = i < n4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (in) {
      const float4 g = held_g ? *held_g : w4[i];
      v = make_float4(s.x * inv * g.x, s.y * inv * g.y, s.z * inv * g.z, s.w * inv * g.w);
      yr[i] = v;
    }
    if constexpr (Quantize) quantize_four(v, r * n + 4 * int64_t(i), in, q8);
  };
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    if (k * T < n4) out(tid + k * T, held[k], &held_w[k]);
  }
  for (int i0 = kHeld * T; i0 < n4; i0 += T) {
    const int i = i0 + tid;
    out(i, i < n4 ? src[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f), nullptr);
  }
}

}  // namespace

void rmsnorm(const float* x, const float* w, float* y, int rows, int n, float eps, float* acc, const Q8& q8,
             cudaStream_t s) {
  if (rows <= 0) return;
  const bool add = acc != nullptr, quantize = q8.q != nullptr;
  const bool aligned = ((uintptr_t(x) | uintptr_t(w) | uintptr_t(y) | uintptr_t(acc)) & 15) == 0;
  if (n % 4 == 0 && aligned) {
    // Threads: a float4 each, a whole number of warps, at most 1024 (longer rows hold 4 float4s a thread).
    const int threads = rmsnorm4_threads(n);
    if (add && quantize)
      launch_pdl(rmsnorm4_kernel<true, true>, rows, threads, 0, s, x, w, y, n, eps, acc, q8);
    else if (add)
      launch_pdl(rmsnorm4_kernel<true, false>, rows, threads, 0, s, x, w, y, n, eps, acc, q8);
    else if (quantize)
      launch_pdl(rmsnorm4_kernel<false, true>, rows, threads, 0, s, x, w, y, n, eps, acc, q8);
    else
      launch_pdl(rmsnorm4_kernel<false, false>, rows, threads, 0, s, x, w, y, n, eps, acc, q8);
    return;
  }
  const int threads = n >= 1024 ? 256 : n >= 256 ? 128 : 64;
  if (add && quantize)
    launch_pdl(rmsnorm_kernel<true, true>, rows, threads, 0, s, x, w, y, n, eps, acc, q8);
  else if (add)
    launch_pdl(rmsnorm_kernel<true, false>, rows, threads, 0, s, x, w, y, n, eps, acc, q8);
  else if (quantize)
    launch_pdl(rmsnorm_kernel<false, true>, rows, threads, 0, s, x, w, y, n, eps, acc, q8);
  else
    launch_pdl(rmsnorm_kernel<false, false>, rows, threads, 0, s, x, w, y, n, eps, acc, q8);
}

}  // namespace tilellm::cuda
