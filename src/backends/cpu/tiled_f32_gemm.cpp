// The fp32 GEMM over F32 float tiles (tiled_f32_gemm.h says what it computes and how it blocks): the AVX-512
// tile loop and its tail kernels, the packing of A, and the driver that splits a product over the pool. Work
// is split over groups of three 16-channel tiles. Large products take one level of Strassen-Winograd on top
// of these kernels (tiled_f32_strassen.cpp).
#include <algorithm>
#include <cstring>

#include "backends/cpu/tiled_f32_asm_x86.h"
#include "backends/cpu/tiled_f32_gemm_internal.h"
#include "base/error.h"
#include "base/isa_target.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm::f32gemm {

bool available() {
  // The AVX-512 level of the running ISA (base/cpu_isa.h): the kernels below are compiled for it.
  return TILELLM_ISA_COMPILES(AVX512VNNI) && active_cpu_isa() == CpuIsa::Avx512Vnni;
}

namespace {

// The register tile (kMr x kNt tiles, tiled_f32_gemm_internal.h): 8 rows x 3 tiles of 16 channels = 24 zmm
// accumulators; per k, 3 weight loads and 8 broadcasts (folded into the FMAs) feed 24 FMAs, so the loop is
// FMA-bound rather than load-bound.
constexpr int kNcTiles = 24;  // tiles per weight block: kKc x 384 channels (768 KiB, L2)

#if defined(__x86_64__)
#define TILELLM_AVX512 TILELLM_ISA_FN(AVX512VNNI)

// Panels [i0, i1) of every K chunk, in the layout of tiled_f32_gemm_internal.h.
void pack_a_panels(const float* A, int M, int K, int i0, int i1, float* Ap) {
  pack_a_rows(M, K, i0, i1, Ap, [&](int m, int k0, int, float*) { return A + size_t(m) * K + k0; });
}

// MR rows (one packed panel) x NT tiles over kc values of k, for the panels and tile groups the assembly
// kernel does not take (fewer than 8 rows, fewer than 3 tiles, or a partial last tile: nc_last < 16 channels,
// stored with a mask). w points at tile 0's first k of the chunk; tile j is tile_stride floats further.
// src: starting values (row stride ldc like C; C itself to accumulate), null for zero.
template <int MR, int NT>
TILELLM_AVX512 inline void f32_micro(const float* Ap, const float* w, size_t tile_stride, int kc, float* C,
                                     size_t ldc, const float* src, int nc_last) {
  __m512 acc[MR][NT];
  const __mmask16 last_mask = __mmask16((1u << nc_last) - 1u);
  for (int r = 0; r < MR; ++r) {
    for (int j = 0; j < NT; ++j) {
      const __mmask16 mk = j == NT - 1 ? last_mask : __mmask16(0xffff);
      acc[r][j] = src ? _mm512_maskz_loadu_ps(mk, src + r * ldc + j * kTileN) : _mm512_setzero_ps();
    }
  }
  for (int k = 0; k < kc; ++k) {
    __m512 wv[NT];
    for (int j = 0; j < NT; ++j) wv[j] = _mm512_load_ps(w + j * tile_stride + size_t(k) * kTileN);
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(Ap[size_t(k) * kMr + r]);
      for (int j = 0; j < NT; ++j) acc[r][j] = _mm512_fmadd_ps(av, wv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int j = 0; j < NT; ++j) {
      const __mmask16 mk = j == NT - 1 ? last_mask : __mmask16(0xffff);
      _mm512_mask_storeu_ps(C + r * ldc + j * kTileN, mk, acc[r][j]);
    }
  }
}

template <int MR>
TILELLM_AVX512 void f32_micro_nt(int nt, const float* Ap, const float* w, size_t tile_stride, int kc,
                                 float* C, size_t ldc, const float* src, int nc_last) {
  if (nt == 3) {
    f32_micro<MR, 3>(Ap, w, tile_stride, kc, C, ldc, src, nc_last);
  } else if (nt == 2) {
    f32_micro<MR, 2>(Ap, w, tile_stride, kc, C, ldc, src, nc_last);
  } else {
    f32_micro<MR, 1>(Ap, w, tile_stride, kc, C, ldc, src, nc_last);
  }
}

// One panel of mr rows against nt tiles (nc_last channels in the last).
TILELLM_AVX512 void f32_block(int mr, int nt, const float* Ap, const float* w, size_t tile_stride, int kc,
                              float* C, size_t ldc, const float* src, int nc_last,
                              const float* pn = nullptr) {
  if (mr == kMr && nt == kNt && nc_last == kTileN) {
    detail::f32_micro_8x3_asm(Ap, w, tile_stride * sizeof(float), kc, C, ldc * sizeof(float), src, pn,
                              pn ? 64 : 0);
    return;
  }
  if (mr == kMr && nt == 2 && nc_last == kTileN) {
    detail::f32_micro_8x2_asm(Ap, w, tile_stride * sizeof(float), kc, C, ldc * sizeof(float), src);
    return;
  }
  switch (mr) {
    case 8:
      return f32_micro_nt<8>(nt, Ap, w, tile_stride, kc, C, ldc, src, nc_last);
    case 7:
      return f32_micro_nt<7>(nt, Ap, w, tile_stride, kc, C, ldc, src, nc_last);
    case 6:
      return f32_micro_nt<6>(nt, Ap, w, tile_stride, kc, C, ldc, src, nc_last);
    case 5:
      return f32_micro_nt<5>(nt, Ap, w, tile_stride, kc, C, ldc, src, nc_last);
    case 4:
      return f32_micro_nt<4>(nt, Ap, w, tile_stride, kc, C, ldc, src, nc_last);
    case 3:
      return f32_micro_nt<3>(nt, Ap, w, tile_stride, kc, C, ldc, src, nc_last);
    case 2:
      return f32_micro_nt<2>(nt, Ap, w, tile_stride, kc, C, ldc, src, nc_last);
    default:
      return f32_micro_nt<1>(nt, Ap, w, tile_stride, kc, C, ldc, src, nc_last);
  }
}

#endif

}  // namespace

