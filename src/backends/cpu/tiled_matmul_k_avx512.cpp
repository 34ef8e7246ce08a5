// AVX-512 VNNI kernel of the tiled matmul for the K-quant kinds (Q4_K, Q5_K, Q6_K; layout and arithmetic in
// tiled_weight.h).
//
// One tile (16 rows) at a time, up to 8 tokens: per sub-block of 32 inputs the codes are loaded once (4-bit
// codes split into nibbles, 8-bit codes as they are) and every token takes two chains of four vpdpbusd, one
// per 16 inputs (Q6_K's scale granularity; for Q4_K / Q5_K the two are added), multiplies them by the rows'
// sub-block scales (vpmulld) and adds them into its int32 super-block sum. Per super-block the sum is
// converted once and scaled by d * dy; the Q4_K / Q5_K mins go in as four vpmaddwd of the rows' min pairs
// against the token's pairs of 32-input activation sums.
#include <algorithm>
#include <cstring>

#include "backends/cpu/tiled_matmul_kernels.h"
#include "base/isa_target.h"

#if TILELLM_ISA_COMPILES(AVX512VNNI)
#include <immintrin.h>
#endif

namespace tilellm::tiled_detail {

#if TILELLM_ISA_COMPILES(AVX512VNNI)
namespace {

#define TILELLM_AVX512 TILELLM_ISA_FN(AVX512VNNI)
#define TILELLM_AVX512_HOT TILELLM_ISA_HOT(AVX512VNNI)

// The zero-masked forms with a full mask: GCC 12 warns that the unmasked conversions' undefined source may be
// used uninitialized (tiled_matmul_avx512.cpp).
TILELLM_AVX512_HOT __m512 halves_to_floats(const uint8_t* p) {
  return _mm512_maskz_cvtph_ps(0xffff, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}
TILELLM_AVX512_HOT __m512 to_floats(__m512i v) {
  return _mm512_maskz_cvtepi32_ps(0xffff, v);
}
TILELLM_AVX512_HOT __m512i bcast_u32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}
// 16 sub-block scales (one per row) widened to int32 lanes.
template <bool kSigned>
TILELLM_AVX512_HOT __m512i row_scales(const uint8_t* p) {
  const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
  return kSigned ? _mm512_maskz_cvtepi8_epi32(0xffff, v) : _mm512_maskz_cvtepu8_epi32(0xffff, v);
}

// Tokens [t, t + kNt) against one tile.
template <TileKind kKind, int kNt>
TILELLM_AVX512_HOT void tile_tokens(const TiledWeight& w, const uint8_t* tile, const TiledActs& a, int64_t t,
                                    float* y, int64_t y_stride, __mmask16 store_mask) {
  constexpr bool kQ6 = kKind == TileKind::Q6_K;
  constexpr int kBits = kKind == TileKind::Q4_K ? 4 : 8;
  const int64_t n_sb = w.n_in / kSuperK, n16 = 2 * a.n_sub, n64 = a.n_sub / 2;
  __m512 acc[kNt];
  for (int j = 0; j < kNt; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < n_sb; ++c) {
    const uint8_t* p = tile + w.scale_off + size_t(c) * kKParamBytes;
    __m512i isum[kNt];
    for (int j = 0; j < kNt; ++j) isum[j] = _mm512_setzero_si512();
    for (int jj = 0; jj < kSuperK / kSubK; ++jj) {
      const int64_t s = 8 * c + jj;
      const uint8_t* codes = tile + size_t(s) * kBits * 64;
      // Decode: fetch 2 KiB ahead of the one weight stream (tiled_matmul_avx512.cpp).
      if constexpr (kNt == 1)
        for (int l = 0; l < kBits; ++l)
          _mm_prefetch(reinterpret_cast<const char*>(codes + 2048 + 64 * l), _MM_HINT_T0);
      __m512i wv[8];
      if constexpr (kBits == 4) {
        const __m512i m4 = _mm512_set1_epi8(15);
        for (int g = 0; g < 4; ++g) {
          const __m512i raw = _mm512_load_si512(codes + 64 * g);
          wv[2 * g] = _mm512_and_si512(raw, m4);
          wv[2 * g + 1] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        }
      } else {
        for (int g = 0; g < 8; ++g) wv[g] = _mm512_load_si512(codes + 64 * g);
      }
      const __m512i sc0 = row_scales<kQ6>(p + (kQ6 ? 2 * jj : jj) * kTileRows);
      const __m512i sc1 = kQ6 ? row_scales<true>(p + (2 * jj + 1) * kTileRows) : sc0;
      for (int j = 0; j < kNt; ++j) {
        const int8_t* q = a.qs + (t + j) * a.kp + s * kSubK;
        __m512i h0 = _mm512_setzero_si512(), h1 = _mm512_setzero_si512();
        if constexpr (kQ6) {  // the code offset 32, through the activation sums per 16
          const int32_t* b16 = a.isum + (t + j) * n16 + 2 * s;
          h0 = _mm512_set1_epi32(-32 * b16[0]);
          h1 = _mm512_set1_epi32(-32 * b16[1]);
        }
        for (int g = 0; g < 4; ++g) {
          h0 = _mm512_dpbusd_epi32(h0, wv[g], bcast_u32(q + 4 * g));
          h1 = _mm512_dpbusd_epi32(h1, wv[g + 4], bcast_u32(q + 16 + 4 * g));
        }
        if constexpr (kQ6) {
          isum[j] = _mm512_add_epi32(
              isum[j], _mm512_add_epi32(_mm512_mullo_epi32(h0, sc0), _mm512_mullo_epi32(h1, sc1)));
        } else {
          isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(_mm512_add_epi32(h0, h1), sc0));
        }
      }
    }
    const __m512 d = halves_to_floats(p + kKDOff);
    for (int j = 0; j < kNt; ++j) {
      const __m512 dy = _mm512_set1_ps(a.dx[(t + j) * n_sb + c]);
      acc[j] = _mm512_fmadd_ps(to_floats(isum[j]), _mm512_mul_ps(d, dy), acc[j]);
    }
    if constexpr (!kQ6) {
      __m512i mins[4];
      for (int pp = 0; pp < 4; ++pp)
        mins[pp] = _mm512_maskz_cvtepu8_epi16(
            0xffffffff, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + kKMinOff + 32 * pp)));
      const __m512 dmin = halves_to_floats(p + kKDminOff);
      for (int j = 0; j < kNt; ++j) {
        const int32_t* pr = a.pairs + (t + j) * n64 + 4 * c;
        __m512i m = _mm512_madd_epi16(mins[0], _mm512_set1_epi32(pr[0]));
        for (int pp = 1; pp < 4; ++pp)
          m = _mm512_add_epi32(m, _mm512_madd_epi16(mins[pp], _mm512_set1_epi32(pr[pp])));
        const __m512 dy = _mm512_set1_ps(a.dx[(t + j) * n_sb + c]);
        acc[j] = _mm512_fnmadd_ps(to_floats(m), _mm512_mul_ps(dmin, dy), acc[j]);
      }
    }
  }
  for (int j = 0; j < kNt; ++j) _mm512_mask_storeu_ps(y + (t + j) * y_stride, store_mask, acc[j]);
}

