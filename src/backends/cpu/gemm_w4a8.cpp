// W4A8 (our "int4a8-gemm": per-channel uint4 weights, int8 activations) and what every quantized mode
// shares: the run-time activation quantization, the dequantization used by references, and the
// multithreaded driver that hands groups of 16-channel tiles to the 8-bit or 4-bit kernel.
#include <algorithm>
#include <cmath>

#include "bench/gemm_qkernel.h"

namespace tilellm::gemm {

float QuantMatrix::dequantize(int n, int k) const {
  const int t = n / kTileN, c = n % kTileN, b = k / block;
  const uint16_t* pb = params.as<uint16_t>() + (size_t(t) * nblocks + b) * 2 * kTileN;
  const int u = bits == 8 ? detail::code_at<8>(*this, n, k) : detail::code_at<4>(*this, n, k);
  return float(u) * fp16_to_fp32(pb[c]) + fp16_to_fp32(pb[kTileN + c]);
}

void QuantActs::resize(int m, const QuantMatrix& w) {
  if (m != M || w.Kp != Kp || w.block != block) {
    M = m;
    Kp = w.Kp;
    block = w.block;
    nblocks = w.nblocks;
    q = AlignedBuffer(size_t(M) * Kp);
    sums = AlignedBuffer(size_t(M) * nblocks * sizeof(int32_t));
    scales = AlignedBuffer(size_t(M) * sizeof(float));
  }
}

void quantize_acts(const float* A, int M, int K, QuantActs& out, ThreadPool* pool) {
  auto body = [&](int64_t b, int64_t e, int) {
    for (int64_t m = b; m < e; ++m) {
      const float* a = A + size_t(m) * K;
      int8_t* q = out.q.as<int8_t>() + size_t(m) * out.Kp;
      float amax = 0.0f;
      for (int k = 0; k < K; ++k) amax = std::max(amax, std::fabs(a[k]));
      const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
      const float inv = 1.0f / s;
      for (int k = 0; k < K; ++k) {
        q[k] = int8_t(std::clamp(std::nearbyint(a[k] * inv), -127.0f, 127.0f));
      }
      std::fill(q + K, q + out.Kp, int8_t(0));
      out.scales.as<float>()[m] = s;
      int32_t* sums = out.sums.as<int32_t>() + size_t(m) * out.nblocks;
      for (int bl = 0; bl < out.nblocks; ++bl) {
        int32_t sum = 0;
        for (int k = bl * out.block; k < (bl + 1) * out.block; ++k) sum += q[k];
        sums[bl] = sum;
      }
    }
  };
  if (pool && pool->size() > 1) {
    pool->parallel_for(M, 1, [&](int64_t b, int64_t e, int t) { body(b, e, t); });
  } else {
    body(0, M, 0);
  }
}

void gemm_quant(const QuantMatrix& w, const QuantActs& a, float* C, ThreadPool* pool, Isa isa) {
  const int tiles = w.Np / kTileN;
  const int G = w.bits == 8 ? detail::QShape<8>::kTiles : detail::QShape<4>::kTiles;
  const int groups = (tiles + G - 1) / G;
  auto body = [&](int64_t b, int64_t e, int) {
    const int t0 = int(b) * G, t1 = std::min(tiles, int(e) * G);
    if (w.bits == 8) {
      gemm_q8_tiles(w, a, C, 0, a.M, t0, t1, isa);
    } else {
      gemm_q4_tiles(w, a, C, 0, a.M, t0, t1, isa);
    }
  };
  if (pool && pool->size() > 1) {
    pool->parallel_for(groups, 1, [&](int64_t b, int64_t e, int t) { body(b, e, t); });
  } else {
    body(0, groups, 0);
  }
}

}  // namespace tilellm::gemm
