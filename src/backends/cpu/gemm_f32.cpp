// fp32 GEMM for `tilellm gemm-speed` (float-gemm): C[M,N] = A[M,K] x W^T, W packed as [N/16][K][16].
// AVX-512 path: A is packed once per call into k-major panels of 8 rows (pack_a); register tiles of 8 rows x
// 48 channels (24 zmm accumulators, the full tiles in assembly: gemm_f32_asm_x86.h), K in chunks of kKc so
// one panel of A stays in L1 while a block of weights streams from L2 past it. Scalar path: same weight
// packing, plain loops. Work is split over groups of three 16-channel tiles.
#include <algorithm>
#include <cstring>

#include "backends/cpu/gemm_f32_asm_x86.h"
#include "bench/gemm.h"
#include "format/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm::gemm {

Isa best_isa() {
  return cpu_features().avx512_vnni ? Isa::kAvx512Vnni : Isa::kScalar;
}

const char* isa_name(Isa isa) {
  return isa == Isa::kAvx512Vnni ? "avx512-vnni" : "scalar";
}

PackedF32 pack_f32(const float* W, int K, int N) {
  PackedF32 p;
  p.K = K;
  p.N = N;
  p.Np = (N + kTileN - 1) / kTileN * kTileN;
  p.w = AlignedBuffer(size_t(p.Np) * K * sizeof(float));
  float* dst = p.w.as<float>();
  for (int n = 0; n < N; ++n) {
    const int t = n / kTileN, c = n % kTileN;
    for (int k = 0; k < K; ++k) dst[(size_t(t) * K + k) * kTileN + c] = W[size_t(n) * K + k];
  }
  return p;
}