#if defined(__x86_64__)
// Full panels as 8 x 8 transposes (unpack, shuffle, lane permute: 24 shuffles per 64 floats), the rest one
// float at a time; the scalar loop alone cost 2-4% of a 2-thread M = 512 product (9% with Strassen's 7/4 of
// A at N = 1024).
TILELLM_AVX512 void store_panel(const float* const* rows, int mr, int kc, float* dst) {
  int k = 0;
  if (mr == kMr) {
    for (; k + 8 <= kc; k += 8) {
      __m256 r[8], t[8], u[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(rows[i] + k);
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);      // r_i0 r_j0 r_i1 r_j1 | r_i4 r_j4 r_i5 r_j5
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // r_i2 r_j2 r_i3 r_j3 | r_i6 ...
      }
      for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);          // k 0 (and 4) of rows i..i+3
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);      // k 1 (5)
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);  // k 2 (6)
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);  // k 3 (7)
      }
      for (int j = 0; j < 4; ++j) {
        _mm256_storeu_ps(dst + size_t(k + j) * kMr, _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
        _mm256_storeu_ps(dst + size_t(k + j + 4) * kMr, _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
      }
    }
  }
  for (; k < kc; ++k) {
    for (int r = 0; r < mr; ++r) dst[size_t(k) * kMr + r] = rows[r][k];
  }
}
#else
void store_panel(const float* const* rows, int mr, int kc, float* dst) {
  for (int k = 0; k < kc; ++k) {
    for (int r = 0; r < mr; ++r) dst[size_t(k) * kMr + r] = rows[r][k];
  }
}
#endif

#if defined(__x86_64__)
// Rows [m0, m1) x tiles [t0, t1) (one thread's piece) from the packed A. Blocked so that one panel of A
// (kMr x kc, 16 KiB) stays in L1 while the weights of up to kNcTiles tiles for that K chunk (kc x 16 *
// kNcTiles floats, 768 KiB) stream from L2, each weight vector feeding 8 FMAs; C is loaded and stored once
// per K chunk (the first K chunk starts from src instead). kKc = 512 with 24-tile blocks against 256 with
// 48-tile blocks (2 threads, alternating): +2% to +17% on 8 of 12 cells at M = 8-512, the other four within
// 1.5%; half the C loads and stores and kernel calls per product.
TILELLM_AVX512 void tiles_avx512(const WeightView& wv, const float* Ap, int M, int m0, int m1, float* C,
                                 size_t ldc, const float* src, int t0, int t1) {
  const int K = wv.K, Mp = (M + kMr - 1) / kMr * kMr;
  const size_t tile_stride = wv.tile_stride;
  // The first K chunk of the tile at row m, channel n starts from src (or zero), later ones from C.
  auto from = [&](int k0, int m, int n) -> const float* {
    const float* s = k0 == 0 ? src : C;
    return s ? s + size_t(m) * ldc + n : nullptr;
  };
  if (m1 - m0 <= kMr) {
    // One panel: nothing to keep in L2 for a second panel, so each tile group runs all of K before the
    // next, and its three weight streams are read start to end instead of in 16 KiB pieces.
    for (int t = t0; t < t1; t += kNt) {
      const int nt = std::min(kNt, t1 - t);
      const int nc_last = std::min(kTileN, wv.N - (t + nt - 1) * kTileN);
      for (int k0 = 0; k0 < K; k0 += kKc) {
        const int kc = std::min(kKc, K - k0);
        f32_block(m1 - m0, nt, Ap + size_t(k0 / kKc) * Mp * kKc + size_t(m0) * kc,
                  wv.w + size_t(t) * tile_stride + size_t(k0) * kTileN, tile_stride, kc,
                  C + size_t(m0) * ldc + size_t(t) * kTileN, ldc, from(k0, m0, t * kTileN), nc_last);
      }
    }
    return;
  }
  for (int tb = t0; tb < t1; tb += kNcTiles) {
    const int te = std::min(t1, tb + kNcTiles);
    for (int k0 = 0; k0 < K; k0 += kKc) {
      const int kc = std::min(kKc, K - k0);
      const float* block = Ap + size_t(k0 / kKc) * Mp * kKc;
      // The weight block after this one (the next K chunk of these tiles, or the first chunk of the next
      // tiles): panels 1-3 each fetch one of a group's three tiles of it into L2 as they run, a line per k,
      // so the first panel of that block finds it there instead of waiting on L3 while the other panels
      // compute from L2. Measured (2 threads, alternating): M = 32 +6% to +42%, M = 128 +4% to +7%, M = 512
      // within the noise.
      const bool last_k = k0 + kKc >= K;
      const int ntb = last_k ? te : tb, nte = last_k ? std::min(t1, te + kNcTiles) : te;
      const int nk0 = last_k ? 0 : k0 + kKc;
      for (int m = m0; m < m1; m += kMr) {
        const int mr = std::min(kMr, m1 - m);
        const int pi = (m - m0) / kMr;
        const float* panel = block + size_t(m) * kc;  // panel m / kMr: [kc][kMr]
        for (int t = tb; t < te; t += kNt) {
          const int nt = std::min(kNt, te - t);
          const int nc_last = std::min(kTileN, wv.N - (t + nt - 1) * kTileN);
          const float* pn = nullptr;
          if (pi >= 1 && pi <= kNt) {
            const int tt = ntb + (t - tb) + (pi - 1);
            if (tt < nte) pn = wv.w + size_t(tt) * tile_stride + size_t(nk0) * kTileN;
          }
          f32_block(mr, nt, panel, wv.w + size_t(t) * tile_stride + size_t(k0) * kTileN, tile_stride, kc,
                    C + size_t(m) * ldc + size_t(t) * kTileN, ldc, from(k0, m, t * kTileN), nc_last, pn);
        }
      }
    }
  }
}

