// The quantized GEMM kernel shared by the 8-, 4-, 3- and 2-bit weight modes (see bench/gemm.h for the math
// and the layouts). Included by gemm_int8b0.cpp (BITS = 8), gemm_int4b64.cpp (4) and gemm_lowbit.cpp (3, 2);
// they differ only in how one group of codes becomes zmm registers of 16 channels x 4 k unsigned bytes.
//
// AVX-512 VNNI register tile (QShape below): per 4 k, one weight zmm per channel tile, one broadcast of 4
// activation bytes per row, and one vpdpbusd per (row, tile) into int32 accumulators; at each block end the
// int32 sums are turned into float and folded with the block's scale and offset. Every row block re-reads
// the tile group's codes, which stay in L2 (three 16-channel tiles at K = 9728 are 456 KiB at 8 bits).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bench/gemm.h"
#include "format/error.h"
#include "format/fp16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm::gemm::detail {

// Bytes of packed codes per group and k per group.
template <int BITS>
struct QGroup {
  static_assert(BITS == 8 || BITS == 4 || BITS == 3 || BITS == 2, "8, 4, 3 or 2 bits");
  static constexpr int kK = BITS == 8 ? 4 : BITS == 4 ? 8 : 16;
  static constexpr int kBytes = BITS == 3 ? 96 : 64;
};

// Register tile of the AVX-512 kernel: rows x 16-channel tiles. 8-bit: 8 x 3 (24 int32 accumulators in the
// k loop, 3 weight loads and 8 broadcasts per 24 vpdpbusd); 4-bit: 8 x 2 (16 int32 accumulators and four
// code registers for the nibble split; the float sums of the blocks live in C, see q4_micro); 3- and 2-bit:
// 4 x 2 (float and int32 accumulators in registers; these widths serve gemv-bw's M = 1 rows). The
// multithreaded driver hands out whole groups of kTiles tiles.
template <int BITS>
struct QShape {
  static constexpr int kRows = BITS >= 4 ? 8 : 4;
  static constexpr int kTiles = BITS == 8 ? 3 : 2;
};

// Code u[n,k] from the packed layout.
template <int BITS>
inline int code_at(const QuantMatrix& w, int n, int k) {
  const int t = n / kTileN, c = n % kTileN;
  const uint8_t* codes = w.codes.as<uint8_t>();
  if constexpr (BITS == 8) {
    return codes[((size_t(t) * (w.Kp / 4) + k / 4) * kTileN + c) * 4 + k % 4];
  } else if constexpr (BITS == 4) {
    const uint8_t v = codes[(size_t(t) * (w.Kp / 8) + k / 8) * 64 + c * 4 + k % 4];
    return (k % 8) < 4 ? (v & 15) : (v >> 4);
  } else {
    const uint8_t* grp = codes + (size_t(t) * (w.Kp / 16) + k / 16) * QGroup<BITS>::kBytes;
    const int j = c * 4 + k % 4, s = (k % 16) / 4;
    const int low = (grp[j] >> (2 * s)) & 3;
    if constexpr (BITS == 2) return low;
    return low | (((grp[64 + 8 * s + j / 8] >> (j % 8)) & 1) << 2);
  }
}

template <int BITS>
void q_tiles_scalar(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1) {
  const int8_t* qa = a.q.as<int8_t>();
  const int32_t* sums = a.sums.as<int32_t>();
  const float* sa = a.scales.as<float>();
  const uint16_t* params = w.params.as<uint16_t>();
  for (int t = t0; t < t1; ++t) {
    const int nc = std::min(kTileN, w.N - t * kTileN);
    for (int m = m0; m < m1; ++m) {
      float acc[kTileN] = {};
      for (int b = 0; b < w.nblocks; ++b) {
        const uint16_t* pb = params + (size_t(t) * w.nblocks + b) * 2 * kTileN;
        for (int c = 0; c < nc; ++c) {
          int32_t isum = 0;
          const int n = t * kTileN + c;
          for (int k = b * w.block; k < (b + 1) * w.block; ++k) {
            isum += code_at<BITS>(w, n, k) * int32_t(qa[size_t(m) * a.Kp + k]);
          }
          acc[c] += float(isum) * fp16_to_fp32(pb[c]);
          acc[c] += float(sums[size_t(m) * a.nblocks + b]) * fp16_to_fp32(pb[kTileN + c]);
        }
      }
      for (int c = 0; c < nc; ++c) C[size_t(m) * w.N + t * kTileN + c] = sa[m] * acc[c];
    }
  }
}

