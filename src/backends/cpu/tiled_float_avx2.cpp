// AVX2 + FMA + F16C kernels of the float tiles (tiled_float.h), for x86 CPUs without AVX-512: a tile's 16
// rows are two 256-bit halves of 8 float lanes; up to 4 tokens per pass (8 accumulators, the weights and one
// broadcast stay within the 16 registers).
//   F16:  per input k one 32-byte load, two conversions, two multiply-adds per token.
//   F32:  the same with two 32-byte loads and no conversion.
//   BF16: per pair of inputs two 32-byte loads, each split into its even and odd inputs (shift, mask), four
//         multiply-adds per token.
// A single token (decode) keeps two accumulators per half over k (or pair) mod 2.
// Headers before the target region, the CPU probe after it (it runs on any x86-64).
#include <algorithm>
#include <cstring>

#include "backends/cpu/tiled_float_kernels.h"
#include "base/isa_target.h"

#if TILELLM_ISA_COMPILES(AVX2)
#include <immintrin.h>

#define TILELLM_AVX2 TILELLM_ISA_FN(AVX2)
#define TILELLM_AVX2_HOT TILELLM_ISA_HOT(AVX2)

namespace tilellm::tiled_float_detail {
namespace {

constexpr int kRows = 16;

// Rows of tile ti that exist (16 but in the last tile).
inline int rows_of(const TiledFloat& w, int64_t ti) {
  return int(std::min<int64_t>(kRows, w.n_out - ti * kRows));
}

// Stores the 16 lanes of (lo, hi) as rows [0, rows) of y.
TILELLM_AVX2_HOT void store_rows(float* y, __m256 lo, __m256 hi, int rows) {
  if (rows == kRows) {
    _mm256_storeu_ps(y, lo);
    _mm256_storeu_ps(y + 8, hi);
    return;
  }
  alignas(32) float tmp[kRows];
  _mm256_store_ps(tmp, lo);
  _mm256_store_ps(tmp + 8, hi);
  std::memcpy(y, tmp, sizeof(float) * size_t(rows));
}

// ---- F16 and F32 (one row of 16 weights per input k, halves or floats) ----

TILELLM_AVX2_HOT void load_f16(const uint16_t* p, __m256& lo, __m256& hi) {
  lo = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
  hi = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 8)));
}
TILELLM_AVX2_HOT void load_f16(const float* p, __m256& lo, __m256& hi) {
  lo = _mm256_load_ps(p);
  hi = _mm256_load_ps(p + 8);
}

template <int kNt, class E>
TILELLM_AVX2_HOT void f16_tokens(const TiledFloat& w, const E* tile, const float* xr, int64_t t, float* y,
                                 int64_t y_stride, int rows) {
  const int64_t n = w.n_in;
  __m256 lo[kNt], hi[kNt];
  for (int j = 0; j < kNt; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  if constexpr (kNt == 1) {
    __m256 lo2 = _mm256_setzero_ps(), hi2 = _mm256_setzero_ps();
    const float* x = xr + t * n;
    int64_t k = 0;
    for (; k + 2 <= n; k += 2) {
      __m256 a, b, c, d;
      load_f16(tile + k * kRows, a, b);
      load_f16(tile + (k + 1) * kRows, c, d);
      const __m256 x0 = _mm256_set1_ps(x[k]), x1 = _mm256_set1_ps(x[k + 1]);
      lo[0] = _mm256_fmadd_ps(a, x0, lo[0]);
      hi[0] = _mm256_fmadd_ps(b, x0, hi[0]);
      lo2 = _mm256_fmadd_ps(c, x1, lo2);
      hi2 = _mm256_fmadd_ps(d, x1, hi2);
    }
    if (k < n) {
      __m256 a, b;
      load_f16(tile + k * kRows, a, b);
      const __m256 x0 = _mm256_set1_ps(x[k]);
      lo[0] = _mm256_fmadd_ps(a, x0, lo[0]);
      hi[0] = _mm256_fmadd_ps(b, x0, hi[0]);
    }
    lo[0] = _mm256_add_ps(lo[0], lo2);
    hi[0] = _mm256_add_ps(hi[0], hi2);
  } else {
    for (int64_t k = 0; k < n; ++k) {
      __m256 a, b;
      load_f16(tile + k * kRows, a, b);
      for (int j = 0; j < kNt; ++j) {
        const __m256 xv = _mm256_set1_ps(xr[(t + j) * n + k]);
        lo[j] = _mm256_fmadd_ps(a, xv, lo[j]);
        hi[j] = _mm256_fmadd_ps(b, xv, hi[j]);
      }
    }
  }
  for (int j = 0; j < kNt; ++j) store_rows(y + (t + j) * y_stride, lo[j], hi[j], rows);
}

template <int kNt>
struct F16Step {
  TILELLM_AVX2 static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y,
                               int64_t y_stride) {
    f16_tokens<kNt>(w, w.tile(ti), static_cast<const float*>(acts), t, y + ti * kRows, y_stride,
                    rows_of(w, ti));
  }
};

