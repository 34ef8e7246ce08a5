// Causal multi-head attention over the FB-KV cache with block-wise online
// softmax: keys are visited in blocks of 32; each block's scores update a
// running max m, running denominator l and running weighted sum acc:
//   m' = max(m, max_j s_j);  acc = acc * e^(m - m') + sum_j e^(s_j - m') v_j;
//   l = l * e^(m - m') + sum_j e^(s_j - m')
// and out = acc / l at the end. Only a 32-score block and one head-sized
// accumulator live per (token, head), so the op needs no scratch proportional
// to the context.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "format/error.h"
#include "format/fp16.h"

namespace tilellm {
namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kMaxHeadDim = 512;

inline void load_row(const uint8_t* row, GgmlType type, int64_t n, float* out) {
  if (type == GgmlType::F32) {
    const float* f = reinterpret_cast<const float*>(row);
    std::copy(f, f + n, out);
  } else {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
    for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
  }
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
    float kbuf[kMaxHeadDim];
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
          load_row(kplane + size_t(j0 + j) * rb + size_t(kvh) * hb, kv.type(), hd, kbuf);
          float d = 0.0f;
          for (int64_t i = 0; i < hd; ++i) d += qh[i] * kbuf[i];
          s[j] = d * p.scale;
          bmax = std::max(bmax, s[j]);
        }
        const float m_new = std::max(m, bmax);
        const float corr = std::exp(m - m_new);  // 0 on the first block (m = -inf)
        l *= corr;
        for (int64_t i = 0; i < hd; ++i) acc[i] *= corr;
        for (int64_t j = 0; j < nb; ++j) {
          const float w = std::exp(s[j] - m_new);
          l += w;
          load_row(vplane + size_t(j0 + j) * rb + size_t(kvh) * hb, kv.type(), hd, kbuf);
          for (int64_t i = 0; i < hd; ++i) acc[i] += w * kbuf[i];
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
