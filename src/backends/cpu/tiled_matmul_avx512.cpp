// AVX-512 VNNI kernel of the tiled matmul (layout and arithmetic in tiled_weight.h).
//
// Per sub-block of 32 inputs a tile's (16 output rows') codes are loaded once (4 vectors for 4-bit codes,
// each split into its low and high nibbles; 8 vectors for 8-bit codes) and every token adds 8 vpdpbusd (16
// rows x 4 inputs each, the 4 activation bytes broadcast) into one int32 vector that starts at -int_offset *
// sum(q), so the integer sum of a unit (one sub-block, or up to 8 for the converted kinds on Q8_K
// activations) is exact before the one float conversion and the fused multiply-add with (row scales x
// activation scale). Three shapes of the same arithmetic: decode (one token) reads 4 tiles at once
// (token_tiles: four code streams in flight); prefill runs blocks of 3 tiles x 4 tokens (tiles_tokens: a code
// vector serves 4 tokens, a broadcast 3 tiles); what is left over runs one tile x up to 8 tokens
// (tile_tokens). A tile's weights stay in L1/L2 between token groups.
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

// GCC 12 warns that the "undefined" source vector of the unmasked 512-bit conversions may be used
// uninitialized; the zero-masked forms with a full mask are the same instructions without that source.
TILELLM_AVX512_HOT __m512 halves_to_floats(const uint16_t* p) {
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

// Decode reads each weight byte once, straight from memory: one sequential stream per thread, which the
// hardware prefetcher alone keeps too few lines ahead of. Asking for the lines kPrefetchBytes ahead (tiles
// are contiguous, so that runs on into the next tile) raised a cold-cache 4096 x 14336 GEMV on this machine's
// 2 threads from 10-14 to 12-17 GB/s (int4b64) and from 13-17 to 16-20 GB/s (int8b0), on a noisy machine;
// 1, 2, 4 and 8 KiB ahead were tried, 2 KiB was best. Prefill reuses each tile for many tokens from cache.
constexpr size_t kPrefetchBytes = 2048;
TILELLM_AVX512_HOT void prefetch_ahead(const uint8_t* codes, int bits) {
  for (int l = 0; l < bits; ++l) {  // the sub-block's 4 (4-bit) or 8 (8-bit) cache lines
    _mm_prefetch(reinterpret_cast<const char*>(codes + kPrefetchBytes + 64 * l), _MM_HINT_T0);
  }
}

// A tile's scales and offsets sit after its codes, which decode asks for 2 KiB ahead: those prefetches reach
// them only near the tile's end, while its first group's are read at its start. On a 2-core AMD EPYC (Zen 5)
// perf put a third of the decode kernel's samples on those loads (docs/PERF.md 2026-12-08 02:16): a tile's
// first 4 lines of each (8 groups) are asked for a batch of tiles ahead (prefetch_params), the later ones 8
// groups ahead (token_tiles), as the AVX2 kernels do (tiled_matmul_x86.inc).
template <bool kFloatOffset>
TILELLM_AVX512_HOT void prefetch_params(const TiledWeight& w, const uint8_t* tile) {
  for (int l = 0; l < 4; ++l) {
    _mm_prefetch(reinterpret_cast<const char*>(tile + w.scale_off + 64 * l), _MM_HINT_T0);
    if constexpr (kFloatOffset)
      _mm_prefetch(reinterpret_cast<const char*>(tile + w.offset_off + 64 * l), _MM_HINT_T0);
  }
}

// Tiles a decode step (one token) reads at once (token_tiles). 2, 4 and 8 were measured on a 2-core Intel
// Xeon VM (AVX-512 VNNI), 2 threads, TinyLlama-shape decode (tg64): Q8_0 25.9 / 26.9 / 26.5 t/s, Q4_0 41.7
// / 43.3 / 39.2, against 24.1 and 40.5 one tile at a time (docs/PERF.md, the entry of 2026-12-01 22:56); 8
// runs out of vector registers.
constexpr int kDecodeTiles = 4;
// Prefill's block (tiles_tokens): kPrefillTiles tiles x kPrefillTokens tokens. Measured on the same VM, 2
// threads, gemm-speed int8b0 / int4b64 at 2560x4096, M = 128 (GFLOPS; one tile x 8 tokens before: 864-904 /
// 639-764): 2 x 4 951-956 / 704, 2 x 6 941-998 / 773-793, 3 x 4 977-1012 / 740-769, 4 x 2 739-743 / 575-625,
// 2 x 8 768-845 / 679-689 (spills); TinyLlama-shape pp128 Q8_0 223 -> 274-281 t/s, Q4_0 230 -> 259-263 with
// 3 x 4 (docs/PERF.md, the entry of 2026-12-01 23:55).
constexpr int kPrefillTiles = 3, kPrefillTokens = 4;

// Tokens [t, t + kNt) against one tile. Each token's integer sums run over a unit of a.fold sub-blocks
// (tiled_weight.h, TiledActs) before the one float conversion and scaling of the unit.
template <int kBits, bool kFloatOffset, int kNt>
TILELLM_AVX512_HOT void tile_tokens(const TiledWeight& w, const uint8_t* tile, const TiledActs& a, int64_t t,
                                    float* y, int64_t y_stride, __mmask16 store_mask) {
  const auto* scales = reinterpret_cast<const uint16_t*>(tile + w.scale_off);
  const auto* offsets = reinterpret_cast<const uint16_t*>(tile + w.offset_off);
  const int64_t n_sub = a.n_sub, fold = a.fold, n_units = a.n_units;
  const int32_t int_offset = w.int_offset();
  __m512 acc[kNt];
  __m512i isum[kNt];
  for (int j = 0; j < kNt; ++j) {
    acc[j] = _mm512_setzero_ps();
    isum[j] = _mm512_setzero_si512();
  }
  __m512 ws = _mm512_setzero_ps(), wo = _mm512_setzero_ps();
  int64_t left_in_group = 0, left_in_unit = 0, u = -1;
  const uint16_t* sp = scales;
  const uint16_t* op = offsets;
  for (int64_t s = 0; s < n_sub; ++s) {
    if (left_in_group == 0) {  // next scale group: 16 fp16 scales (and offsets)
      ws = halves_to_floats(sp);
      sp += kTileRows;
      if constexpr (kFloatOffset) {
        wo = halves_to_floats(op);
        op += kTileRows;
      }
      left_in_group = w.sub_per_group;
    }
    --left_in_group;
    const bool first = left_in_unit == 0;
    if (first) {
      left_in_unit = fold;
      ++u;
    }
    const bool last = --left_in_unit == 0;
    if constexpr (kNt == 1) prefetch_ahead(tile + size_t(s) * kBits * 64, kBits);
    __m512i wv[8];
    if constexpr (kBits == 4) {
      const uint8_t* c = tile + size_t(s) * 256;
      const __m512i m4 = _mm512_set1_epi8(15);
      for (int g = 0; g < 4; ++g) {
        const __m512i raw = _mm512_load_si512(c + 64 * g);
        wv[2 * g] = _mm512_and_si512(raw, m4);
        wv[2 * g + 1] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
      }
    } else {
      const uint8_t* c = tile + size_t(s) * 512;
      for (int g = 0; g < 8; ++g) wv[g] = _mm512_load_si512(c + 64 * g);
    }
    for (int j = 0; j < kNt; ++j) {
      const int64_t i = (t + j) * n_units + u;
      const int8_t* q = a.qs + (t + j) * a.kp + s * kSubK;
      // Two chains of four, so a single token's sums do not wait on each other; the first carries the
      // unit's sum so far (for the int offset kinds, whose units are one sub-block, -int_offset * sum(q)).
      __m512i s0 = !first         ? isum[j]
                   : kFloatOffset ? _mm512_setzero_si512()
                                  : _mm512_set1_epi32(-int_offset * a.isum[i]);
      __m512i s1 = _mm512_setzero_si512();
      for (int g = 0; g < 8; g += 2) {
        s0 = _mm512_dpbusd_epi32(s0, wv[g], bcast_u32(q + 4 * g));
        s1 = _mm512_dpbusd_epi32(s1, wv[g + 1], bcast_u32(q + 4 * g + 4));
      }
      isum[j] = _mm512_add_epi32(s0, s1);
      if (last) {
        const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(a.dx[i]));
        acc[j] = _mm512_fmadd_ps(to_floats(isum[j]), scale, acc[j]);
        if constexpr (kFloatOffset) acc[j] = _mm512_fmadd_ps(wo, _mm512_set1_ps(a.am[i]), acc[j]);
      }
    }
  }
  for (int j = 0; j < kNt; ++j) _mm512_mask_storeu_ps(y + (t + j) * y_stride, store_mask, acc[j]);
}

