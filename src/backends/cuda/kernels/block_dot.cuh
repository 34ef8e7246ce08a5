// The decode products' block arithmetic, shared by the one-token (matvec.cu) and few-token
// (matvec_tokens.cu) kernels: a block of 32 weights' codes as loaded, and its integer dot product with a
// block of int8 activations (dp4a: four int8 products and their sum per instruction).
#pragma once

#include "common.cuh"

namespace tilellm::cuda {

// dp4a of unsigned bytes (INT8B0's codes) with signed ones.
__device__ __forceinline__ int dp4a_us(uint32_t a, uint32_t b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// A block's codes as loaded: one 16-byte vector (4-bit formats) or two (byte formats; Q6K: its low bits,
// then its two words of high bits in v[1].x, v[1].y).
template <int F>
struct Codes {
  uint4 v[fmt_nibbles(F) ? 1 : 2];
};

template <int F>
__device__ __forceinline__ void load_codes(const uint8_t* row, int nb, int b, Codes<F>& c) {
  const uint4* p = reinterpret_cast<const uint4*>(row + size_t(fmt_code_bytes(F)) * b);
  c.v[0] = p[0];
  if constexpr (F == kQ6K) {
    const uint2 h = *reinterpret_cast<const uint2*>(row + 16 * size_t(nb) + 8 * size_t(b));
    c.v[1] = make_uint4(h.x, h.y, 0u, 0u);
  } else if constexpr (!fmt_nibbles(F)) {
    c.v[1] = p[1];
  }
}

__device__ __forceinline__ uint32_t word(const uint4& v, int t) {
  return t == 0 ? v.x : t == 1 ? v.y : t == 2 ? v.z : v.w;
}

// sum_j c_j q_j over a block (two halves of 16 for KQ8 and Q6K, whose halves have their own scales): xa,
// xb the activation block's bytes 0..15 and 16..31.
template <int F>
__device__ __forceinline__ void block_dot(const Codes<F>& c, const uint4& xa, const uint4& xb, int& lo,
                                          int& hi) {
  lo = 0;
  hi = 0;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    if constexpr (fmt_nibbles(F)) {
      const uint32_t w = word(c.v[0], t);
      lo = __dp4a(int(w & 0x0F0F0F0Fu), int(word(xa, t)), lo);
      hi = __dp4a(int((w >> 4) & 0x0F0F0F0Fu), int(word(xb, t)), hi);
    } else if constexpr (F == kQ6K) {
      const uint32_t w = word(c.v[0], t);
      lo = __dp4a(int(q6k_word(w, c.v[1].x, t, 0)), int(word(xa, t)), lo);
      hi = __dp4a(int(q6k_word(w, c.v[1].y, t, 1)), int(word(xb, t)), hi);
    } else if constexpr (F == kInt8B0) {
      lo = dp4a_us(word(c.v[0], t), word(xa, t), lo);
      hi = dp4a_us(word(c.v[1], t), word(xb, t), hi);
    } else {
      lo = __dp4a(int(word(c.v[0], t)), int(word(xa, t)), lo);
      hi = __dp4a(int(word(c.v[1], t)), int(word(xb, t)), hi);
    }
  }
}

// A 4-bit block's sum_j c_j q_j times 16, without shifting the high nibbles down: their bytes are masked in
// place (16 times the nibble, taken as unsigned), so 16 lo + hi16 = 16 (lo + hi) and the caller folds the
// 1/16 into the activations' scale (a power of two: exact while that scale is not subnormal).
template <int F>
__device__ __forceinline__ int block_dot16(const Codes<F>& c, const uint4& xa, const uint4& xb) {
  static_assert(fmt_nibbles(F));
  int lo = 0, hi16 = 0;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const uint32_t w = word(c.v[0], t);
    lo = __dp4a(int(w & 0x0F0F0F0Fu), int(word(xa, t)), lo);
    hi16 = dp4a_us(w & 0xF0F0F0F0u, word(xb, t), hi16);
  }
  return 16 * lo + hi16;
}

// Launch-wide numbering of a job's blocks: matrix i takes blocks [first[i], first[i + 1]).
struct JobLayout {
  int first[4];
};

}  // namespace tilellm::cuda