TILELLM_AVX512 void pack_a(const float* A, int M, int K, float* Ap, ThreadPool* pool) {
  const int panels = (M + kMr - 1) / kMr;
  if (pool && pool->active() > 1 && M >= 64) {
    pool->parallel_for(panels, 1,
                       [&](int64_t b, int64_t e, int) { pack_a_panels(A, M, K, int(b), int(e), Ap); });
  } else {
    pack_a_panels(A, M, K, 0, panels, Ap);
  }
}
#endif

void prepare(TiledFloat& w, Strassen s) {
  if (w.type != GgmlType::F32) fail("internal: the f32 GEMM takes F32 tiles, not {}", type_name(w.type));
  w.strassen_min_m = 0;
  w.strassen = AlignedBuffer();
  if (s == Strassen::kNever || !available() || w.n_in < 2 || w.n_out < 2) return;
  const int min_m = s == Strassen::kAlways ? 1 : strassen_min_m(int(w.n_in), int(w.n_out));
  if (min_m <= 0) return;
  form_strassen_operands(w);
  w.strassen_min_m = min_m;
}

size_t scratch_floats(const TiledFloat& w, int64_t M) {
#if defined(__x86_64__)
  if (!available()) return 0;
  if (w.strassen_min_m > 0 && M >= w.strassen_min_m) return strassen_scratch_floats(w, int(M));
  return packed_a_floats(int(M), int(w.n_in));
#else
  (void)w, (void)M;
  return 0;
#endif
}

void gemm(const TiledFloat& w, const float* A, int64_t M64, float* C, ThreadPool* pool, float* scratch) {
#if defined(__x86_64__)
  if (!available()) fail("internal: the f32 GEMM needs AVX-512");
  const int M = int(M64), K = int(w.n_in), N = int(w.n_out);
  if (w.strassen_min_m > 0 && M >= w.strassen_min_m) return gemm_strassen(w, A, M, C, pool, scratch);
  const int tiles = int(w.n_tiles);
  const int groups = (tiles + kNt - 1) / kNt;
  const bool threaded = pool && pool->active() > 1;
  // A is packed once per call for every thread, by all threads when it is worth a wake-up.
  pack_a(A, M, K, scratch, threaded ? pool : nullptr);
  const WeightView wv{w.tile_f32(0), w.tile_bytes / sizeof(float), K, N};
  parallel_pieces(threaded ? pool : nullptr, M, groups, [&](int m0, int m1, int g0, int g1) {
    tiles_avx512(wv, scratch, M, m0, m1, C, size_t(N), nullptr, g0 * kNt, std::min(tiles, g1 * kNt));
  });
#else
  (void)w, (void)A, (void)M64, (void)C, (void)pool, (void)scratch;
  fail("internal: the f32 GEMM needs AVX-512");
#endif
}

}  // namespace tilellm::f32gemm