// Decode: token t against kTiles tiles [ti, ti + kTiles) at once, kTiles code streams in flight where
// tile_tokens<1> has one, with the token's activation bytes broadcast once for all of them. The arithmetic
// per tile is tile_tokens<1>'s, in the same order (the tiles share the group and unit boundaries).
template <int kBits, bool kFloatOffset, int kTiles>
TILELLM_AVX512_HOT void token_tiles(const TiledWeight& w, int64_t ti, const TiledActs& a, int64_t t,
                                    float* y) {
  const int64_t n_sub = a.n_sub, fold = a.fold, n_units = a.n_units;
  const int32_t int_offset = w.int_offset();
  const uint8_t* tile[kTiles];
  __m512 acc[kTiles], ws[kTiles], wo[kTiles];
  __m512i isum[kTiles];
  for (int j = 0; j < kTiles; ++j) {
    tile[j] = w.tile(ti + j);
    acc[j] = ws[j] = wo[j] = _mm512_setzero_ps();
    isum[j] = _mm512_setzero_si512();
  }
  int64_t left_in_group = 0, left_in_unit = 0, u = -1, group = -1;
  const int8_t* q = a.qs + t * a.kp;
  for (int64_t s = 0; s < n_sub; ++s, q += kSubK) {
    if (left_in_group == 0) {  // next scale group: 16 fp16 scales (and offsets) per tile
      ++group;
      for (int j = 0; j < kTiles; ++j) {
        const auto* sc = reinterpret_cast<const uint16_t*>(tile[j] + w.scale_off) + group * kTileRows;
        _mm_prefetch(reinterpret_cast<const char*>(sc + 8 * kTileRows), _MM_HINT_T0);  // 8 groups ahead
        ws[j] = halves_to_floats(sc);
        if constexpr (kFloatOffset) {
          const auto* of = reinterpret_cast<const uint16_t*>(tile[j] + w.offset_off) + group * kTileRows;
          _mm_prefetch(reinterpret_cast<const char*>(of + 8 * kTileRows), _MM_HINT_T0);
          wo[j] = halves_to_floats(of);
        }
      }
      left_in_group = w.sub_per_group;
    }
    --left_in_group;
    const bool first = left_in_unit == 0;
    if (first) {
      left_in_unit = fold;
      ++u;
    }
    const bool last = --left_in_unit == 0;
    const int64_t i = t * n_units + u;
    __m512i qv[8];
    for (int g = 0; g < 8; ++g) qv[g] = bcast_u32(q + 4 * g);
    const __m512i init = kFloatOffset ? _mm512_setzero_si512() : _mm512_set1_epi32(-int_offset * a.isum[i]);
    for (int j = 0; j < kTiles; ++j) {
      const uint8_t* c = tile[j] + size_t(s) * kBits * 64;
      prefetch_ahead(c, kBits);
      __m512i s0 = first ? init : isum[j], s1 = _mm512_setzero_si512();
      if constexpr (kBits == 4) {
        const __m512i m4 = _mm512_set1_epi8(15);
        for (int g = 0; g < 4; ++g) {
          const __m512i raw = _mm512_load_si512(c + 64 * g);
          s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(raw, m4), qv[2 * g]);
          s1 = _mm512_dpbusd_epi32(s1, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4), qv[2 * g + 1]);
        }
      } else {
        for (int g = 0; g < 8; g += 2) {
          s0 = _mm512_dpbusd_epi32(s0, _mm512_load_si512(c + 64 * g), qv[g]);
          s1 = _mm512_dpbusd_epi32(s1, _mm512_load_si512(c + 64 * g + 64), qv[g + 1]);
        }
      }
      isum[j] = _mm512_add_epi32(s0, s1);
      if (last) {
        const __m512 scale = _mm512_mul_ps(ws[j], _mm512_set1_ps(a.dx[i]));
        acc[j] = _mm512_fmadd_ps(to_floats(isum[j]), scale, acc[j]);
        if constexpr (kFloatOffset) acc[j] = _mm512_fmadd_ps(wo[j], _mm512_set1_ps(a.am[i]), acc[j]);
      }
    }
  }
  for (int j = 0; j < kTiles; ++j) {
    const int rows = int(std::min<int64_t>(kTileRows, w.n_out - (ti + j) * kTileRows));
    _mm512_mask_storeu_ps(y + (ti + j) * kTileRows, static_cast<__mmask16>((1u << rows) - 1), acc[j]);
  }
}