#if defined(__x86_64__)
#define TILELLM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")))

// acc += u8(w) . s8(x) per 32-bit lane. Inline asm rather than _mm512_dpbusd_epi32: GCC 12 copies the
// accumulator around the builtin (and spills), which halved the kernel's throughput.
TILELLM_AVX512 inline __m512i dpbusd(__m512i acc, __m512i w, __m512i x) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(x));
  return acc;
}

template <int MR, int NT>
TILELLM_AVX512 inline void q4_micro(const QuantMatrix& w, const QuantActs& a, float* C, int m, int t);

// One group of 8 k of the 4-bit kernels: per tile j the 64 code bytes at g0 + j * tile_stride (prefetched PF
// bytes ahead when PF > 0) split into their low and high nibbles (two zmm of 16 channels x 4 k), each
// feeding one vpdpbusd per row r with activations qa[r * lda + 8g ..]: 4 bytes for the low nibbles, the next
// 4 for the high ones.
template <int MR, int NT, int PF>
TILELLM_AVX512 inline void q4_group(const uint8_t* g0, size_t tile_stride, const int8_t* qa, int lda, int g,
                                    __m512i nib, __m512i (&iacc)[MR][NT]) {
  __m512i lo[NT], hi[NT];
  for (int j = 0; j < NT; ++j) {
    const uint8_t* cj = g0 + j * tile_stride;
    if constexpr (PF > 0) _mm_prefetch(reinterpret_cast<const char*>(cj + PF), _MM_HINT_T0);
    const __m512i v = _mm512_load_si512(cj);
    lo[j] = _mm512_and_si512(v, nib);
    hi[j] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
  }
  for (int r = 0; r < MR; ++r) {
    int32_t x0, x1;
    std::memcpy(&x0, qa + size_t(r) * lda + g * 8, 4);
    std::memcpy(&x1, qa + size_t(r) * lda + g * 8 + 4, 4);
    const __m512i a0 = _mm512_set1_epi32(x0), a1 = _mm512_set1_epi32(x1);
    for (int j = 0; j < NT; ++j) {
      iacc[r][j] = dpbusd(iacc[r][j], lo[j], a0);
      iacc[r][j] = dpbusd(iacc[r][j], hi[j], a1);
    }
  }
}

// One group of 16 k of the 3- and 2-bit kernels: per tile j the group's bytes at g0 + j * tile_stride; for
// each s = 0..3 the two bits 2s, 2s+1 of every code byte (and for 3 bits the third bit, set from the 64-bit
// mask s) make a zmm of 16 channels x 4 k, which feeds one vpdpbusd per row r with activations
// qa[r * lda + 16g + 4s ..].
template <int BITS, int MR, int NT>
TILELLM_AVX512 inline void qlow_group(const uint8_t* g0, size_t tile_stride, const int8_t* qa, int lda, int g,
                                      __m512i (&iacc)[MR][NT]) {
  const __m512i two_bits = _mm512_set1_epi8(3), third = _mm512_set1_epi8(4);
  __m512i v[NT];
  // Unaligned loads: a 3-bit group is 96 bytes, so every other one starts half way into a cache line.
  for (int j = 0; j < NT; ++j) v[j] = _mm512_loadu_si512(g0 + j * tile_stride);
  for (int s = 0; s < 4; ++s) {
    __m512i u[NT];
    for (int j = 0; j < NT; ++j) {
      // A 16-bit shift moves bits of the high byte into the low one's top, above the two bits kept.
      u[j] = _mm512_and_si512(_mm512_srli_epi16(v[j], unsigned(2 * s)), two_bits);
      if constexpr (BITS == 3) {
        uint64_t hi;
        std::memcpy(&hi, g0 + j * tile_stride + 64 + 8 * s, 8);
        u[j] = _mm512_or_si512(u[j], _mm512_maskz_mov_epi8(__mmask64(hi), third));
      }
    }
    for (int r = 0; r < MR; ++r) {
      int32_t x;
      std::memcpy(&x, qa + size_t(r) * lda + g * 16 + 4 * s, 4);
      const __m512i av = _mm512_set1_epi32(x);
      for (int j = 0; j < NT; ++j) iacc[r][j] = dpbusd(iacc[r][j], u[j], av);
    }
  }
}

