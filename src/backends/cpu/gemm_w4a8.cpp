// W4A8 (our "int4a8-gemm": per-channel uint4 weights, int8 activations) and what every quantized mode
// shares: the run-time activation quantization, the dequantization used by references, and the
// multithreaded driver that hands groups of 16-channel tiles to the kernel of the weights' bit width.
#include <algorithm>
#include <cmath>

#include "bench/gemm_qkernel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm::gemm {

float QuantMatrix::dequantize(int n, int k) const {
  const int t = n / kTileN, c = n % kTileN, b = k / block;
  const uint16_t* pb = params.as<uint16_t>() + (size_t(t) * nblocks + b) * 2 * kTileN;
  const int u = bits == 8   ? detail::code_at<8>(*this, n, k)
                : bits == 4 ? detail::code_at<4>(*this, n, k)
                : bits == 3 ? detail::code_at<3>(*this, n, k)
                            : detail::code_at<2>(*this, n, k);
  return float(u) * fp16_to_fp32(pb[c]) + fp16_to_fp32(pb[kTileN + c]);
}

QuantMatrix quantize_bits(const float* W, int K, int N, int bits, int block) {
  switch (bits) {
    case 8:
      return quantize_int8(W, K, N, block);
    case 4:
      return quantize_int4(W, K, N, block);
    case 3:
      return quantize_int3(W, K, N, block);
    case 2:
      return quantize_int2(W, K, N, block);
    default:
      fail("gemm: weights of {} bits are not supported (8, 4, 3 or 2)", bits);
  }
}

void QuantActs::resize(int m, const QuantMatrix& w) {
  if (m != M || w.Kp != Kp || w.block != block) {
    M = m;
    Kp = w.Kp;
    block = w.block;
    nblocks = w.nblocks;
    q = AlignedBuffer(size_t(M) * Kp);
    sums = AlignedBuffer(size_t(M) * nblocks * sizeof(int32_t));
    scales = AlignedBuffer(size_t(M) * sizeof(float));
  }
}

namespace {

// One row of A into int8 codes with one scale (the row's max |a| / 127), codes past K zeroed, and the codes'
// sum per block. Written for the vectorizer: the max over 16 lanes, rounding by the 1.5 * 2^23 trick (for
// |v| <= 127, (v + 2^23 * 1.5) - 2^23 * 1.5 is v rounded to the nearest integer, ties to even: nearbyint's
// result in the default rounding mode, without a library call), the clamp before the rounding (the same
// codes: |a / s| exceeds 127 by at most a rounding error). This ran as a scalar loop of nearbyint calls and
// took as long as the 8-bit GEMM itself at N = 1024 (3.3 ms of 6.8 at M = 512, K = 2560, 2 threads).
//
// max_k |a[k]|, in 16 lanes for the vectorizer (the portable path).
inline float row_absmax_portable(const float* a, int K) {
  float lanes[16] = {};
  int k = 0;
  for (; k + 16 <= K; k += 16) {
    for (int j = 0; j < 16; ++j) lanes[j] = std::max(lanes[j], std::fabs(a[k + j]));
  }
  float amax = 0.0f;
  for (int j = 0; j < 16; ++j) amax = std::max(amax, lanes[j]);
  for (; k < K; ++k) amax = std::max(amax, std::fabs(a[k]));
  return amax;
}

// The row's codes past K zeroed and the codes' sum per block.
[[gnu::always_inline]] inline void finish_row(int K, int Kp, int block, int nblocks, int8_t* q,
                                              int32_t* sums) {
  for (int k = K; k < Kp; ++k) q[k] = 0;
  for (int bl = 0; bl < nblocks; ++bl) {
    int32_t sum = 0;
    for (int j = bl * block; j < (bl + 1) * block; ++j) sum += q[j];
    sums[bl] = sum;
  }
}

void quantize_row_portable(const float* a, int K, int Kp, int block, int nblocks, int8_t* q, float* scale,
                           int32_t* sums) {
  const float amax = row_absmax_portable(a, K);
  const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
  const float inv = 1.0f / s;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  for (int k = 0; k < K; ++k) {
    const float v = std::min(std::max(a[k] * inv, -127.0f), 127.0f);
    q[k] = int8_t(int((v + kRound) - kRound));
  }
  *scale = s;
  finish_row(K, Kp, block, nblocks, q, sums);
}

#if defined(__x86_64__)
// clamp(x * inv, -127, 127) rounded to int32, nearest even.
__attribute__((target("avx512f"))) inline __m512i row_codes(__m512 x, __m512 inv) {
  // The maskz forms with a full mask: GCC 12 warns about the undefined pass-through of the plain ones.
  const __m512 v =
      _mm512_maskz_min_ps(0xffff, _mm512_maskz_max_ps(0xffff, _mm512_mul_ps(x, inv), _mm512_set1_ps(-127.0f)),
                          _mm512_set1_ps(127.0f));
  return _mm512_maskz_cvtps_epi32(0xffff, v);
}

// The same codes with intrinsics: GCC 12 left the portable max loop as 16 scalar vmaxss chains (a fifth of
// the row's time) and the rounding loop full of mask juggling. vcvtps2dq rounds to nearest even in the
// default rounding mode, as nearbyint and the 1.5 * 2^23 trick do, so the codes are identical (tested).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_row_avx512(const float* a, int K, int Kp,
                                                                              int block, int nblocks,
                                                                              int8_t* q, float* scale,
                                                                              int32_t* sums) {
  const int body = K / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (K - body)) - 1u);
  __m512 m = _mm512_abs_ps(_mm512_maskz_loadu_ps(tail, a + body));
  for (int k = 0; k < body; k += 16)
    m = _mm512_maskz_max_ps(0xffff, m, _mm512_abs_ps(_mm512_loadu_ps(a + k)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float amax = 0.0f;
  for (float x : lanes) amax = std::max(amax, x);
  const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
  const __m512 inv = _mm512_set1_ps(1.0f / s);
  for (int k = 0; k < body; k += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k),
                     _mm512_maskz_cvtsepi32_epi8(0xffff, row_codes(_mm512_loadu_ps(a + k), inv)));
  }
  if (tail)
    _mm512_mask_cvtsepi32_storeu_epi8(q + body, tail, row_codes(_mm512_maskz_loadu_ps(tail, a + body), inv));
  *scale = s;
  finish_row(K, Kp, block, nblocks, q, sums);
}
#endif

}  // namespace

