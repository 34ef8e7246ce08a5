// F16 tiles (layout and arithmetic in tiled_f16.h): the repack, the activation rounding, the scalar reference
// kernel and the AVX-512 kernel.
//
// AVX-512: one tile at a time, up to 8 tokens per pass; per input k one 32-byte load of the 16 rows' halves,
// one conversion, and one fused multiply-add per token with the broadcast activation. A single token (decode)
// keeps four accumulators over k mod 4, so the multiply-adds do not wait on one another.
#include "backends/cpu/tiled_f16.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "format/cpu_features.h"
#include "format/error.h"
#include "format/fp16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm {
namespace {

constexpr int kRows = 16;

void scalar_kernel(const TiledF16& w, const float* xr, int64_t n_tok, int64_t tile0, int64_t tile1, float* y,
                   int64_t y_stride) {
  for (int64_t ti = tile0; ti < tile1; ++ti) {
    const uint16_t* tile = w.tile(ti);
    const int rows = int(std::min<int64_t>(kRows, w.n_out - ti * kRows));
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int rr = 0; rr < rows; ++rr) {
        float acc = 0.0f;
        for (int64_t k = 0; k < w.n_in; ++k) acc += fp16_to_fp32(tile[k * kRows + rr]) * xr[t * w.n_in + k];
        y[t * y_stride + ti * kRows + rr] = acc;
      }
    }
  }
}

#if defined(__x86_64__)
#define TILELLM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))
#define TILELLM_AVX512_HOT TILELLM_AVX512 inline __attribute__((always_inline))

TILELLM_AVX512_HOT __m512 load16(const uint16_t* p) {
  return _mm512_maskz_cvtph_ps(0xffff, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

template <int kNt>
TILELLM_AVX512_HOT void tokens(const TiledF16& w, const uint16_t* tile, const float* xr, int64_t t, float* y,
                               int64_t y_stride, __mmask16 mask) {
  const int64_t n = w.n_in;
  if constexpr (kNt == 1) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const float* x = xr + t * n;
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
      for (int j = 0; j < 4; ++j)
        a[j] = _mm512_fmadd_ps(load16(tile + (k + j) * kRows), _mm512_set1_ps(x[k + j]), a[j]);
    }
    for (; k < n; ++k) a[0] = _mm512_fmadd_ps(load16(tile + k * kRows), _mm512_set1_ps(x[k]), a[0]);
    const __m512 s = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
    _mm512_mask_storeu_ps(y + t * y_stride, mask, s);
  } else {
    __m512 acc[kNt];
    for (int j = 0; j < kNt; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; ++k) {
      const __m512 wv = load16(tile + k * kRows);
      for (int j = 0; j < kNt; ++j) acc[j] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xr[(t + j) * n + k]), acc[j]);
    }
    for (int j = 0; j < kNt; ++j) _mm512_mask_storeu_ps(y + (t + j) * y_stride, mask, acc[j]);
  }
}

TILELLM_AVX512 void avx512_kernel(const TiledF16& w, const float* xr, int64_t n_tok, int64_t tile0,
                                  int64_t tile1, float* y, int64_t y_stride) {
  for (int64_t ti = tile0; ti < tile1; ++ti) {
    const uint16_t* tile = w.tile(ti);
    const int rows = int(std::min<int64_t>(kRows, w.n_out - ti * kRows));
    const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
    float* yt = y + ti * kRows;
    int64_t t = 0;
    for (; t + 8 <= n_tok; t += 8) tokens<8>(w, tile, xr, t, yt, y_stride, mask);
    for (; t + 4 <= n_tok; t += 4) tokens<4>(w, tile, xr, t, yt, y_stride, mask);
    for (; t + 2 <= n_tok; t += 2) tokens<2>(w, tile, xr, t, yt, y_stride, mask);
    for (; t < n_tok; ++t) tokens<1>(w, tile, xr, t, yt, y_stride, mask);
  }
}
#endif

using Kernel = void (*)(const TiledF16&, const float*, int64_t, int64_t, int64_t, float*, int64_t);

Kernel avx512() {
#if defined(__x86_64__)
  if (cpu_features().avx512_vnni) return avx512_kernel;  // the AVX-512 F/BW/VL set the engine probes for
#endif
  return nullptr;
}

std::atomic<int> g_override{-1};  // -1 best, 0 scalar, 1 avx512

Kernel current(const char** name) {
  const int o = g_override.load(std::memory_order_relaxed);
  if (o != 0 && avx512()) {
    if (name) *name = "avx512";
    return avx512();
  }
  if (name) *name = "scalar";
  return scalar_kernel;
}

}  // namespace

TiledF16 tile_f16(const Weight& w, ThreadPool* pool) {
  if (w.type != GgmlType::F16) fail("internal: weight {} is not F16", w.name);
  TiledF16 t;
  t.n_in = w.n_in;
  t.n_out = w.n_out;
  t.n_tiles = (w.n_out + kRows - 1) / kRows;
  t.tile_bytes = (size_t(w.n_in) * kRows * 2 + kAlign - 1) / kAlign * kAlign;
  t.data = AlignedBuffer(t.tile_bytes * size_t(t.n_tiles));
  auto pack = [&](int64_t b, int64_t e, int) {
    for (int64_t ti = b; ti < e; ++ti) {
      auto* dst = reinterpret_cast<uint16_t*>(t.data.as<uint8_t>() + size_t(ti) * t.tile_bytes);
      for (int rr = 0; rr < kRows && ti * kRows + rr < w.n_out; ++rr) {
        const uint8_t* row = w.row(ti * kRows + rr);
        for (int64_t k = 0; k < w.n_in; ++k) std::memcpy(&dst[k * kRows + rr], row + 2 * k, 2);
      }
    }
  };
  if (pool) {
    pool->parallel_for(t.n_tiles, 16, pack);
  } else {
    pack(0, t.n_tiles, 0);
  }
  return t;
}

void round_to_f16(const float* x, float* xr, int64_t n, int64_t t0, int64_t t1) {
  for (int64_t i = t0 * n; i < t1 * n; ++i) xr[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

void tiled_f16_matmul(const TiledF16& w, const float* xr, int64_t n_tok, int64_t tile0, int64_t tile1,
                      float* y, int64_t y_stride) {
  if (tile0 >= tile1 || n_tok <= 0) return;
  current(nullptr)(w, xr, n_tok, tile0, tile1, y, y_stride);
}

const char* tiled_f16_isa_name() {
  const char* n = nullptr;
  current(&n);
  return n;
}

bool select_tiled_f16_isa_for_testing(std::string_view isa) {
  if (isa == "best") {
    g_override = -1;
  } else if (isa == "scalar") {
    g_override = 0;
  } else if (isa == "avx512" && avx512()) {
    g_override = 1;
  } else {
    return false;
  }
  return true;
}

}  // namespace tilellm