// MR rows starting at row m, NT tiles starting at tile t.
template <int BITS, int MR, int NT>
TILELLM_AVX512 inline void q_micro(const QuantMatrix& w, const QuantActs& a, float* C, int m, int t) {
  // 4-bit weights with more than one row take q4_micro; the single-row GEMV stays here (its code streams
  // are prefetched, and with one row the float accumulators fit in registers anyway).
  if constexpr (BITS == 4 && MR > 1) return q4_micro<MR, NT>(w, a, C, m, t);
  constexpr int GK = QGroup<BITS>::kK, GB = QGroup<BITS>::kBytes;
  const int groups_per_tile = w.Kp / GK;
  const uint8_t* codes = w.codes.as<uint8_t>();
  const uint16_t* params = w.params.as<uint16_t>();
  const int8_t* qa = a.q.as<int8_t>() + size_t(m) * a.Kp;
  const int32_t* sums = a.sums.as<int32_t>() + size_t(m) * a.nblocks;
  const __m512i nib = _mm512_set1_epi8(15);
  __m512 facc[MR][NT];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NT; ++j) facc[r][j] = _mm512_setzero_ps();
  for (int b = 0; b < w.nblocks; ++b) {
    __m512i iacc[MR][NT];
    for (int r = 0; r < MR; ++r)
      for (int j = 0; j < NT; ++j) iacc[r][j] = _mm512_setzero_si512();
    const int g0 = b * w.block / GK, g1 = (b + 1) * w.block / GK;
    for (int g = g0; g < g1; ++g) {
      if constexpr (MR == 1) {
        // GEMV: each code byte is read once, from memory; keep the tiles' streams fetched 2 KiB ahead (the
        // engine's tiled decode kernel does the same, tiled_matmul_avx512.cpp, for the measured reason).
        // A line per 64 bytes of a group (a 3-bit group is 96: two lines every other group).
        for (int j = 0; j < NT; ++j) {
          const char* ahead =
              reinterpret_cast<const char*>(codes + (size_t(t + j) * groups_per_tile + g) * GB + 2048);
          _mm_prefetch(ahead, _MM_HINT_T0);
          if constexpr (GB > 64) _mm_prefetch(ahead + 64, _MM_HINT_T0);
        }
      }
      if constexpr (BITS == 8) {
        __m512i wv[NT];
        for (int j = 0; j < NT; ++j) {
          const uint8_t* cj = codes + (size_t(t + j) * groups_per_tile + g) * 64;
          // Several rows: the codes come from L3 once per row block (M = 8: the only block); fetch them 512
          // bytes ahead, as q4_micro does. Measured at M = 8, 2 threads, five shapes alternating with the
          // binary without it (docs/GEMM_SPEED.md 17:45): 711-841 against 389-778 GFLOPS (256 and 1024
          // bytes ahead were no better than 512).
          if constexpr (MR > 1) _mm_prefetch(reinterpret_cast<const char*>(cj + 512), _MM_HINT_T0);
          wv[j] = _mm512_load_si512(cj);
        }
        for (int r = 0; r < MR; ++r) {
          int32_t x;
          std::memcpy(&x, qa + size_t(r) * a.Kp + g * 4, 4);
          const __m512i av = _mm512_set1_epi32(x);
          for (int j = 0; j < NT; ++j) iacc[r][j] = dpbusd(iacc[r][j], wv[j], av);
        }
      } else if constexpr (BITS == 4) {
        // MR == 1 only (more rows take q4_micro); its streams are prefetched above.
        q4_group<MR, NT, 0>(codes + (size_t(t) * groups_per_tile + g) * 64, size_t(groups_per_tile) * 64, qa,
                            a.Kp, g, nib, iacc);
      } else {
        qlow_group<BITS, MR, NT>(codes + (size_t(t) * groups_per_tile + g) * GB, size_t(groups_per_tile) * GB,
                                 qa, a.Kp, g, iacc);
      }
    }
    for (int j = 0; j < NT; ++j) {
      const uint16_t* pb = params + (size_t(t + j) * w.nblocks + b) * 2 * kTileN;
      const __m512 sc =
          _mm512_maskz_cvtph_ps(0xffff, _mm256_load_si256(reinterpret_cast<const __m256i*>(pb)));
      const __m512 of =
          _mm512_maskz_cvtph_ps(0xffff, _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + kTileN)));
      for (int r = 0; r < MR; ++r) {
        facc[r][j] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, iacc[r][j]), sc, facc[r][j]);
        facc[r][j] = _mm512_fmadd_ps(_mm512_set1_ps(float(sums[size_t(r) * a.nblocks + b])), of, facc[r][j]);
      }
    }
  }
  const float* sa = a.scales.as<float>() + m;
  for (int r = 0; r < MR; ++r) {
    for (int j = 0; j < NT; ++j) {
      const int nc = std::min(kTileN, w.N - (t + j) * kTileN);
      const __mmask16 mk = __mmask16((1u << nc) - 1u);
      _mm512_mask_storeu_ps(C + size_t(m + r) * w.N + size_t(t + j) * kTileN, mk,
                            _mm512_mul_ps(_mm512_set1_ps(sa[r]), facc[r][j]));
    }
  }
}

