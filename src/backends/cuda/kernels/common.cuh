// Device helpers every CUDA kernel file shares: the device weight formats read block by block (the layouts
// of backends/device_rows.h, the same bytes the OpenCL and Vulkan kernels read), warp and block reductions,
// and the launch-size arithmetic.
//
// Formats (offsets in bytes from the row's start; nb = n_in / 32 blocks; rows start 16-byte aligned):
//   F32, F16   one element each (n_in need not be a multiple of 32)
//   Q4_0       [nb][16] codes, then [nb] half d:           w = d (c - 8) = d c - 8 d
//   Q4_1       codes as Q4_0, then [nb] (half d, half m):  w = d c + m
//   Q8_0       [nb][32] signed codes, then [nb] half d:    w = d c
//   INT4B64    codes as Q4_0, then (half d, half m) per 64 weights (block b's pair b / 2)
//   INT8B0     [nb][32] unsigned codes, then one (half d, half m) for the row
//   KQ8        [n_in] signed codes, then [n_in / 16] (float d, float m)
//   KQ4        codes as Q4_0, then [nb] (float d, float m)
//   Q4K        codes as Q4_0, then per 256 weights (half D, half Dmin, uint8 sc[8], uint8 mn[8]):
//              block b's d = D sc[b % 8], m = -Dmin mn[b % 8]
//   Q6K        [nb][16] the codes' low 4 bits as Q4_0's nibbles, [nb][2] words of their high 2 bits (word h
//              of block b: element 16 h + 4 t + i's at bits 8 i + 2 t), then per 256 weights (half D,
//              int8 sc[16], 2 bytes): half h of block b has d = D sc[(2 b + h) % 16], m = -32 d
// In the 4-bit formats element j < 16 of a block is the low nibble of code byte j and element 16 + j its
// high nibble: the 32-bit word t of a block's codes holds elements 4t .. 4t + 3 in its low nibbles and
// 16 + 4t .. 16 + 4t + 3 in its high ones.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <utility>

#include "kernels.h"

namespace tilellm::cuda {

__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}
__device__ __forceinline__ float f32_at(const uint8_t* p) {
  return *reinterpret_cast<const float*>(p);
}

constexpr bool fmt_nibbles(int f) {
  return f == kQ4_0 || f == kQ4_1 || f == kInt4B64 || f == kKq4 || f == kQ4K;
}
constexpr bool fmt_block(int f) {
  return f != kF32 && f != kF16;
}
// Bytes of a block's codes (Q6K: its low bits; the high bits follow all the blocks' low bits).
constexpr int fmt_code_bytes(int f) {
  return fmt_nibbles(f) || f == kQ6K ? 16 : 32;
}
// Whether a block's two halves of 16 have their own (d, m) pairs (block_pair gives the first, block_pair2
// the second): KQ8 and Q6K.
constexpr bool fmt_two_pairs(int f) {
  return f == kKq8 || f == kQ6K;
}
// Q6K: the bytes of code word t (elements 16 h + 4 t .. + 3) from its nibbles (w >> 4 h, masked) and its
// high bits' word.
__device__ __forceinline__ uint32_t q6k_word(uint32_t w, uint32_t high, int t, int h) {
  return ((w >> (4 * h)) & 0x0F0F0F0Fu) | ((high >> (2 * t)) & 0x03030303u) << 4;
}
// Whether the codes are signed bytes (Q8_0, KQ8); the others are unsigned (nibbles 0..15, INT8B0 0..255).
constexpr bool fmt_signed(int f) {
  return f == kQ8_0 || f == kKq8;
}

