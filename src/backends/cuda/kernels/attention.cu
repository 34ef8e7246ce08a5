// Causal attention with grouped-query heads and an optional sliding window, the online softmax over chunks
// of keys (the FB-KV cache: [pos][kv_dim] planes, f16 or f32).
//
// attention_kernel (decode, and any prompt the tiled kernel does not take): a block of 128 threads per
// (query head, token[, split]). Per chunk of 128 keys each thread scores one key (its K row read 16 bytes
// at a time where rows are 16-byte aligned); the chunk's max and sum are block reductions; then each warp
// takes every fourth key of the chunk and each lane its own output dims (lane, lane + 32, ...: coalesced V
// reads), the four warps' partial sums added at the end. With splits > 1 (one token) each of `splits`
// blocks of a head takes a share of the keys (at least 16: split_share) and leaves (acc, max, sum) in `work`;
// combine_kernel merges the busy ones. One block a head left most of the GPU idle: a 7B-shaped decode at
// depth 1024 ran at 97 t/s with one split, 378 with 32.
//
// attention_tiled_kernel (prompts, head sizes of 32 .. 128 in steps of 32): a block of 4 warps per 16
// consecutive tokens of one head, so every K and V row is read once per 16 queries: chunks of 32 keys are
// staged in shared memory as floats; lane j scores key j against the warp's 4 queries (their rows
// broadcast from shared memory), and the weighted V sums give each lane the output dims lane, lane + 32,
// ... of the warp's 4 queries.
//
// With q8.q set, the output is also written rounded for the next product (kernels.h Q8): a warp's 32
// consecutive output dims are one block (head sizes multiple of 32).
#include "common.cuh"