template <TileKind kKind>
TILELLM_AVX512 void run(const TiledWeight& w, const TiledActs& a, int64_t tile0, int64_t tile1, int64_t t0,
                        int64_t t1, float* y, int64_t y_stride) {
  for (int64_t ti = tile0; ti < tile1; ++ti) {
    const uint8_t* tile = w.tile(ti);
    const int rows = int(std::min<int64_t>(kTileRows, w.n_out - ti * kTileRows));
    const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
    float* yt = y + ti * kTileRows;
    int64_t t = t0;
    for (; t + 8 <= t1; t += 8) tile_tokens<kKind, 8>(w, tile, a, t, yt, y_stride, mask);
    switch (t1 - t) {
      case 7:
        tile_tokens<kKind, 7>(w, tile, a, t, yt, y_stride, mask);
        break;
      case 6:
        tile_tokens<kKind, 6>(w, tile, a, t, yt, y_stride, mask);
        break;
      case 5:
        tile_tokens<kKind, 5>(w, tile, a, t, yt, y_stride, mask);
        break;
      case 4:
        tile_tokens<kKind, 4>(w, tile, a, t, yt, y_stride, mask);
        break;
      case 3:
        tile_tokens<kKind, 3>(w, tile, a, t, yt, y_stride, mask);
        break;
      case 2:
        tile_tokens<kKind, 2>(w, tile, a, t, yt, y_stride, mask);
        break;
      case 1:
        tile_tokens<kKind, 1>(w, tile, a, t, yt, y_stride, mask);
        break;
      default:
        break;
    }
  }
}

void kernel(const TiledWeight& w, const TiledActs& a, int64_t tile0, int64_t tile1, int64_t t0, int64_t t1,
            float* y, int64_t y_stride) {
  switch (w.kind) {
    case TileKind::Q4_K:
      return run<TileKind::Q4_K>(w, a, tile0, tile1, t0, t1, y, y_stride);
    case TileKind::Q5_K:
      return run<TileKind::Q5_K>(w, a, tile0, tile1, t0, t1, y, y_stride);
    default:
      return run<TileKind::Q6_K>(w, a, tile0, tile1, t0, t1, y, y_stride);
  }
}

}  // namespace

#endif

TILELLM_ISA_PROVIDER(Kernel, avx512vnni_tiled_k_kernel, AVX512VNNI, kernel)

}  // namespace tilellm::tiled_detail