// The (d, m) pair of block b of a row (for KQ8: its first 16 weights' pair; kq8_pair2 the second's).
template <int F>
__device__ __forceinline__ void block_pair(const uint8_t* row, int nb, int b, float& d, float& m) {
  if constexpr (F == kQ4_0) {
    d = half_at(row + 16 * nb + 2 * b);
    m = -8.0f * d;
  } else if constexpr (F == kQ4_1) {
    d = half_at(row + 16 * nb + 4 * b);
    m = half_at(row + 16 * nb + 4 * b + 2);
  } else if constexpr (F == kQ8_0) {
    d = half_at(row + 32 * nb + 2 * b);
    m = 0.0f;
  } else if constexpr (F == kInt4B64) {
    d = half_at(row + 16 * nb + 4 * (b / 2));
    m = half_at(row + 16 * nb + 4 * (b / 2) + 2);
  } else if constexpr (F == kInt8B0) {
    d = half_at(row + 32 * nb);
    m = half_at(row + 32 * nb + 2);
  } else if constexpr (F == kKq8) {
    d = f32_at(row + 32 * nb + 16 * b);
    m = f32_at(row + 32 * nb + 16 * b + 4);
  } else if constexpr (F == kKq4) {
    d = f32_at(row + 16 * nb + 8 * b);
    m = f32_at(row + 16 * nb + 8 * b + 4);
  } else if constexpr (F == kQ4K) {
    const uint8_t* p = row + 16 * nb + 20 * (b / 8);
    d = half_at(p) * float(p[4 + b % 8]);
    m = -(half_at(p + 2) * float(p[12 + b % 8]));
  } else {  // kQ6K
    const uint8_t* p = row + 24 * nb + 20 * (b / 8);
    d = half_at(p) * float(int8_t(p[2 + (2 * b) % 16]));
    m = -32.0f * d;
  }
}
template <int F>
__device__ __forceinline__ void block_pair2(const uint8_t* row, int nb, int b, float& d, float& m) {
  static_assert(fmt_two_pairs(F));
  if constexpr (F == kKq8) {
    d = f32_at(row + 32 * nb + 16 * b + 8);
    m = f32_at(row + 32 * nb + 16 * b + 12);
  } else {
    const uint8_t* p = row + 24 * nb + 20 * (b / 8);
    d = half_at(p) * float(int8_t(p[2 + (2 * b + 1) % 16]));
    m = -32.0f * d;
  }
}

// Element j (< 32) of block b of a Q6K row: its 6-bit code.
__device__ __forceinline__ int q6k_code(const uint8_t* row, int nb, int b, int j) {
  const int h = j / 16, t = (j % 16) / 4, i = j % 4;
  const int lo = (row[16 * size_t(b) + j % 16] >> (4 * h)) & 15;
  const int hi = (row[16 * size_t(nb) + 8 * size_t(b) + 4 * h + i] >> (2 * t)) & 3;
  return lo | hi << 4;
}

// The code of element j (< 32) of a block whose codes start at `codes`.
template <int F>
__device__ __forceinline__ int block_code(const uint8_t* codes, int j) {
  if constexpr (fmt_nibbles(F)) {
    return j < 16 ? (codes[j] & 15) : (codes[j - 16] >> 4);
  } else if constexpr (fmt_signed(F)) {
    return int(int8_t(codes[j]));
  } else {
    return int(codes[j]);
  }
}

// Element i of a row of n elements, formed exactly as the format defines it.
template <int F>
__device__ __forceinline__ float row_at(const uint8_t* row, int n, int i) {
  if constexpr (F == kF32) {
    return f32_at(row + 4 * size_t(i));
  } else if constexpr (F == kF16) {
    return half_at(row + 2 * size_t(i));
  } else {
    const int nb = n / 32, b = i / 32, j = i % 32;
    float d, m;
    if constexpr (fmt_two_pairs(F)) {
      if (j < 16)
        block_pair<F>(row, nb, b, d, m);
      else
        block_pair2<F>(row, nb, b, d, m);
    } else {
      block_pair<F>(row, nb, b, d, m);
    }
    if constexpr (F == kQ6K) return d * float(q6k_code(row, nb, b, j) - 32);
    const int c = block_code<F>(row + size_t(fmt_code_bytes(F)) * b, j);
    if constexpr (F == kQ4_0) return d * float(c - 8);
    return d * float(c) + m;
  }
}