void quantize_acts(const float* A, int M, int K, QuantActs& out, ThreadPool* pool, Isa isa) {
  auto* row_fn = &quantize_row_portable;
#if defined(__x86_64__)
  if (isa == Isa::kAvx512Vnni && best_isa() == Isa::kAvx512Vnni) row_fn = &quantize_row_avx512;
#else
  (void)isa;
#endif
  auto body = [&](int64_t b, int64_t e, int) {
    for (int64_t m = b; m < e; ++m) {
      row_fn(A + size_t(m) * K, K, out.Kp, out.block, out.nblocks, out.q.as<int8_t>() + size_t(m) * out.Kp,
             out.scales.as<float>() + m, out.sums.as<int32_t>() + size_t(m) * out.nblocks);
    }
  };
  if (pool && pool->size() > 1) {
    pool->parallel_for(M, 1, [&](int64_t b, int64_t e, int t) { body(b, e, t); });
  } else {
    body(0, M, 0);
  }
}

void gemm_quant(const QuantMatrix& w, const QuantActs& a, float* C, ThreadPool* pool, Isa isa) {
  const int tiles = w.Np / kTileN;
  const int G = w.bits == 8   ? detail::QShape<8>::kTiles
                : w.bits == 4 ? detail::QShape<4>::kTiles
                : w.bits == 3 ? detail::QShape<3>::kTiles
                              : detail::QShape<2>::kTiles;
  const int groups = (tiles + G - 1) / G;
  auto body = [&](int64_t b, int64_t e, int) {
    const int t0 = int(b) * G, t1 = std::min(tiles, int(e) * G);
    switch (w.bits) {
      case 8:
        return gemm_q8_tiles(w, a, C, 0, a.M, t0, t1, isa);
      case 4:
        return gemm_q4_tiles(w, a, C, 0, a.M, t0, t1, isa);
      case 3:
        return gemm_q3_tiles(w, a, C, 0, a.M, t0, t1, isa);
      default:
        return gemm_q2_tiles(w, a, C, 0, a.M, t0, t1, isa);
    }
  };
  if (pool && pool->size() > 1) {
    pool->parallel_for(groups, 1, [&](int64_t b, int64_t e, int t) { body(b, e, t); });
  } else {
    body(0, groups, 0);
  }
}

}  // namespace tilellm::gemm
