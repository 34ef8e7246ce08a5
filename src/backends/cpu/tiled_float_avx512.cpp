// AVX-512 kernels of the float tiles (tiled_float.h): one tile (16 rows, one vector of float lanes) at a
// time, up to 8 tokens per pass, so each weight vector loaded serves 8 tokens.
//   F16:  per input k one 32-byte load of the 16 rows' halves, one conversion, one multiply-add per token.
//   F32:  per input k one 64-byte load, one multiply-add per token.
//   BF16: per pair of inputs one 64-byte load; where the CPU has AVX-512 BF16 one vdpbf16ps per token
//         multiplies both inputs of all 16 rows and adds them in; without it the low halves of the 32-bit
//         lanes become floats by a shift and the high halves by a mask, then two multiply-adds per token.
// A single token (decode) keeps four accumulators over k (or pair) mod 4, so the multiply-adds do not wait on
// one another.
// (The unmasked forms of the conversion and the shift make GCC 12 warn about its own undefined-vector
// placeholder; the all-ones masked forms are the same instructions.)
// Headers before the target regions, the CPU probes after them (they run on any x86-64).
#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cpu/tiled_float_kernels.h"
#include "base/cpu_features.h"
#include "base/isa_target.h"

#if TILELLM_ISA_COMPILES(AVX512VNNI)
#include <immintrin.h>

#define TILELLM_AVX512 TILELLM_ISA_FN(AVX512VNNI)
#define TILELLM_AVX512_HOT TILELLM_ISA_HOT(AVX512VNNI)
// vdpbf16ps is a feature within the avx512vnni level: the BF16 kernel uses it where the CPU has it.
#define TILELLM_AVX512BF16 __attribute__((target(TILELLM_ISA_STR_AVX512VNNI ",avx512bf16")))
#define TILELLM_AVX512BF16_HOT TILELLM_AVX512BF16 inline __attribute__((always_inline))

namespace tilellm::tiled_float_detail {
namespace {

constexpr int kRows = 16;

TILELLM_AVX512_HOT __mmask16 row_mask(const TiledFloat& w, int64_t ti) {
  const int rows = int(std::min<int64_t>(kRows, w.n_out - ti * kRows));
  return static_cast<__mmask16>((1u << rows) - 1);
}

// ---- F16 ----

TILELLM_AVX512_HOT __m512 load_f16(const uint16_t* p) {
  return _mm512_maskz_cvtph_ps(0xffff, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}
TILELLM_AVX512_HOT __m512 load_f16(const float* p) {
  return _mm512_load_ps(p);
}

template <int kNt, class E>
TILELLM_AVX512_HOT void f16_tokens(const TiledFloat& w, const E* tile, const float* xr, int64_t t, float* y,
                                   int64_t y_stride, __mmask16 mask) {
  const int64_t n = w.n_in;
  if constexpr (kNt == 1) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const float* x = xr + t * n;
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
      for (int j = 0; j < 4; ++j)
        a[j] = _mm512_fmadd_ps(load_f16(tile + (k + j) * kRows), _mm512_set1_ps(x[k + j]), a[j]);
    }
    for (; k < n; ++k) a[0] = _mm512_fmadd_ps(load_f16(tile + k * kRows), _mm512_set1_ps(x[k]), a[0]);
    const __m512 s = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
    _mm512_mask_storeu_ps(y + t * y_stride, mask, s);
  } else {
    __m512 acc[kNt];
    for (int j = 0; j < kNt; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; ++k) {
      const __m512 wv = load_f16(tile + k * kRows);
      for (int j = 0; j < kNt; ++j) acc[j] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xr[(t + j) * n + k]), acc[j]);
    }
    for (int j = 0; j < kNt; ++j) _mm512_mask_storeu_ps(y + (t + j) * y_stride, mask, acc[j]);
  }
}

template <int kNt>
struct F16Step {
  TILELLM_AVX512 static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y,
                                 int64_t y_stride) {
    f16_tokens<kNt>(w, w.tile(ti), static_cast<const float*>(acts), t, y + ti * kRows, y_stride,
                    row_mask(w, ti));
  }
};

// F32 tiles: the same loop on floats. matmul_float_tiled (cpu/matmul.cpp) runs whole F32 matrices on the
// blocked GEMM (tiled_f32_gemm.h) instead; this kernel serves a range of tiles asked for on its own.
template <int kNt>
struct F32Step {
  TILELLM_AVX512 static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y,
                                 int64_t y_stride) {
    f16_tokens<kNt>(w, w.tile_f32(ti), static_cast<const float*>(acts), t, y + ti * kRows, y_stride,
                    row_mask(w, ti));
  }
};

// ---- BF16 ----
// acts: [n_tok][n_pairs] 32-bit words, each the bfloat16 pair (x[2p] low, x[2p+1] high).

TILELLM_AVX512_HOT __m512i load_pairs(const uint16_t* tile, int64_t p) {
  return _mm512_load_si512(tile + p * 2 * kRows);
}

// The two floats of every 32-bit lane: low half (even input) and high half (odd input).
TILELLM_AVX512_HOT __m512 even_of(__m512i v) {
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, v, 16));
}
TILELLM_AVX512_HOT __m512 odd_of(__m512i v) {
  return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
}