// Eight consecutive elements 8p .. 8p + 7 of block b (p < 4) of a row of n elements, exact; the float formats
// read past n as zeros.
template <int F>
__device__ __forceinline__ void row_eight(const uint8_t* row, int n, int b, int p, float* v) {
  if constexpr (!fmt_block(F)) {
    const int i0 = 32 * b + 8 * p;
    if (n % 8 == 0 && i0 < n) {
      // Rows of whole runs are multiples of 16 bytes (rows are packed from an aligned base): one or two
      // 16-byte loads instead of eight narrow ones, which left decode's float rows at a third of the
      // memory's bandwidth.
      if constexpr (F == kF16) {
        const uint4 q = *reinterpret_cast<const uint4*>(row + 2 * size_t(i0));
        const __half2* h = reinterpret_cast<const __half2*>(&q);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const float2 f = __half22float2(h[k]);
          v[2 * k] = f.x;
          v[2 * k + 1] = f.y;
        }
      } else {
        const float4* q = reinterpret_cast<const float4*>(row + 4 * size_t(i0));
        const float4 a = q[0], c = q[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = c.x, v[5] = c.y, v[6] = c.z, v[7] = c.w;
      }
      return;
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int i = i0 + k;
      v[k] = i < n ? row_at<F>(row, n, i) : 0.0f;
    }
  } else {
    const int nb = n / 32;
    float d, m;
    if constexpr (fmt_two_pairs(F)) {
      if (p < 2)
        block_pair<F>(row, nb, b, d, m);
      else
        block_pair2<F>(row, nb, b, d, m);
    } else {
      block_pair<F>(row, nb, b, d, m);
    }
    const uint8_t* codes = row + size_t(fmt_code_bytes(F)) * b;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if constexpr (F == kQ6K) {
        v[k] = d * float(q6k_code(row, nb, b, 8 * p + k) - 32);
        continue;
      }
      const int c = block_code<F>(codes, 8 * p + k);
      if constexpr (F == kQ4_0)
        v[k] = d * float(c - 8);
      else
        v[k] = d * float(c) + m;
    }
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum (or max) over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets the
// result. `red` is 32 floats of shared memory, free again when the call returns.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nw ? red[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nw ? red[lane] : -INFINITY;
  return warp_max(v);
}

// The activations' int8 rounding (kernels.h "Q8"), by the 32 lanes of a warp holding one block of 32
// consecutive values (lane l holds element l of the block): q = round(v / d) with d = max|v| / 127, written
// as v * (1 / d) so that the host's reference (backends/q8_round.h) repeats it bit for
// bit. qi: v's index in q8.q; bi: the block's index in q8.d (token * blocks a row + block).
__device__ __forceinline__ void quantize_block(float v, int64_t qi, int64_t bi, const Q8& q8) {
  const int lane = threadIdx.x & 31;
  const float d = warp_max(fabsf(v)) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const int q = int(roundf(v * id));
  q8.q[qi] = int8_t(q);
  int qs = q;
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) qs += __shfl_xor_sync(0xffffffffu, qs, o);  // within each half of 16
  if (lane == 0) q8.d[bi] = d;
  if ((lane & 15) == 0) q8.s[2 * bi + (lane >> 4)] = d * float(qs);
}

// A small integer (|i| < 2^22) as a float without the int -> float conversion unit (a quarter of the FMA
// rate on these GPUs): 0x4B400000 is 1.5 * 2^23, whose mantissa takes i exactly.
__device__ __forceinline__ float small_int_to_float(int i) {
  return __int_as_float(i + 0x4B400000) - 12582912.0f;
}

// The gated feed-forward's activation, as the CPU backend writes it (cpu/glu.cpp): SiLU x / (1 + e^-x);
// GELU 0.5 x (1 + tanh z) written as x / (1 + e^(-2z)), z = sqrt(2 / pi) (x + 0.044715 x^3). act 0 / 1.
__device__ __forceinline__ float glu_act(float x, int act) {
  if (act == 0) return x / (1.0f + expf(-x));
  const float z = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x / (1.0f + expf(-2.0f * z));
}

// RoPE's turn of the pair (a, b) by the table's (c, s): a c - b s, a s + b c, each product and sum rounded,
// never fused into an fma — the CPU backend's arithmetic bit for bit (cpu/rope.cpp). rope.cu and the q/k/v
// product's RoPE (matvec.cu) both turn pairs with it, so the two paths stay equal.
__device__ __forceinline__ void rope_turn(float& a, float& b, float c, float s) {
  const float ta = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  b = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
  a = ta;
}