// The 4-bit kernel: MR rows starting at row m, NT tiles starting at tile t, all of K. Per group of 8 k, one
// 64-byte load per tile is split into its low and high nibbles (two zmm of 16 channels x 4 k, see
// QuantMatrix) and each feeds one vpdpbusd per row. The int32 sums of a block are folded into float at the
// block end, C[r][j] += float(isum) * scale + float(block sum of row r) * offset, with C itself as the float
// accumulator (an L1-resident tile) rather than registers; the row scale sa is applied once at the end. That
// leaves the registers to MR x NT = 16 int32 accumulators (the 4 x 2 tile before kept 8 float accumulators
// live beside 8 int32 ones), so each code load and nibble split feeds 8 rows instead of 4 and 16 independent
// vpdpbusd chains run per block instead of 8. Measured on the kernel alone (one thread, K = 2560, codes in
// L2): 471-482 against 391-420 GOPS at M = 8, 460-472 against 409-425 at M = 128. The code streams are
// prefetched one block (512 bytes) ahead: with the codes in L3 (N = 4096, M = 8) 432-449 against 395-413
// GOPS, in L2 no change beyond the noise (1 and 2 KiB ahead were no better).
template <int MR, int NT>
TILELLM_AVX512 inline void q4_micro(const QuantMatrix& w, const QuantActs& a, float* C, int m, int t) {
  const size_t tile_bytes = size_t(w.Kp / 8) * 64;  // codes of one tile: [Kp/8][64]
  const uint8_t* codes = w.codes.as<uint8_t>() + size_t(t) * tile_bytes;
  const uint16_t* params = w.params.as<uint16_t>() + size_t(t) * w.nblocks * 2 * kTileN;
  const int8_t* qa = a.q.as<int8_t>() + size_t(m) * a.Kp;
  const int32_t* sums = a.sums.as<int32_t>() + size_t(m) * a.nblocks;
  const size_t ldc = size_t(w.N);
  float* c = C + size_t(m) * ldc + size_t(t) * kTileN;
  __mmask16 mask[NT];
  for (int j = 0; j < NT; ++j) mask[j] = __mmask16((1u << std::min(kTileN, w.N - (t + j) * kTileN)) - 1u);
  const __m512i nib = _mm512_set1_epi8(15);
  const int gpb = w.block / 8;  // groups per block
  for (int b = 0; b < w.nblocks; ++b) {
    __m512i iacc[MR][NT];
    for (int r = 0; r < MR; ++r)
      for (int j = 0; j < NT; ++j) iacc[r][j] = _mm512_setzero_si512();
    for (int g = b * gpb; g < (b + 1) * gpb; ++g) {
      q4_group<MR, NT, 512>(codes + size_t(g) * 64, tile_bytes, qa, a.Kp, g, nib, iacc);  // one block ahead
    }
    __m512 sc[NT], of[NT];
    for (int j = 0; j < NT; ++j) {
      const uint16_t* pb = params + (size_t(j) * w.nblocks + b) * 2 * kTileN;
      sc[j] = _mm512_maskz_cvtph_ps(0xffff, _mm256_load_si256(reinterpret_cast<const __m256i*>(pb)));
      of[j] = _mm512_maskz_cvtph_ps(0xffff, _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + kTileN)));
    }
    for (int r = 0; r < MR; ++r) {
      const __m512 asum =
          _mm512_maskz_cvtepi32_ps(0xffff, _mm512_set1_epi32(sums[size_t(r) * a.nblocks + b]));
      for (int j = 0; j < NT; ++j) {
        float* cr = c + size_t(r) * ldc + j * kTileN;
        const __m512 prev = b == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[j], cr);
        const __m512 f = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, iacc[r][j]), sc[j], prev);
        _mm512_mask_storeu_ps(cr, mask[j], _mm512_fmadd_ps(asum, of[j], f));
      }
    }
  }
  const float* sa = a.scales.as<float>() + m;
  for (int r = 0; r < MR; ++r) {
    for (int j = 0; j < NT; ++j) {
      float* cr = c + size_t(r) * ldc + j * kTileN;
      _mm512_mask_storeu_ps(cr, mask[j],
                            _mm512_mul_ps(_mm512_set1_ps(sa[r]), _mm512_maskz_loadu_ps(mask[j], cr)));
    }
  }
}

