// Gated linear unit of the feed-forward block: out = act(gate) * up, with act SiLU (llama) or GELU in its
// tanh form (Gemma), both written through one exponential: SiLU x / (1 + e^-x), GELU x / (1 + e^(-2z)).
//
// The exponential: std::exp per element, or, where the CPU has AVX2 + FMA, eight at a time by the classic
// reduction e^x = 2^n * e^r (n = round(x / ln 2), r = x - n ln 2 in two steps so r keeps full precision,
// |r| <= ln2 / 2) with a degree-6 polynomial for e^r (Cephes' expf coefficients). Its error stays within 2
// ulp of the exact value over the whole float range (tests/backends/test_cpu_ops.cpp sweeps it), so this op's
// results stay within the bounds its float64 reference test allows; llama.cpp's own SiLU uses a vectorized
// exponential too. Inputs beyond the float range of e^x give 0 or infinity, as std::exp does.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "base/isa_target.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;

#if TILELLM_ISA_COMPILES(AVX2)
#define TILELLM_AVX2 TILELLM_ISA_FN(AVX2)

TILELLM_AVX2 inline __m256 exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.72283935546875f), lo = _mm256_set1_ps(-87.33654785156250f);
  const __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ), under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n for n in [-126, 128]: n = 128 (only near the top of the range) is applied as 2 * 2^127.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i top = _mm256_cmpgt_epi32(ni, _mm256_set1_epi32(127));
  const __m256i e = _mm256_sub_epi32(ni, _mm256_and_si256(top, _mm256_set1_epi32(1)));
  const __m256 scale =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_mul_ps(p, scale);
  y = _mm256_blendv_ps(y, _mm256_mul_ps(y, _mm256_set1_ps(2.0f)), _mm256_castsi256_ps(top));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
  return _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
}

TILELLM_AVX2 inline __m256 glu8(__m256 x, __m256 u, FfnAct act) {
  __m256 arg;
  if (act == FfnAct::SiLU) {
    arg = _mm256_sub_ps(_mm256_setzero_ps(), x);
  } else {
    // ((0.044715 x) x) x, multiplied in the scalar path's order: z feeds an exponential whose result's
    // relative error is |2z| times z's, so both paths form z bit for bit alike.
    const __m256 c3 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), x), x), x);
    const __m256 z = _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi), _mm256_add_ps(x, c3));
    arg = _mm256_mul_ps(_mm256_set1_ps(-2.0f), z);
  }
  const __m256 y = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(arg)));
  return _mm256_mul_ps(y, u);
}

// Elements [b, e), every one through the vector formula (a short tail through a padded copy), so a result
// never depends on how the range was split among threads.
TILELLM_AVX2 void glu_avx2(const float* gate, const float* up, float* out, int64_t b, int64_t e, FfnAct act) {
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    _mm256_storeu_ps(out + i, glu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), act));
  }
  if (i < e) {
    alignas(32) float g[8] = {}, u[8] = {}, y[8];
    for (int64_t j = i; j < e; ++j) {
      g[j - i] = gate[j];
      u[j - i] = up[j];
    }
    _mm256_store_ps(y, glu8(_mm256_load_ps(g), _mm256_load_ps(u), act));
    for (int64_t j = i; j < e; ++j) out[j] = y[j - i];
  }
}
#endif

void glu_scalar(const float* gate, const float* up, float* out, int64_t b, int64_t e, FfnAct act) {
  if (act == FfnAct::SiLU) {
    for (int64_t i = b; i < e; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  } else {
    // 0.5 x (1 + tanh z) written as x / (1 + e^(-2z)): the same function, but without the cancellation of
    // 1 + tanh z for very negative z, so it keeps full relative precision there.
    for (int64_t i = b; i < e; ++i) {
      const float x = gate[i];
      const float z = kSqrt2OverPi * (x + 0.044715f * x * x * x);
      out[i] = x / (1.0f + std::exp(-2.0f * z)) * up[i];
    }
  }
}

using GluFn = void (*)(const float*, const float*, float*, int64_t, int64_t, FfnAct);
TILELLM_ISA_PROVIDER(GluFn, avx2_glu, AVX2, glu_avx2)

}  // namespace

void CpuBackend::glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) {
  // The kernel of the running ISA (base/cpu_isa.h).
  static const IsaTable<GluFn> t = {{CpuIsa::Scalar, glu_scalar}, {CpuIsa::Avx2, avx2_glu()}};
  const GluFn fn = t.get();
  pool_.parallel_for(n, 2048, [&](int64_t b, int64_t e, int) { fn(gate, up, out, b, e, act); });
}

}  // namespace tilellm