// Asynchronous copies from global into shared memory (compute capability 8.0+): 16 bytes through L2 only,
// or 8 through L1; a group of them committed, then waited for until at most N younger groups are in
// flight.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Programmatic dependent launch (Hopper): every kernel is launched so that it may start while the kernel
// before it on the stream is still running (launch_pdl), and waits for that kernel's results with
// griddep_wait() before it reads anything a kernel wrote or writes anything at all; before the wait it may
// only read what no kernel writes (weights). A kernel lets the next one launch early by calling
// griddep_launch_dependents() at its start. Decode's short kernels then overlap the next product's weight
// loads instead of leaving the memory idle between launches. Both are no-ops on GPUs before Hopper and
// when the kernel was launched without the attribute.
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t shared, cudaStream_t s,
                Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = shared;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// The Q8 rounding of one block of 32 held four to a lane by eight consecutive lanes (lane % 8 == 0 first):
// the lane's four codes packed into a word, the block's scale d, and the code sum of the lane's half of 16
// (lanes 0-3 of the eight: the first half). Every lane of the warp must call it (the shuffles).
struct RoundedFour {
  uint32_t q;
  float d;
  int qs;
};
__device__ __forceinline__ RoundedFour round_four(float4 v) {
  float m = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const float d = m / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const int q0 = int(roundf(v.x * id)), q1 = int(roundf(v.y * id)), q2 = int(roundf(v.z * id)),
            q3 = int(roundf(v.w * id));
  int qs = q0 + q1 + q2 + q3;
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) qs += __shfl_xor_sync(0xffffffffu, qs, o);  // over each 16 elements
  return {uint32_t(q0 & 255) | uint32_t(q1 & 255) << 8 | uint32_t(q2 & 255) << 16 | uint32_t(q3 & 255) << 24,
          d, qs};
}

// quantize_block for values held four to a thread (round_four's lanes), v the lane's four (elements e ..
// e + 3 of q8.q, e a multiple of 4). Every lane of the warp must call it; `valid` false lanes (past the
// data) pass zeros and write nothing, and their 8-lane group must be wholly valid or wholly not.
__device__ __forceinline__ void quantize_four(float4 v, int64_t e, bool valid, const Q8& q8) {
  const int lane = threadIdx.x & 31;
  const RoundedFour r = round_four(v);
  if (!valid) return;
  *reinterpret_cast<uint32_t*>(q8.q + e) = r.q;
  if ((lane & 7) == 0) q8.d[e / 32] = r.d;
  if ((lane & 3) == 0) q8.s[e / 16] = r.d * float(r.qs);
}

__device__ __forceinline__ float sq4(float4 a) {
  return a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
}

// Threads of rmsnorm.cu's row kernel for rows of n floats (n % 4 == 0): a float4 each, a whole number of
// warps, at most 1024 (longer rows: thread t sums float4s t, t + 1024, ... in turn). The norm a product
// takes in its own launch (matvec.cu, MatvecJob::norm) sums in the same order, so both give the same bits.
__host__ __device__ constexpr int rmsnorm4_threads(int n) {
  const int w = (n / 4 + 31) / 32 * 32;
  return w < 32 ? 32 : w > 1024 ? 1024 : w;
}

inline unsigned ceil_div(int64_t a, int64_t b) {
  return unsigned((a + b - 1) / b);
}

// Calls f.template operator()<F>() with F the format number fmt as a compile-time constant.
template <class Fn>
void with_format(int fmt, Fn&& f) {
  switch (fmt) {
    case kF32:
      return f.template operator()<kF32>();
    case kF16:
      return f.template operator()<kF16>();
    case kQ4_0:
      return f.template operator()<kQ4_0>();
    case kQ4_1:
      return f.template operator()<kQ4_1>();
    case kQ8_0:
      return f.template operator()<kQ8_0>();
    case kInt4B64:
      return f.template operator()<kInt4B64>();
    case kInt8B0:
      return f.template operator()<kInt8B0>();
    case kKq8:
      return f.template operator()<kKq8>();
    case kKq4:
      return f.template operator()<kKq4>();
    case kQ4K:
      return f.template operator()<kQ4K>();
    default:
      return f.template operator()<kQ6K>();
  }
}

}  // namespace tilellm::cuda