namespace {

// Register tile: 8 rows x 3 tiles of 16 channels = 24 zmm accumulators; per k, 3 weight loads and 8
// broadcasts (folded into the FMAs) feed 24 FMAs, so the loop is FMA-bound rather than load-bound.
constexpr int kMr = 8, kNt = 3;
constexpr int kKc = 256;      // k per cache block: one packed panel of A is kMr x kKc floats (8 KiB, L1)
constexpr int kNcTiles = 48;  // tiles per weight block: kKc x 768 channels (768 KiB, L2)

// Scalar: rows [0,M) x tiles [t0,t1).
void f32_tiles_scalar(const PackedF32& p, const float* A, int M, float* C, int t0, int t1) {
  const int K = p.K;
  float acc[kTileN];
  for (int t = t0; t < t1; ++t) {
    const float* w = p.w.as<float>() + size_t(t) * K * kTileN;
    const int nc = std::min(kTileN, p.N - t * kTileN);
    for (int m = 0; m < M; ++m) {
      const float* a = A + size_t(m) * K;
      std::fill(acc, acc + kTileN, 0.0f);
      for (int k = 0; k < K; ++k) {
        for (int c = 0; c < kTileN; ++c) acc[c] += a[k] * w[size_t(k) * kTileN + c];
      }
      std::memcpy(C + size_t(m) * p.N + size_t(t) * kTileN, acc, sizeof(float) * size_t(nc));
    }
  }
}

#if defined(__x86_64__)
#define TILELLM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")))

// A packed for the kernel: per K chunk q (k0 = q * kKc, kc = min(kKc, K - k0)) a block of Mp = M rounded up
// to kMr rows, as panels of kMr rows stored k-major: Ap[q][panel][kc][kMr] (the kMr activations of one k side
// by side, one 32-byte run). Block q starts at q * Mp * kKc floats, panel i at i * kc * kMr within it. Rows
// of a partial last panel are left unwritten and never read (the tail kernels read only their MR rows).
size_t packed_a_floats(int M, int K) {
  const int Mp = (M + kMr - 1) / kMr * kMr;
  return size_t((K + kKc - 1) / kKc) * Mp * kKc;
}

// Panels [i0, i1) of every K chunk.
void pack_a(const float* A, int M, int K, int i0, int i1, float* Ap) {
  const int Mp = (M + kMr - 1) / kMr * kMr;
  for (int k0 = 0; k0 < K; k0 += kKc) {
    const int kc = std::min(kKc, K - k0);
    float* block = Ap + size_t(k0 / kKc) * Mp * kKc;
    for (int i = i0; i < i1; ++i) {
      const int mr = std::min(kMr, M - i * kMr);
      float* dst = block + size_t(i) * kc * kMr;
      for (int r = 0; r < mr; ++r) {
        const float* src = A + size_t(i * kMr + r) * K + k0;
        for (int k = 0; k < kc; ++k) dst[size_t(k) * kMr + r] = src[k];
      }
    }
  }
}

// MR rows (one packed panel) x NT tiles over kc values of k, for the panels and tile groups the assembly
// kernel does not take (fewer than 8 rows, fewer than 3 tiles, or a partial last tile: nc_last < 16 channels,
// stored with a mask). w points at tile 0's first k of the chunk; tile j is tile_stride floats further.
// first: start from zero, else add to C.
template <int MR, int NT>
TILELLM_AVX512 inline void f32_micro(const float* Ap, const float* w, size_t tile_stride, int kc, float* C,
                                     int ldc, bool first, int nc_last) {
  __m512 acc[MR][NT];
  const __mmask16 last_mask = __mmask16((1u << nc_last) - 1u);
  for (int r = 0; r < MR; ++r) {
    for (int j = 0; j < NT; ++j) {
      const __mmask16 mk = j == NT - 1 ? last_mask : __mmask16(0xffff);
      acc[r][j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mk, C + size_t(r) * ldc + j * kTileN);
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
      _mm512_mask_storeu_ps(C + size_t(r) * ldc + j * kTileN, mk, acc[r][j]);
    }
  }
}

template <int MR>
TILELLM_AVX512 void f32_micro_nt(int nt, const float* Ap, const float* w, size_t tile_stride, int kc,
                                 float* C, int ldc, bool first, int nc_last) {
  if (nt == 3) {
    f32_micro<MR, 3>(Ap, w, tile_stride, kc, C, ldc, first, nc_last);
  } else if (nt == 2) {
    f32_micro<MR, 2>(Ap, w, tile_stride, kc, C, ldc, first, nc_last);
  } else {
    f32_micro<MR, 1>(Ap, w, tile_stride, kc, C, ldc, first, nc_last);
  }
}

// One panel of mr rows against nt tiles (nc_last channels in the last).
TILELLM_AVX512 void f32_block(int mr, int nt, const float* Ap, const float* w, size_t tile_stride, int kc,
                              float* C, int ldc, bool first, int nc_last) {
  if (mr == kMr && nt == kNt && nc_last == kTileN) {
    detail::f32_micro_8x3_asm(Ap, w, tile_stride * sizeof(float), kc, C, size_t(ldc) * sizeof(float), first);
    return;
  }
  switch (mr) {
    case 8:
      return f32_micro_nt<8>(nt, Ap, w, tile_stride, kc, C, ldc, first, nc_last);
    case 7:
      return f32_micro_nt<7>(nt, Ap, w, tile_stride, kc, C, ldc, first, nc_last);
    case 6:
      return f32_micro_nt<6>(nt, Ap, w, tile_stride, kc, C, ldc, first, nc_last);
    case 5:
      return f32_micro_nt<5>(nt, Ap, w, tile_stride, kc, C, ldc, first, nc_last);
    case 4:
      return f32_micro_nt<4>(nt, Ap, w, tile_stride, kc, C, ldc, first, nc_last);
    case 3:
      return f32_micro_nt<3>(nt, Ap, w, tile_stride, kc, C, ldc, first, nc_last);
    case 2:
      return f32_micro_nt<2>(nt, Ap, w, tile_stride, kc, C, ldc, first, nc_last);
    default:
      return f32_micro_nt<1>(nt, Ap, w, tile_stride, kc, C, ldc, first, nc_last);
  }
}

// Tiles [t0,t1) (one thread's chunk of channels) from the packed A. Blocked so that one panel of A (kMr x kc,
// 8 KiB) stays in L1 while the weights of up to kNcTiles tiles for that K chunk (kc x 16 * kNcTiles floats,
// 768 KiB) stream from L2, each weight vector feeding 8 FMAs; C is loaded and stored once per K chunk.
TILELLM_AVX512 void f32_tiles_avx512(const PackedF32& p, const float* Ap, int M, float* C, int t0, int t1) {
  const int K = p.K, Mp = (M + kMr - 1) / kMr * kMr;
  const size_t tile_stride = size_t(K) * kTileN;
  if (M <= kMr) {
    // One panel: nothing to keep in L2 for a second panel, so each tile group runs all of K before the
    // next, and its three weight streams are read start to end instead of in 16 KiB pieces.
    for (int t = t0; t < t1; t += kNt) {
      const int nt = std::min(kNt, t1 - t);
      const int nc_last = std::min(kTileN, p.N - (t + nt - 1) * kTileN);
      for (int k0 = 0; k0 < K; k0 += kKc) {
        f32_block(M, nt, Ap + size_t(k0 / kKc) * kMr * kKc,
                  p.w.as<float>() + size_t(t) * tile_stride + size_t(k0) * kTileN, tile_stride,
                  std::min(kKc, K - k0), C + size_t(t) * kTileN, p.N, k0 == 0, nc_last);
      }
    }
    return;
  }
  for (int tb = t0; tb < t1; tb += kNcTiles) {
    const int te = std::min(t1, tb + kNcTiles);
    for (int k0 = 0; k0 < K; k0 += kKc) {
      const int kc = std::min(kKc, K - k0);
      const float* block = Ap + size_t(k0 / kKc) * Mp * kKc;
      for (int m = 0; m < M; m += kMr) {
        const int mr = std::min(kMr, M - m);
        const float* panel = block + size_t(m) * kc;  // panel m / kMr: [kc][kMr]
        for (int t = tb; t < te; t += kNt) {
          const int nt = std::min(kNt, te - t);
          const int nc_last = std::min(kTileN, p.N - (t + nt - 1) * kTileN);
          f32_block(mr, nt, panel, p.w.as<float>() + size_t(t) * tile_stride + size_t(k0) * kTileN,
                    tile_stride, kc, C + size_t(m) * p.N + size_t(t) * kTileN, p.N, k0 == 0, nc_last);
        }
      }
    }
  }
}
#endif

}  // namespace