template <int kNt>
struct F32Step {
  TILELLM_AVX2 static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y,
                               int64_t y_stride) {
    f16_tokens<kNt>(w, w.tile_f32(ti), static_cast<const float*>(acts), t, y + ti * kRows, y_stride,
                    rows_of(w, ti));
  }
};

// ---- BF16 ----
// acts: [n_tok][n_pairs] 32-bit words, each the bfloat16 pair (x[2p] low, x[2p+1] high).

TILELLM_AVX2_HOT __m256 even_of(__m256i v) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
TILELLM_AVX2_HOT __m256 odd_of(__m256i v) {
  return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
}

// Rows 0-7 (lo) and 8-15 (hi) of pair p: even and odd inputs.
struct Pair {
  __m256 lo_e, lo_o, hi_e, hi_o;
};
TILELLM_AVX2_HOT Pair load_pair(const uint16_t* tile, int64_t p) {
  const auto* q = reinterpret_cast<const __m256i*>(tile + p * 2 * kRows);
  const __m256i a = _mm256_load_si256(q), b = _mm256_load_si256(q + 1);
  return {even_of(a), odd_of(a), even_of(b), odd_of(b)};
}

template <int kNt>
TILELLM_AVX2_HOT void bf16_tokens(const TiledFloat& w, const uint16_t* tile, const uint32_t* xp, int64_t t,
                                  float* y, int64_t y_stride, int rows) {
  const int64_t np = w.n_pairs();
  __m256 lo[kNt], hi[kNt];
  for (int j = 0; j < kNt; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  if constexpr (kNt == 1) {
    // Even and odd inputs accumulate apart (two chains per half).
    __m256 lo2 = _mm256_setzero_ps(), hi2 = _mm256_setzero_ps();
    const uint32_t* x = xp + t * np;
    for (int64_t p = 0; p < np; ++p) {
      const Pair wv = load_pair(tile, p);
      const __m256i xv = _mm256_set1_epi32(int(x[p]));
      const __m256 xe = even_of(xv), xo = odd_of(xv);
      lo[0] = _mm256_fmadd_ps(wv.lo_e, xe, lo[0]);
      hi[0] = _mm256_fmadd_ps(wv.hi_e, xe, hi[0]);
      lo2 = _mm256_fmadd_ps(wv.lo_o, xo, lo2);
      hi2 = _mm256_fmadd_ps(wv.hi_o, xo, hi2);
    }
    lo[0] = _mm256_add_ps(lo[0], lo2);
    hi[0] = _mm256_add_ps(hi[0], hi2);
  } else {
    for (int64_t p = 0; p < np; ++p) {
      const Pair wv = load_pair(tile, p);
      for (int j = 0; j < kNt; ++j) {
        const __m256i xv = _mm256_set1_epi32(int(xp[(t + j) * np + p]));
        const __m256 xe = even_of(xv), xo = odd_of(xv);
        lo[j] = _mm256_fmadd_ps(wv.lo_o, xo, _mm256_fmadd_ps(wv.lo_e, xe, lo[j]));
        hi[j] = _mm256_fmadd_ps(wv.hi_o, xo, _mm256_fmadd_ps(wv.hi_e, xe, hi[j]));
      }
    }
  }
  for (int j = 0; j < kNt; ++j) store_rows(y + (t + j) * y_stride, lo[j], hi[j], rows);
}

template <int kNt>
struct Bf16Step {
  TILELLM_AVX2 static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y,
                               int64_t y_stride) {
    bf16_tokens<kNt>(w, w.tile(ti), static_cast<const uint32_t*>(acts), t, y + ti * kRows, y_stride,
                     rows_of(w, ti));
  }
};

const Kernels kAvx2 = {for_tiles<F16Step, 4>, for_tiles<Bf16Step, 4>, for_tiles<F32Step, 4>};

}  // namespace
}  // namespace tilellm::tiled_float_detail

#endif

namespace tilellm::tiled_float_detail {
TILELLM_ISA_PROVIDER(const Kernels*, avx2_kernels, AVX2, &kAvx2)
}  // namespace tilellm::tiled_float_detail