namespace tilellm::cuda {
namespace {

constexpr int kThreads = 128;  // threads of a block; keys in a chunk of attention_kernel
constexpr int kMaxDims = 16;   // output dims a lane: head_dim <= 512

__device__ __forceinline__ float kv_at(const void* plane, bool f16, int64_t at) {
  return f16 ? __half2float(static_cast<const __half*>(plane)[at]) : static_cast<const float*>(plane)[at];
}

// q . K row at `at` (head_dim elements), q in shared memory.
__device__ __forceinline__ float dot_row(const float* q, const void* plane, int64_t at, int hd, bool f16,
                                         bool vec) {
  float s = 0.0f;
  if (vec && f16) {
    const uint4* k = reinterpret_cast<const uint4*>(static_cast<const __half*>(plane) + at);
#pragma unroll 4
    for (int c = 0; c < hd / 8; ++c) {
      const uint4 w = k[c];
      const __half2* h = reinterpret_cast<const __half2*>(&w);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __half22float2(h[e]);
        s += q[8 * c + 2 * e] * f.x + q[8 * c + 2 * e + 1] * f.y;
      }
    }
  } else if (vec) {
    const float4* k = reinterpret_cast<const float4*>(static_cast<const float*>(plane) + at);
#pragma unroll 4
    for (int c = 0; c < hd / 4; ++c) {
      const float4 f = k[c];
      s += q[4 * c] * f.x + q[4 * c + 1] * f.y + q[4 * c + 2] * f.z + q[4 * c + 3] * f.w;
    }
  } else {
    for (int d = 0; d < hd; ++d) s += q[d] * kv_at(plane, f16, at + d);
  }
  return s;
}

// The key range [lo, hi) a query at position p sees.
__device__ __forceinline__ void key_range(int p, int window, int& lo, int& hi) {
  lo = window > 0 ? max(0, p - window + 1) : 0;
  hi = p + 1;
}

// Keys a split of a decode query takes: an equal share, but at least kMinSplitKeys, so that a short context
// keeps few splits busy and the others (launched for the longest context: the step is one replayed graph)
// leave at once. How many are busy: ceil((hi - lo) / share), the same in attention_kernel and combine_kernel.
constexpr int kMinSplitKeys = 16;
__device__ __forceinline__ int split_share(int lo, int hi, int splits) {
  return max((hi - lo + splits - 1) / splits, kMinSplitKeys);
}

__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* q, const void* k_plane, const void* v_plane, const int32_t* pos, AttnArgs a,
                     int splits, float* work, float* out, Q8 q8) {
  extern __shared__ float sh[];
  float* qs = sh;                      // [head_dim]
  float* ps = qs + a.head_dim;         // [kThreads] the chunk's probabilities
  float* part = ps + kThreads;         // [4][head_dim] the warps' partial sums
  float* red = part + 4 * a.head_dim;  // [32] reductions
  griddep_wait();
  griddep_launch_dependents();
  const int h = blockIdx.x, t = blockIdx.y, split = blockIdx.z, tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int hd = a.head_dim, kh = h / (a.n_head / a.n_head_kv), nd = (hd + 31) / 32;
  int lo, hi;
  key_range(pos[t], a.window, lo, hi);
  const int share = split_share(lo, hi, splits);
  const int my_lo = lo + split * share, my_hi = min(hi, my_lo + share);
  if (my_lo >= hi) return;  // an idle split (never split 0): combine_kernel reads only the busy ones
  const float* qh = q + (int64_t(t) * a.n_head + h) * hd;
  for (int d = tid; d < hd; d += kThreads) qs[d] = qh[d];
  __syncthreads();
  const int per16 = a.f16 ? 8 : 4;
  const bool vec = hd % per16 == 0 && a.kv_dim % per16 == 0;
  const int64_t head_off = int64_t(kh) * hd;

  float m = -INFINITY, l = 0.0f, acc[kMaxDims];
#pragma unroll
  for (int e = 0; e < kMaxDims; ++e) acc[e] = 0.0f;
  for (int j0 = my_lo; j0 < my_hi; j0 += kThreads) {
    const int j = j0 + tid;
    float sc = -INFINITY;
    if (j < my_hi) sc = a.scale * dot_row(qs, k_plane, int64_t(j) * a.kv_dim + head_off, hd, a.f16, vec);
    const float m_new = fmaxf(m, block_max(sc, red));  // finite: the chunk holds at least one key
    const float pj = j < my_hi ? expf(sc - m_new) : 0.0f;
    ps[tid] = pj;
    const float chunk_sum = block_sum(pj, red);  // its barriers publish ps
    const float corr = expf(m - m_new);          // 0 on the first chunk (m = -inf)
    l = l * corr + chunk_sum;
    const int n = min(kThreads, my_hi - j0);
    float s[kMaxDims];
#pragma unroll
    for (int e = 0; e < kMaxDims; ++e) s[e] = 0.0f;
    for (int jj = warp; jj < n; jj += 4) {
      const float p = ps[jj];
      const int64_t row = int64_t(j0 + jj) * a.kv_dim + head_off;
#pragma unroll
      for (int e = 0; e < kMaxDims; ++e) {
        const int d = lane + 32 * e;
        if (e < nd && d < hd) s[e] += p * kv_at(v_plane, a.f16, row + d);
      }
    }
#pragma unroll
    for (int e = 0; e < kMaxDims; ++e) acc[e] = acc[e] * corr + s[e];
    m = m_new;
  }
#pragma unroll
  for (int e = 0; e < kMaxDims; ++e) {
    const int d = lane + 32 * e;
    if (e < nd && d < hd) part[warp * hd + d] = acc[e];
  }
  __syncthreads();
  if (splits == 1) {
    float* o = out + (int64_t(t) * a.n_head + h) * hd;
    for (int d0 = 0; d0 < hd; d0 += kThreads) {  // uniform: the quantization's shuffles need whole warps
      const int d = d0 + tid;
      float v = 0.0f;
      if (d < hd) {
        v = (part[d] + part[hd + d] + part[2 * hd + d] + part[3 * hd + d]) / l;
        o[d] = v;
      }
      if (q8.q && d0 + (tid & ~31) < hd) {
        const int64_t i = (int64_t(t) * a.n_head + h) * hd + d;
        quantize_block(v, i, i / 32, q8);
      }
    }
    return;
  }
  // Partial result of this split (one token): [split][n_head][head_dim + 2] = acc..., max, sum.
  float* w = work + (int64_t(split) * a.n_head + h) * (hd + 2);
  for (int d = tid; d < hd; d += kThreads)
    w[d] = part[d] + part[hd + d] + part[2 * hd + d] + part[3 * hd + d];
  if (tid == 0) {
    w[hd] = m;
    w[hd + 1] = l;
  }
}

