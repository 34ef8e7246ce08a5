// Causal multi-head attention over the FB-KV cache with block-wise online softmax: keys are visited in blocks
// of 32; each block's scores update a running max m, running denominator l and running weighted sum acc:
//   m' = max(m, max_j s_j);  acc = acc * e^(m - m') + sum_j e^(s_j - m') v_j;  l = l * e^(m - m') + sum_j
//   e^(s_j - m')
// and out = acc / l at the end. Only a 32-score block and one head-sized accumulator live per (token, head),
// so the op needs no scratch proportional to the context. The two inner loops (q·k over a cached row, acc +=
// w·v) read the cache in its own type; with AVX2+F16C they convert and multiply 8 lanes at a time.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/isa_target.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm {
namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kMaxHeadDim = 512;

// q · row, the row one head of a cached K row in the cache's type.
float dot_row_scalar(const uint8_t* row, GgmlType type, const float* q, int64_t n) {
  float d = 0.0f;
  if (type == GgmlType::F32) {
    const float* f = reinterpret_cast<const float*>(row);
    for (int64_t i = 0; i < n; ++i) d += q[i] * f[i];
  } else {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
    for (int64_t i = 0; i < n; ++i) d += q[i] * fp16_to_fp32(h[i]);
  }
  return d;
}

// acc += w * row, the row one head of a cached V row.
void axpy_row_scalar(float* acc, float w, const uint8_t* row, GgmlType type, int64_t n) {
  if (type == GgmlType::F32) {
    const float* f = reinterpret_cast<const float*>(row);
    for (int64_t i = 0; i < n; ++i) acc[i] += w * f[i];
  } else {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
    for (int64_t i = 0; i < n; ++i) acc[i] += w * fp16_to_fp32(h[i]);
  }
}

#if TILELLM_ISA_COMPILES(AVX2)
TILELLM_ISA_HOT(AVX2) __m256 load8(const uint8_t* row, GgmlType type, int64_t i) {
  if (type == GgmlType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  return _mm256_cvtph_ps(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + i)));
}

TILELLM_ISA_FN(AVX2) float dot_row_avx2(const uint8_t* row, GgmlType type, const float* q, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(row, type, i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8(row, type, i + 8), a1);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(row, type, i), a0);
  a0 = _mm256_add_ps(a0, a1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float d = _mm_cvtss_f32(h);
  if (i < n) d += dot_row_scalar(row + (type == GgmlType::F32 ? 4 : 2) * size_t(i), type, q + i, n - i);
  return d;
}

TILELLM_ISA_FN(AVX2) void axpy_row_avx2(float* acc, float w, const uint8_t* row, GgmlType type, int64_t n) {
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, load8(row, type, i), _mm256_loadu_ps(acc + i)));
  }
  if (i < n) axpy_row_scalar(acc + i, w, row + (type == GgmlType::F32 ? 4 : 2) * size_t(i), type, n - i);
}
#endif

using DotFn = float (*)(const uint8_t*, GgmlType, const float*, int64_t);
using AxpyFn = void (*)(float*, float, const uint8_t*, GgmlType, int64_t);

struct RowKernels {
  DotFn dot;
  AxpyFn axpy;
};

constexpr RowKernels kScalar{dot_row_scalar, axpy_row_scalar};
#if TILELLM_ISA_COMPILES(AVX2)
constexpr RowKernels kAvx2{dot_row_avx2, axpy_row_avx2};
#endif
TILELLM_ISA_PROVIDER(const RowKernels*, avx2_row_kernels, AVX2, &kAvx2)

// The row kernels of the running ISA (base/cpu_isa.h).
const RowKernels& row_kernels() {
  static const IsaTable<const RowKernels*> t = {{CpuIsa::Scalar, &kScalar},
                                                {CpuIsa::Avx2, avx2_row_kernels()}};
  return *t.get();
}

}  // namespace

void CpuBackend::attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos,
                           int64_t n_tok, const AttnParams& p, float* out) {
  if (p.head_dim > kMaxHeadDim) fail("attention: head size {} exceeds {}", p.head_dim, kMaxHeadDim);
  if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.n_head_kv * p.head_dim != kv.kv_dim()) {
    fail("attention: {} heads over {} KV heads of size {} do not fit a cache row of {}", p.n_head,
         p.n_head_kv, p.head_dim, kv.kv_dim());
  }
  if (layer < 0 || layer >= kv.n_layer())
    fail("attention: layer {} outside the cache's {}", layer, kv.n_layer());
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] < 0 || pos[t] >= kv.n_ctx())
      fail("position {} is outside the KV cache of {}", pos[t], kv.n_ctx());
  }
  const int64_t hd = p.head_dim;
  const int64_t group = p.n_head / p.n_head_kv;
  const uint8_t* kplane = kv.plane(layer, 0);
  const uint8_t* vplane = kv.plane(layer, 1);
  const size_t rb = kv.row_bytes();
  const size_t hb = size_t(hd) * (kv.type() == GgmlType::F16 ? 2 : 4);  // bytes of one head within a row

  pool_.parallel_for(n_tok * p.n_head, 1, [&](int64_t b, int64_t e, int) {
    const RowKernels& kern = row_kernels();
    float acc[kMaxHeadDim];
    float s[kBlock];
    for (int64_t r = b; r < e; ++r) {
      const int64_t t = r / p.n_head, h = r % p.n_head, kvh = h / group;
      const float* qh = q + r * hd;
      const int64_t last = pos[t];
      const int64_t first = p.window > 0 ? std::max<int64_t>(0, last - p.window + 1) : 0;
      float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
      std::fill(acc, acc + hd, 0.0f);
      for (int64_t j0 = first; j0 <= last; j0 += kBlock) {
        const int64_t nb = std::min(kBlock, last + 1 - j0);
        float bmax = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < nb; ++j) {
          s[j] = kern.dot(kplane + size_t(j0 + j) * rb + size_t(kvh) * hb, kv.type(), qh, hd) * p.scale;
          bmax = std::max(bmax, s[j]);
        }
        const float m_new = std::max(m, bmax);
        const float corr = std::exp(m - m_new);  // 0 on the first block (m = -inf)
        l *= corr;
        for (int64_t i = 0; i < hd; ++i) acc[i] *= corr;
        for (int64_t j = 0; j < nb; ++j) {
          const float w = std::exp(s[j] - m_new);
          l += w;
          kern.axpy(acc, w, vplane + size_t(j0 + j) * rb + size_t(kvh) * hb, kv.type(), hd);
        }
        m = m_new;
      }
      float* o = out + r * hd;
      const float inv = 1.0f / l;
      for (int64_t i = 0; i < hd; ++i) o[i] = acc[i] * inv;
    }
  });
}

}  // namespace tilellm