template <int BITS, int NT>
TILELLM_AVX512 void q_rows(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t) {
  constexpr int MR = QShape<BITS>::kRows;
  static_assert(MR <= 8, "the remainder switch below covers up to 7 rows");
  int m = m0;
  for (; m + MR <= m1; m += MR) q_micro<BITS, MR, NT>(w, a, C, m, t);
  switch (m1 - m) {
    case 7:
      q_micro<BITS, (7 < MR ? 7 : 1), NT>(w, a, C, m, t);
      break;
    case 6:
      q_micro<BITS, (6 < MR ? 6 : 1), NT>(w, a, C, m, t);
      break;
    case 5:
      q_micro<BITS, (5 < MR ? 5 : 1), NT>(w, a, C, m, t);
      break;
    case 4:
      q_micro<BITS, (4 < MR ? 4 : 1), NT>(w, a, C, m, t);
      break;
    case 3:
      q_micro<BITS, 3, NT>(w, a, C, m, t);
      break;
    case 2:
      q_micro<BITS, 2, NT>(w, a, C, m, t);
      break;
    case 1:
      q_micro<BITS, 1, NT>(w, a, C, m, t);
      break;
    default:
      break;
  }
}

template <int BITS>
TILELLM_AVX512 void q_tiles_avx512(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0,
                                   int t1) {
  constexpr int G = QShape<BITS>::kTiles;
  for (int t = t0; t < t1; t += G) {
    const int nt = std::min(G, t1 - t);
    if (nt == G) {
      q_rows<BITS, G>(w, a, C, m0, m1, t);
    } else if (nt == 2) {
      q_rows<BITS, 2>(w, a, C, m0, m1, t);
    } else {
      q_rows<BITS, 1>(w, a, C, m0, m1, t);
    }
  }
}
#undef TILELLM_AVX512
#endif

template <int BITS>
void q_tiles(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512Vnni) {
    q_tiles_avx512<BITS>(w, a, C, m0, m1, t0, t1);
    return;
  }