// Prefill: tokens [t, t + kNt) against kTiles tiles [ti, ti + kTiles): each code vector loaded once for kNt
// tokens and each broadcast activation word used by kTiles tiles, where tile_tokens<8> pays a broadcast per
// product. Same arithmetic per (tile, token) as tile_tokens, one chain per pair (the pairs are independent).
template <int kBits, bool kFloatOffset, int kTiles, int kNt>
TILELLM_AVX512_HOT void tiles_tokens(const TiledWeight& w, int64_t ti, const TiledActs& a, int64_t t,
                                     float* y, int64_t y_stride) {
  const int64_t n_sub = a.n_sub, fold = a.fold, n_units = a.n_units;
  const int32_t int_offset = w.int_offset();
  const uint8_t* tile[kTiles];
  __m512 acc[kTiles][kNt], ws[kTiles], wo[kTiles];
  __m512i isum[kTiles][kNt];
  for (int i = 0; i < kTiles; ++i) {
    tile[i] = w.tile(ti + i);
    ws[i] = wo[i] = _mm512_setzero_ps();
    for (int j = 0; j < kNt; ++j) {
      acc[i][j] = _mm512_setzero_ps();
      isum[i][j] = _mm512_setzero_si512();
    }
  }
  int64_t left_in_group = 0, left_in_unit = 0, u = -1, group = -1;
  for (int64_t s = 0; s < n_sub; ++s) {
    if (left_in_group == 0) {
      ++group;
      for (int i = 0; i < kTiles; ++i) {
        ws[i] =
            halves_to_floats(reinterpret_cast<const uint16_t*>(tile[i] + w.scale_off) + group * kTileRows);
        if constexpr (kFloatOffset)
          wo[i] =
              halves_to_floats(reinterpret_cast<const uint16_t*>(tile[i] + w.offset_off) + group * kTileRows);
      }
      left_in_group = w.sub_per_group;
    }
    --left_in_group;
    if (left_in_unit == 0) {
      left_in_unit = fold;
      ++u;
      for (int j = 0; j < kNt; ++j) {
        const __m512i init = kFloatOffset ? _mm512_setzero_si512()
                                          : _mm512_set1_epi32(-int_offset * a.isum[(t + j) * n_units + u]);
        for (int i = 0; i < kTiles; ++i) isum[i][j] = init;
      }
    }
    const bool last = --left_in_unit == 0;
    const int8_t* q = a.qs + t * a.kp + s * kSubK;
    if constexpr (kBits == 4) {
      const __m512i m4 = _mm512_set1_epi8(15);
      for (int g = 0; g < 4; ++g) {
        __m512i lo[kTiles], hi[kTiles];
        for (int i = 0; i < kTiles; ++i) {
          const __m512i raw = _mm512_load_si512(tile[i] + size_t(s) * 256 + 64 * g);
          lo[i] = _mm512_and_si512(raw, m4);
          hi[i] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        }
        for (int j = 0; j < kNt; ++j) {
          const __m512i ql = bcast_u32(q + j * a.kp + 8 * g), qh = bcast_u32(q + j * a.kp + 8 * g + 4);
          for (int i = 0; i < kTiles; ++i) {
            isum[i][j] = _mm512_dpbusd_epi32(isum[i][j], lo[i], ql);
            isum[i][j] = _mm512_dpbusd_epi32(isum[i][j], hi[i], qh);
          }
        }
      }
    } else {
      for (int g = 0; g < 8; ++g) {
        __m512i wv[kTiles];
        for (int i = 0; i < kTiles; ++i) wv[i] = _mm512_load_si512(tile[i] + size_t(s) * 512 + 64 * g);
        for (int j = 0; j < kNt; ++j) {
          const __m512i qb = bcast_u32(q + j * a.kp + 4 * g);
          for (int i = 0; i < kTiles; ++i) isum[i][j] = _mm512_dpbusd_epi32(isum[i][j], wv[i], qb);
        }
      }
    }
    if (last) {
      for (int j = 0; j < kNt; ++j) {
        const int64_t x = (t + j) * n_units + u;
        const __m512 dx = _mm512_set1_ps(a.dx[x]);
        for (int i = 0; i < kTiles; ++i) {
          acc[i][j] = _mm512_fmadd_ps(to_floats(isum[i][j]), _mm512_mul_ps(ws[i], dx), acc[i][j]);
          if constexpr (kFloatOffset) acc[i][j] = _mm512_fmadd_ps(wo[i], _mm512_set1_ps(a.am[x]), acc[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < kTiles; ++i) {
    const int rows = int(std::min<int64_t>(kTileRows, w.n_out - (ti + i) * kTileRows));
    const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
    for (int j = 0; j < kNt; ++j)
      _mm512_mask_storeu_ps(y + (t + j) * y_stride + (ti + i) * kTileRows, mask, acc[i][j]);
  }
}

// Tokens [t0, t1) against tile ti, 8 at a time.
template <int kBits, bool kFloatOffset>
TILELLM_AVX512_HOT void run_tile(const TiledWeight& w, const TiledActs& a, int64_t ti, int64_t t0, int64_t t1,
                                 float* y, int64_t y_stride) {
  const uint8_t* tile = w.tile(ti);
  const int rows = int(std::min<int64_t>(kTileRows, w.n_out - ti * kTileRows));
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  float* yt = y + ti * kTileRows;
  int64_t t = t0;
  for (; t + 8 <= t1; t += 8) tile_tokens<kBits, kFloatOffset, 8>(w, tile, a, t, yt, y_stride, mask);
  switch (t1 - t) {
    case 7:
      tile_tokens<kBits, kFloatOffset, 7>(w, tile, a, t, yt, y_stride, mask);
      break;
    case 6:
      tile_tokens<kBits, kFloatOffset, 6>(w, tile, a, t, yt, y_stride, mask);
      break;
    case 5:
      tile_tokens<kBits, kFloatOffset, 5>(w, tile, a, t, yt, y_stride, mask);
      break;
    case 4:
      tile_tokens<kBits, kFloatOffset, 4>(w, tile, a, t, yt, y_stride, mask);
      break;
    case 3:
      tile_tokens<kBits, kFloatOffset, 3>(w, tile, a, t, yt, y_stride, mask);
      break;
    case 2:
      tile_tokens<kBits, kFloatOffset, 2>(w, tile, a, t, yt, y_stride, mask);
      break;
    case 1:
      tile_tokens<kBits, kFloatOffset, 1>(w, tile, a, t, yt, y_stride, mask);
      break;
    default:
      break;
  }
}

template <int kBits, bool kFloatOffset>
TILELLM_AVX512 void run(const TiledWeight& w, const TiledActs& a, int64_t tile0, int64_t tile1, int64_t t0,
                        int64_t t1, float* y, int64_t y_stride) {
  if (t1 - t0 ==
      1) {  // decode: the tiles kDecodeTiles at a time, the next batch's first parameters asked for
    float* yt = y + t0 * y_stride;
    for (int64_t ti = tile0; ti < std::min(tile0 + kDecodeTiles, tile1); ++ti)
      prefetch_params<kFloatOffset>(w, w.tile(ti));
    for (; tile0 + kDecodeTiles <= tile1; tile0 += kDecodeTiles) {
      for (int64_t ti = tile0 + kDecodeTiles; ti < std::min(tile0 + 2 * kDecodeTiles, tile1); ++ti)
        prefetch_params<kFloatOffset>(w, w.tile(ti));
      token_tiles<kBits, kFloatOffset, kDecodeTiles>(w, tile0, a, t0, yt);
    }
  } else if (t1 - t0 >= kPrefillTokens) {
    // prefill: blocks of kPrefillTiles x kPrefillTokens; the tokens past the last whole block, then the tiles
    // past the last whole block, per tile
    const int64_t tb = t0 + (t1 - t0) / kPrefillTokens * kPrefillTokens;
    for (; tile0 + kPrefillTiles <= tile1; tile0 += kPrefillTiles) {
      for (int64_t t = t0; t < tb; t += kPrefillTokens)
        tiles_tokens<kBits, kFloatOffset, kPrefillTiles, kPrefillTokens>(w, tile0, a, t, y, y_stride);
      for (int64_t ti = tile0; ti < tile0 + kPrefillTiles; ++ti)
        run_tile<kBits, kFloatOffset>(w, a, ti, tb, t1, y, y_stride);
    }
  }
  for (int64_t ti = tile0; ti < tile1; ++ti) run_tile<kBits, kFloatOffset>(w, a, ti, t0, t1, y, y_stride);
}

void kernel(const TiledWeight& w, const TiledActs& a, int64_t tile0, int64_t tile1, int64_t t0, int64_t t1,
            float* y, int64_t y_stride) {
  if (w.bits() == 4) {
    if (w.float_offset()) {
      run<4, true>(w, a, tile0, tile1, t0, t1, y, y_stride);
    } else {
      run<4, false>(w, a, tile0, tile1, t0, t1, y, y_stride);
    }
  } else if (w.float_offset()) {
    run<8, true>(w, a, tile0, tile1, t0, t1, y, y_stride);
  } else {
    run<8, false>(w, a, tile0, tile1, t0, t1, y, y_stride);
  }
}

}  // namespace

#endif

TILELLM_ISA_PROVIDER(Kernel, avx512vnni_tiled_kernel, AVX512VNNI, kernel)

}  // namespace tilellm::tiled_detail