template <int kNt>
TILELLM_AVX512_HOT void bf16_tokens(const TiledFloat& w, const uint16_t* tile, const uint32_t* xp, int64_t t,
                                    float* y, int64_t y_stride, __mmask16 mask) {
  const int64_t np = w.n_pairs();
  if constexpr (kNt == 1) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const uint32_t* x = xp + t * np;
    int64_t p = 0;
    for (; p + 2 <= np; p += 2) {
      for (int j = 0; j < 2; ++j) {
        const __m512i wv = load_pairs(tile, p + j), xv = _mm512_set1_epi32(int(x[p + j]));
        a[2 * j] = _mm512_fmadd_ps(even_of(wv), even_of(xv), a[2 * j]);
        a[2 * j + 1] = _mm512_fmadd_ps(odd_of(wv), odd_of(xv), a[2 * j + 1]);
      }
    }
    for (; p < np; ++p) {
      const __m512i wv = load_pairs(tile, p), xv = _mm512_set1_epi32(int(x[p]));
      a[0] = _mm512_fmadd_ps(even_of(wv), even_of(xv), a[0]);
      a[1] = _mm512_fmadd_ps(odd_of(wv), odd_of(xv), a[1]);
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
    _mm512_mask_storeu_ps(y + t * y_stride, mask, s);
  } else {
    __m512 acc[kNt];
    for (int j = 0; j < kNt; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < np; ++p) {
      const __m512i wv = load_pairs(tile, p);
      const __m512 we = even_of(wv), wo = odd_of(wv);
      for (int j = 0; j < kNt; ++j) {
        const __m512i xv = _mm512_set1_epi32(int(xp[(t + j) * np + p]));
        acc[j] = _mm512_fmadd_ps(wo, odd_of(xv), _mm512_fmadd_ps(we, even_of(xv), acc[j]));
      }
    }
    for (int j = 0; j < kNt; ++j) _mm512_mask_storeu_ps(y + (t + j) * y_stride, mask, acc[j]);
  }
}

template <int kNt>
struct Bf16Step {
  TILELLM_AVX512 static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y,
                                 int64_t y_stride) {
    bf16_tokens<kNt>(w, w.tile(ti), static_cast<const uint32_t*>(acts), t, y + ti * kRows, y_stride,
                     row_mask(w, ti));
  }
};

// ---- BF16 with vdpbf16ps ----

TILELLM_AVX512BF16_HOT __m512 dot_pairs(__m512 acc, __m512i wv, uint32_t x) {
  return _mm512_dpbf16_ps(acc, (__m512bh)wv, (__m512bh)_mm512_set1_epi32(int(x)));
}

template <int kNt>
TILELLM_AVX512BF16_HOT void dp_tokens(const TiledFloat& w, const uint16_t* tile, const uint32_t* xp,
                                      int64_t t, float* y, int64_t y_stride, __mmask16 mask) {
  const int64_t np = w.n_pairs();
  if constexpr (kNt == 1) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const uint32_t* x = xp + t * np;
    int64_t p = 0;
    for (; p + 4 <= np; p += 4) {
      for (int j = 0; j < 4; ++j) a[j] = dot_pairs(a[j], load_pairs(tile, p + j), x[p + j]);
    }
    for (; p < np; ++p) a[0] = dot_pairs(a[0], load_pairs(tile, p), x[p]);
    const __m512 s = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
    _mm512_mask_storeu_ps(y + t * y_stride, mask, s);
  } else {
    __m512 acc[kNt];
    for (int j = 0; j < kNt; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < np; ++p) {
      const __m512i wv = load_pairs(tile, p);
      for (int j = 0; j < kNt; ++j) acc[j] = dot_pairs(acc[j], wv, xp[(t + j) * np + p]);
    }
    for (int j = 0; j < kNt; ++j) _mm512_mask_storeu_ps(y + (t + j) * y_stride, mask, acc[j]);
  }
}

template <int kNt>
struct DpStep {
  TILELLM_AVX512BF16 static void run(const TiledFloat& w, int64_t ti, const void* acts, int64_t t, float* y,
                                     int64_t y_stride) {
    dp_tokens<kNt>(w, w.tile(ti), static_cast<const uint32_t*>(acts), t, y + ti * kRows, y_stride,
                   row_mask(w, ti));
  }
};

// vdpbf16ps where the CPU has AVX512_BF16; tests turn it off to run the shift-and-mask path on such a CPU.
std::atomic<bool> g_bf16_dot{cpu_features().avx512_bf16};

void bf16_kernel(const TiledFloat& w, const void* acts, int64_t n_tok, int64_t tile0, int64_t tile1, float* y,
                 int64_t y_stride) {
  (g_bf16_dot.load(std::memory_order_relaxed) ? for_tiles<DpStep, 8> : for_tiles<Bf16Step, 8>)(w, acts, n_tok,
                                                                                               tile0, tile1,
                                                                                               y, y_stride);
}

const Kernels kAvx512 = {for_tiles<F16Step, 8>, bf16_kernel, for_tiles<F32Step, 8>};

}  // namespace

bool set_bf16_dot_product_for_testing(bool on) {
  if (on && !cpu_features().avx512_bf16) return false;
  g_bf16_dot = on;
  return true;
}

}  // namespace tilellm::tiled_float_detail

#else  // not x86-64, or a compiler without these intrinsics

namespace tilellm::tiled_float_detail {
bool set_bf16_dot_product_for_testing(bool on) {
  return !on;
}
}  // namespace tilellm::tiled_float_detail

#endif

namespace tilellm::tiled_float_detail {
TILELLM_ISA_PROVIDER(const Kernels*, avx512_kernels, AVX512VNNI, &kAvx512)
}  // namespace tilellm::tiled_float_detail
