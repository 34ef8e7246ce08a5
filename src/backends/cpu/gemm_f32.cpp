// fp32 GEMM for `tilellm gemm-speed` (float-gemm): C[M,N] = A[M,K] x W^T, W packed as [N/16][K][16].
// AVX-512 path: register tiles of up to 8 rows x 48 channels (24 zmm accumulators), K in chunks of kKc so
// the weight chunk stays in L1/L2 while every row block of A streams past it. Scalar path: same packing,
// plain loops. Work is split over groups of three 16-channel tiles.
#include <algorithm>
#include <cstring>

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

constexpr int kKc = 256;  // k per cache block
// Register tile: 8 rows x 3 tiles of 16 channels = 24 zmm accumulators, 3 weight loads and 8 broadcasts per
// 24 FMAs, so the loop is FMA-bound rather than load-bound.
constexpr int kMr = 8, kNt = 3;

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

// MR rows x NT tiles over k in [k0,k1). first: start from zero, else add to C. Partial channel counts only
// on the last tile (nc < 16): stored with a mask.
template <int MR, int NT>
TILELLM_AVX512 inline void f32_micro(const float* A, int lda, const float* w, int K, int k0, int k1, float* C,
                                     int ldc, bool first, int nc_last) {
  __m512 acc[MR][NT];
  const __mmask16 last_mask = __mmask16((1u << nc_last) - 1u);
  for (int r = 0; r < MR; ++r) {
    for (int j = 0; j < NT; ++j) {
      const __mmask16 mk = j == NT - 1 ? last_mask : __mmask16(0xffff);
      acc[r][j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mk, C + size_t(r) * ldc + j * kTileN);
    }
  }
  for (int k = k0; k < k1; ++k) {
    __m512 wv[NT];
    for (int j = 0; j < NT; ++j) wv[j] = _mm512_load_ps(w + (size_t(j) * K + k) * kTileN);
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(A[size_t(r) * lda + k]);
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

template <int NT>
TILELLM_AVX512 void f32_rows(const float* A, int M, int lda, const float* w, int K, int k0, int k1, float* C,
                             int ldc, bool first, int nc_last) {
  int m = 0;
  for (; m + kMr <= M; m += kMr) {
    f32_micro<kMr, NT>(A + size_t(m) * lda, lda, w, K, k0, k1, C + size_t(m) * ldc, ldc, first, nc_last);
  }
  const float* a = A + size_t(m) * lda;
  float* c = C + size_t(m) * ldc;
  switch (M - m) {
    case 7:
      f32_micro<7, NT>(a, lda, w, K, k0, k1, c, ldc, first, nc_last);
      break;
    case 6:
      f32_micro<6, NT>(a, lda, w, K, k0, k1, c, ldc, first, nc_last);
      break;
    case 5:
      f32_micro<5, NT>(a, lda, w, K, k0, k1, c, ldc, first, nc_last);
      break;
    case 4:
      f32_micro<4, NT>(a, lda, w, K, k0, k1, c, ldc, first, nc_last);
      break;
    case 3:
      f32_micro<3, NT>(a, lda, w, K, k0, k1, c, ldc, first, nc_last);
      break;
    case 2:
      f32_micro<2, NT>(a, lda, w, K, k0, k1, c, ldc, first, nc_last);
      break;
    case 1:
      f32_micro<1, NT>(a, lda, w, K, k0, k1, c, ldc, first, nc_last);
      break;
    default:
      break;
  }
}

// Tiles [t0,t1) in groups of kNt; a group's K chunk is reused by every row block before moving on.
TILELLM_AVX512 void f32_tiles_avx512(const PackedF32& p, const float* A, int M, float* C, int t0, int t1) {
  const int K = p.K;
  for (int t = t0; t < t1; t += kNt) {
    const int nt = std::min(kNt, t1 - t);
    const int nc_last = std::min(kTileN, p.N - (t + nt - 1) * kTileN);
    const float* w = p.w.as<float>() + size_t(t) * K * kTileN;
    float* c = C + size_t(t) * kTileN;
    for (int k0 = 0; k0 < K; k0 += kKc) {
      const int k1 = std::min(K, k0 + kKc);
      if (nt == 3) {
        f32_rows<3>(A, M, K, w, K, k0, k1, c, p.N, k0 == 0, nc_last);
      } else if (nt == 2) {
        f32_rows<2>(A, M, K, w, K, k0, k1, c, p.N, k0 == 0, nc_last);
      } else {
        f32_rows<1>(A, M, K, w, K, k0, k1, c, p.N, k0 == 0, nc_last);
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
  auto body = [&](int64_t b, int64_t e, int) {
    const int t0 = int(b) * kNt, t1 = std::min(tiles, int(e) * kNt);
#if defined(__x86_64__)
    if (isa == Isa::kAvx512Vnni) {
      f32_tiles_avx512(p, A, M, C, t0, t1);
      return;
    }
#endif
    f32_tiles_scalar(p, A, M, C, t0, t1);
  };
  if (pool && pool->size() > 1) {
    pool->parallel_for(groups, 1, [&](int64_t b, int64_t e, int t) { body(b, e, t); });
  } else {
    body(0, groups, 0);
  }
}

}  // namespace tilellm::gemm