__global__ void combine_kernel(const float* work, const int32_t* pos, AttnArgs a, int splits, float* out,
                               Q8 q8) {
  griddep_wait();
  griddep_launch_dependents();
  const int h = blockIdx.x, n_head = a.n_head, hd = a.head_dim;
  int lo, hi;
  key_range(pos[0], a.window, lo, hi);
  const int share = split_share(lo, hi, splits);
  splits = min(splits, (hi - lo + share - 1) / share);  // the busy ones
  float m = -INFINITY;
  for (int s = 0; s < splits; ++s) m = fmaxf(m, work[(int64_t(s) * n_head + h) * (hd + 2) + hd]);
  for (int d0 = 0; d0 < hd; d0 += blockDim.x) {
    const int d = d0 + threadIdx.x;
    float v = 0.0f;
    if (d < hd) {
      float num = 0.0f, den = 0.0f;
      for (int s = 0; s < splits; ++s) {
        const float* w = work + (int64_t(s) * n_head + h) * (hd + 2);
        const float f = w[hd + 1] > 0.0f ? expf(w[hd] - m) : 0.0f;  // an empty split has max -inf, sum 0
        num += f * w[d];
        den += f * w[hd + 1];
      }
      v = num / den;
      out[int64_t(h) * hd + d] = v;
    }
    if (q8.q && d0 + int(threadIdx.x & ~31) < hd)
      quantize_block(v, int64_t(h) * hd + d, (int64_t(h) * hd + d) / 32, q8);
  }
}

// ---- prompts: 16 queries a block
constexpr int kTileQ = 16, kChunk = 32, kTileMaxDims = 4;  // head_dim <= 128