#endif
  (void)isa;
  q_tiles_scalar<BITS>(w, a, C, m0, m1, t0, t1);
}

// Asymmetric min/max quantization of one block of n values: fp16 scale and offset, codes in [0, qmax].
inline void quantize_block(const float* x, int n, int qmax, uint16_t& scale16, uint16_t& offset16,
                           uint8_t* u) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  float s = (mx - mn) / float(qmax);
  if (!(s > 0.0f)) s = 1.0f;
  scale16 = fp32_to_fp16(s);
  offset16 = fp32_to_fp16(mn);
  const float sf = fp16_to_fp32(scale16), of = fp16_to_fp32(offset16);
  for (int i = 0; i < n; ++i) {
    const float q = std::nearbyint((x[i] - of) / sf);
    u[i] = uint8_t(std::clamp(q, 0.0f, float(qmax)));
  }
}

// W [N][K] -> QuantMatrix with BITS-bit codes. block = 0: one block over all of K (K padded with zero codes
// to the code group); block > 0: must divide K and be a multiple of 8 (16 for 3 and 2 bits, their group).
template <int BITS>
QuantMatrix quantize_weights(const float* W, int K, int N, int block) {
  constexpr int GK = QGroup<BITS>::kK;
  constexpr int qmax = (1 << BITS) - 1;
  if (K <= 0 || N <= 0) fail("gemm: K and N must be positive (K={}, N={})", K, N);
  constexpr int kBlockStep = std::max(GK, 8);
  if (block < 0 || (block > 0 && (block % kBlockStep != 0 || K % block != 0))) {
    fail("gemm: block size {} must be a multiple of {} that divides K={} ({}-bit codes)", block, kBlockStep,
         K, BITS);
  }
  QuantMatrix w;
  w.K = K;
  w.N = N;
  w.bits = BITS;
  w.Kp = block > 0 ? K : (K + GK - 1) / GK * GK;
  w.block = block > 0 ? block : w.Kp;
  w.nblocks = w.Kp / w.block;
  w.Np = (N + kTileN - 1) / kTileN * kTileN;
  w.codes = AlignedBuffer(w.code_bytes());
  w.params = AlignedBuffer(w.param_bytes());
  uint8_t* codes = w.codes.as<uint8_t>();
  uint16_t* params = w.params.as<uint16_t>();
  const int real_block = block > 0 ? block : K;
  std::vector<uint8_t> u(static_cast<size_t>(real_block));
  for (int n = 0; n < N; ++n) {
    const int t = n / kTileN, c = n % kTileN;
    for (int b = 0; b < w.nblocks; ++b) {
      uint16_t* pb = params + (size_t(t) * w.nblocks + b) * 2 * kTileN;
      quantize_block(W + size_t(n) * K + size_t(b) * real_block, real_block, qmax, pb[c], pb[kTileN + c],
                     u.data());
      for (int i = 0; i < real_block; ++i) {
        const int k = b * w.block + i;
        const int q = u[size_t(i)];
        if constexpr (BITS == 8) {
          codes[((size_t(t) * (w.Kp / 4) + k / 4) * kTileN + c) * 4 + k % 4] = uint8_t(q);
        } else if constexpr (BITS == 4) {
          uint8_t& v = codes[(size_t(t) * (w.Kp / 8) + k / 8) * 64 + c * 4 + k % 4];
          v = uint8_t(v | (k % 8 < 4 ? q : q << 4));
        } else {
          uint8_t* grp = codes + (size_t(t) * (w.Kp / 16) + k / 16) * QGroup<BITS>::kBytes;
          const int j = c * 4 + k % 4, s = (k % 16) / 4;
          grp[j] = uint8_t(grp[j] | ((q & 3) << (2 * s)));
          if (BITS == 3 && (q & 4))
            grp[64 + 8 * s + j / 8] = uint8_t(grp[64 + 8 * s + j / 8] | (1 << (j % 8)));
        }
      }
    }
  }
  return w;
}

}  // namespace tilellm::gemm::detail