void gemm_f32(const PackedF32& p, const float* A, int M, float* C, ThreadPool* pool,
              [[maybe_unused]] Isa isa) {
  const int tiles = p.Np / kTileN;
  const int groups = (tiles + kNt - 1) / kNt;
  const bool threaded = pool && pool->size() > 1;
  [[maybe_unused]] const float* Ap = nullptr;
#if defined(__x86_64__)
  if (isa == Isa::kAvx512Vnni) {
    // A is packed once per call for every thread (see pack_a), by all threads when it is worth a wake-up.
    static thread_local AlignedBuffer ap_buf;
    const size_t bytes = packed_a_floats(M, p.K) * sizeof(float);
    if (ap_buf.size() < bytes) ap_buf = AlignedBuffer(bytes);
    float* ap = ap_buf.as<float>();
    const int panels = (M + kMr - 1) / kMr;
    if (threaded && M >= 64) {
      pool->parallel_for(panels, 1,
                         [&](int64_t b, int64_t e, int) { pack_a(A, M, p.K, int(b), int(e), ap); });
    } else {
      pack_a(A, M, p.K, 0, panels, ap);
    }
    Ap = ap;
  }
#endif
  auto body = [&](int64_t b, int64_t e, int) {
    const int t0 = int(b) * kNt, t1 = std::min(tiles, int(e) * kNt);
#if defined(__x86_64__)
    if (isa == Isa::kAvx512Vnni) {
      f32_tiles_avx512(p, Ap, M, C, t0, t1);
      return;
    }
#endif
    f32_tiles_scalar(p, A, M, C, t0, t1);
  };
  if (threaded) {
    pool->parallel_for(groups, 1, [&](int64_t b, int64_t e, int t) { body(b, e, t); });
  } else {
    body(0, groups, 0);
  }
}

}  // namespace tilellm::gemm