template <bool F16>
__global__ void __launch_bounds__(128)
    attention_tiled_kernel(const float* q, const void* k_plane, const void* v_plane, const int32_t* pos,
                           int n_tok, AttnArgs a, float* out, Q8 q8) {
  extern __shared__ __align__(16) float tsh[];
  const int hd = a.head_dim, nd = hd / 32, ks = hd + 4;  // K rows padded to 16-byte multiples
  float* qs = tsh;                                       // [kTileQ][hd]
  float* kc = qs + kTileQ * hd;                          // [kChunk][hd + 4]
  float* vc = kc + kChunk * ks;                          // [kChunk][hd]
  float* ps = vc + kChunk * hd;                          // [4 warps][4 queries][kChunk]
  griddep_wait();
  griddep_launch_dependents();
  const int h = blockIdx.x, t0 = blockIdx.y * kTileQ, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kh = h / (a.n_head / a.n_head_kv);
  const int64_t head_off = int64_t(kh) * hd;
  // The tile's queries (rows past n_tok repeat the last token and are not written).
  for (int i = tid; i < kTileQ * hd; i += 128) {
    const int tq = min(t0 + i / hd, n_tok - 1);
    qs[i] = q[(int64_t(tq) * a.n_head + h) * hd + i % hd] * a.scale;
  }
  int lo_w[4], hi_w[4];  // the key ranges of the warp's 4 queries
  int lo_all = INT32_MAX, hi_all = 0;
  for (int i = 0; i < kTileQ; ++i) {
    int lo, hi;
    key_range(pos[min(t0 + i, n_tok - 1)], a.window, lo, hi);
    lo_all = min(lo_all, lo);
    hi_all = max(hi_all, hi);
    if (i / 4 == warp) lo_w[i % 4] = lo, hi_w[i % 4] = hi;
  }
  float m[4], l[4], acc[4][kTileMaxDims];
#pragma unroll
  for (int qi = 0; qi < 4; ++qi) {
    m[qi] = -INFINITY;
    l[qi] = 0.0f;
#pragma unroll
    for (int e = 0; e < kTileMaxDims; ++e) acc[qi][e] = 0.0f;
  }
  const float* qw = qs + warp * 4 * hd;  // the warp's 4 query rows
  for (int j0 = lo_all - lo_all % kChunk; j0 < hi_all; j0 += kChunk) {
    __syncthreads();  // the previous chunk's rows are read
    // Rows in runs of 8 elements (16-byte loads of halves; two of floats); rows past the keys: any row (their
    // scores are masked).
    for (int i = tid; i < kChunk * hd / 8; i += 128) {
      const int jj = (8 * i) / hd, d = (8 * i) % hd;
      const int j = min(j0 + jj, hi_all - 1);
      const int64_t at = int64_t(j) * a.kv_dim + head_off + d;
      float4 k0, k1, v0, v1;
      if constexpr (F16) {
        const uint4 kw = *reinterpret_cast<const uint4*>(static_cast<const __half*>(k_plane) + at);
        const uint4 vw = *reinterpret_cast<const uint4*>(static_cast<const __half*>(v_plane) + at);
        const __half2* kh2 = reinterpret_cast<const __half2*>(&kw);
        const __half2* vh2 = reinterpret_cast<const __half2*>(&vw);
        const float2 a0 = __half22float2(kh2[0]), a1 = __half22float2(kh2[1]), a2 = __half22float2(kh2[2]),
                     a3 = __half22float2(kh2[3]);
        const float2 b0 = __half22float2(vh2[0]), b1 = __half22float2(vh2[1]), b2 = __half22float2(vh2[2]),
                     b3 = __half22float2(vh2[3]);
        k0 = make_float4(a0.x, a0.y, a1.x, a1.y);
        k1 = make_float4(a2.x, a2.y, a3.x, a3.y);
        v0 = make_float4(b0.x, b0.y, b1.x, b1.y);
        v1 = make_float4(b2.x, b2.y, b3.x, b3.y);
      } else {
        const float4* kf = reinterpret_cast<const float4*>(static_cast<const float*>(k_plane) + at);
        const float4* vf = reinterpret_cast<const float4*>(static_cast<const float*>(v_plane) + at);
        k0 = kf[0], k1 = kf[1], v0 = vf[0], v1 = vf[1];
      }
      *reinterpret_cast<float4*>(kc + jj * ks + d) = k0;
      *reinterpret_cast<float4*>(kc + jj * ks + d + 4) = k1;
      *reinterpret_cast<float4*>(vc + jj * hd + d) = v0;
      *reinterpret_cast<float4*>(vc + jj * hd + d + 4) = v1;
    }
    __syncthreads();
    // Lane = key j0 + lane: its score against the warp's 4 queries.
    float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float4* kr = reinterpret_cast<const float4*>(kc + lane * ks);
    for (int c = 0; c < hd / 4; ++c) {
      const float4 k4 = kr[c];
#pragma unroll
      for (int qi = 0; qi < 4; ++qi) {
        const float4 q4 = reinterpret_cast<const float4*>(qw + qi * hd)[c];
        sc[qi] += q4.x * k4.x + q4.y * k4.y + q4.z * k4.z + q4.w * k4.w;
      }
    }
    const int j = j0 + lane;
    float corr[4];
#pragma unroll
    for (int qi = 0; qi < 4; ++qi) {
      const bool seen = j >= lo_w[qi] && j < hi_w[qi];
      const float s = seen ? sc[qi] : -INFINITY;
      const float m_new = fmaxf(m[qi], warp_max(s));
      const float p = seen ? expf(s - m_new) : 0.0f;  // m_new may be -inf only when nothing is seen yet
      ps[(warp * 4 + qi) * kChunk + lane] = p;
      corr[qi] = m_new == -INFINITY ? 1.0f : expf(m[qi] - m_new);
      l[qi] = l[qi] * corr[qi] + warp_sum(p);
      m[qi] = m_new;
    }
    __syncwarp();
#pragma unroll
    for (int qi = 0; qi < 4; ++qi) {
#pragma unroll
      for (int e = 0; e < kTileMaxDims; ++e) acc[qi][e] *= corr[qi];
    }
    const float* pw = ps + warp * 4 * kChunk;
    for (int jj = 0; jj < kChunk; ++jj) {
      float vv[kTileMaxDims];
#pragma unroll
      for (int e = 0; e < kTileMaxDims; ++e) vv[e] = e < nd ? vc[jj * hd + lane + 32 * e] : 0.0f;
#pragma unroll
      for (int qi = 0; qi < 4; ++qi) {
        const float p = pw[qi * kChunk + jj];
#pragma unroll
        for (int e = 0; e < kTileMaxDims; ++e) acc[qi][e] += p * vv[e];
      }
    }
  }
#pragma unroll
  for (int qi = 0; qi < 4; ++qi) {
    const int t = t0 + warp * 4 + qi;
    const bool in = t < n_tok;  // uniform over the warp
#pragma unroll
    for (int e = 0; e < kTileMaxDims; ++e) {
      if (e >= nd || !in) continue;
      const float v = acc[qi][e] / l[qi];
      const int64_t i = (int64_t(t) * a.n_head + h) * hd + lane + 32 * e;
      out[i] = v;
      if (q8.q) quantize_block(v, i, i / 32, q8);
    }
  }
}

}  // namespace

bool attention_tiled(const AttnArgs& a, int n_tok) {
  // Rows read 8 elements (16 bytes of halves) at a time: kv_dim a multiple of 8 keeps them aligned.
  return n_tok >= 8 && a.head_dim % 32 == 0 && a.head_dim <= 32 * kTileMaxDims && a.kv_dim % 8 == 0;
}

void attention(const float* q, const void* k_plane, const void* v_plane, const int32_t* pos, int n_tok,
               const AttnArgs& a, int splits, float* work, float* out, const Q8& q8, cudaStream_t s) {
  if (n_tok <= 0) return;
  if (attention_tiled(a, n_tok)) {
    const size_t shared = (size_t(kTileQ) * a.head_dim + size_t(kChunk) * (a.head_dim + 4) +
                           size_t(kChunk) * a.head_dim + 4 * 4 * kChunk) *
                          sizeof(float);
    const dim3 grid(a.n_head, ceil_div(n_tok, kTileQ));
    if (a.f16)
      launch_pdl(attention_tiled_kernel<true>, grid, 128, shared, s, q, k_plane, v_plane, pos, n_tok, a, out,
                 q8);
    else
      launch_pdl(attention_tiled_kernel<false>, grid, 128, shared, s, q, k_plane, v_plane, pos, n_tok, a, out,
                 q8);
    return;
  }
  if (n_tok > 1) splits = 1;
  const size_t shared = size_t(a.head_dim + kThreads + 4 * a.head_dim + 32) * sizeof(float);
  launch_pdl(attention_kernel, dim3(a.n_head, n_tok, splits), kThreads, shared, s, q, k_plane, v_plane, pos,
             a, splits, work, out, q8);
  if (splits > 1) launch_pdl(combine_kernel, a.n_head, 128, 0, s, work, pos, a, splits, out, q8);
}

}  // namespace tilellm::cuda
