// Causal attention with grouped-query heads and an optional sliding window, the online softmax over chunks
// of keys (the FB-KV cache: [pos][kv_dim] planes, f16 or f32).
//
// attention_decode_kernel (one token, or a batch decode step's tokens of as many sequences, each in its own
// cache: grid z): a block of 4 warps per (query head, split). Each split takes a
// share of the keys (at least 16: split_share); each warp of it takes KW consecutive keys at a time and
// every lane its own dims (lane, lane + 32, ...), so a key's K and V rows are read coalesced and all of a
// round's rows are loaded before any is used: one memory latency per KW keys. The scores are warp sums and
// each warp keeps its own online softmax (no block barrier per chunk). The four warps' (acc, max, sum)
// merge in shared memory; with splits > 1 each split leaves its merge in `work` and the last split of a
// head to finish (a counter per head) merges the busy ones, so decode attention is one launch. One block a
// head left most of the GPU idle at long contexts (a 7B-shaped decode at depth 1024 ran at 97 t/s with one
// split, 378 with 32); a thread per key reading its whole K row, with block barriers per chunk and a
// second kernel merging the splits, cost ~14 us a layer at short contexts.
//
// attention_kernel (prompts the tiled kernel does not take): a block of 128 threads per (query head,
// token). Per chunk of 128 keys each thread scores one key (its K row read 16 bytes at a time where rows are
// 16-byte aligned); the chunk's max and sum are block reductions; then each warp takes every fourth key of
// the chunk and each lane its own output dims (coalesced V reads), the four warps' partial sums added at
// the end.
//
// attention_tiled_kernel (prompts, head sizes of 32 .. 128 in steps of 32): a block of 4 warps per 16
// consecutive tokens of one head, so every K and V row is read once per 16 queries: chunks of 32 keys are
// staged in shared memory as floats; lane j scores key j against the warp's 4 queries (their rows
// broadcast from shared memory), and the weighted V sums give each lane the output dims lane, lane + 32,
// ... of the warp's 4 queries.
//
// With q8.q set, the output is also written rounded for the next product (kernels.h Q8): a warp's 32
// consecutive output dims are one block (head sizes multiple of 32).
#include <cuda/atomic>

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
// leave at once. How many are busy: ceil((hi - lo) / share).
constexpr int kMinSplitKeys = 16;
__device__ __forceinline__ int split_share(int lo, int hi, int splits) {
  return max((hi - lo + splits - 1) / splits, kMinSplitKeys);
}

__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* q, const void* k_plane, const void* v_plane, const int32_t* pos, AttnArgs a,
                     float* out, Q8 q8) {
  extern __shared__ float sh[];
  float* qs = sh;                      // [head_dim]
  float* ps = qs + a.head_dim;         // [kThreads] the chunk's probabilities
  float* part = ps + kThreads;         // [4][head_dim] the warps' partial sums
  float* red = part + 4 * a.head_dim;  // [32] reductions
  griddep_wait();
  griddep_launch_dependents();
  const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int hd = a.head_dim, kh = h / (a.n_head / a.n_head_kv), nd = (hd + 31) / 32;
  int my_lo, my_hi;
  key_range(pos[t], a.window, my_lo, my_hi);
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
}

// n partials of one head in shared memory (k < n: acc [hd] at p + k * stride, then its max and sum at
// p + k * stride + ms) rescaled to their common max and summed, by a block's threads; an empty one (max -inf,
// sum 0) adds nothing. With out: the head's output (and its Q8 rounding) written; else the merge left as a
// partial at `to` (acc [hd], max, sum).
__device__ __forceinline__ void merge_partials(const float* p, int64_t stride, int ms, int n, int h,
                                               const AttnArgs& a, float* out, const Q8& q8, float* to) {
  const int hd = a.head_dim;
  float m = -INFINITY;
  for (int k = 0; k < n; ++k) m = fmaxf(m, p[k * stride + ms]);
  for (int d0 = 0; d0 < hd + 1; d0 += blockDim.x) {  // uniform: the quantization's shuffles need whole warps
    const int d = d0 + int(threadIdx.x);
    float num = 0.0f, den = 0.0f;
    if (d <= hd) {
      for (int k = 0; k < n; ++k) {
        const float lk = p[k * stride + ms + 1];
        const float f = lk > 0.0f ? expf(p[k * stride + ms] - m) : 0.0f;
        if (d < hd) num += f * p[k * stride + d];
        den += f * lk;
      }
    }
    if (!out) {
      if (d < hd) to[d] = num;
      if (d == hd) to[hd] = m, to[hd + 1] = den;
      continue;
    }
    const float v = d < hd ? num / den : 0.0f;
    if (d < hd) out[int64_t(h) * hd + d] = v;
    if (q8.q && d0 + int(threadIdx.x & ~31) < hd)
      quantize_block(v, int64_t(h) * hd + d, (int64_t(h) * hd + d) / 32, q8);
  }
}

// The busy splits' partials of head h (n <= kMaxAttnSplits), written by other blocks of this
// launch and read past L1: partial k's acc [hd] at p + k * stride, its max and sum after them, combined into
// the head's output (and its Q8 rounding) by the block's threads. The (max, sum) pairs are read all at once
// into ms, then every thread's accumulator loads of 8 partials are issued together (clamped indices, no
// branch between them): a few trips to L2 whatever n is, where a loop with a load behind each branch took
// two or three a partial (H200, docs/PERF.md 2026-12-07 13:26: decode +4-5%, at depth 1024 +5%).
__device__ __forceinline__ void merge_splits(const float* p, int64_t stride, int n, int h, const AttnArgs& a,
                                             float* out, const Q8& q8, float2* ms) {
  const int hd = a.head_dim;
  for (int k = int(threadIdx.x); k < n; k += blockDim.x)
    ms[k] = make_float2(__ldcg(p + k * stride + hd), __ldcg(p + k * stride + hd + 1));
  __syncthreads();
  float m = -INFINITY;
  for (int k = 0; k < n; ++k) m = fmaxf(m, ms[k].x);
  float den = 0.0f;
  for (int k = 0; k < n; ++k) {
    const float f = ms[k].y > 0.0f ? expf(ms[k].x - m) : 0.0f;
    den += f * ms[k].y;
  }
  for (int d0 = 0; d0 < hd; d0 += blockDim.x) {  // uniform: the quantization's shuffles need whole warps
    const int d = d0 + int(threadIdx.x), dc = min(d, hd - 1);
    float num = 0.0f;
    for (int k0 = 0; k0 < n; k0 += 8) {
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = __ldcg(p + min(k0 + u, n - 1) * stride + dc);
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const float2 mk = ms[min(k0 + u, n - 1)];
        const float f = mk.y > 0.0f ? expf(mk.x - m) : 0.0f;
        if (k0 + u < n) num += f * v[u];
      }
    }
    const float v = d < hd ? num / den : 0.0f;
    if (d < hd) out[int64_t(h) * hd + d] = v;
    if (q8.q && d0 + int(threadIdx.x & ~31) < hd)
      quantize_block(v, int64_t(h) * hd + d, (int64_t(h) * hd + d) / 32, q8);
  }
}

template <bool F16>
__device__ __forceinline__ float kv_load(const void* plane, int64_t at) {
  if constexpr (F16)
    return __half2float(static_cast<const __half*>(plane)[at]);
  else
    return static_cast<const float*>(plane)[at];
}

// ND: the dims a lane holds (head_dim <= 32 ND).
template <int ND, bool F16>
__global__ void __launch_bounds__(128)
    attention_decode_kernel(const float* q, const void* k_plane, const void* v_plane, const int32_t* pos,
                            AttnArgs a, int splits, float* work, int* counters, float* out, Q8 q8,
                            const __grid_constant__ SeqPlanes sp) {
  constexpr int KW = ND <= 2 ? 8 : ND <= 4 ? 4 : 2;  // keys a warp reads at once
  constexpr int kStride = 32 * ND + 2;               // a warp's (acc, max, sum) in shared memory
  __shared__ __align__(8) float wsh[4 * kStride];    // then the splits' (max, sum) in merge_splits
  static_assert(4 * kStride >= 2 * kMaxAttnSplits, "merge_splits keeps every split's (max, sum) in wsh");
  __shared__ int last;
  griddep_wait();
  griddep_launch_dependents();
  const int h = blockIdx.x, split = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hd = a.head_dim, kh = h / (a.n_head / a.n_head_kv);
  // Token t of a batch decode step (blockIdx.z; 0 for one token): its query, output, rounding, partials and
  // counters at its offsets, its keys in its sequence's planes.
  const int t = blockIdx.z;
  const int64_t nq = int64_t(a.n_head) * hd;
  q += t * nq;
  out += t * nq;
  if (q8.q) {
    q8.q += t * nq;
    q8.d += t * nq / 32;
    q8.s += t * nq / 16;
  }
  work += int64_t(t) * splits * a.n_head * (hd + 2);
  counters += t * a.n_head;
  const size_t elem = F16 ? 2 : 4;
  k_plane = static_cast<const char*>(k_plane) + size_t(sp.seq[t] * sp.stride) * elem;
  v_plane = static_cast<const char*>(v_plane) + size_t(sp.seq[t] * sp.stride) * elem;
  int lo, hi;
  key_range(pos[t], a.window, lo, hi);
  const int share = split_share(lo, hi, splits);
  const int busy = (hi - lo + share - 1) / share;
  const int my_lo = lo + split * share, my_hi = min(hi, my_lo + share);
  if (split >= busy) return;  // an idle split (never split 0): the merge counts only the busy ones
  const int64_t head_off = int64_t(kh) * hd;
  float qr[ND], acc[ND];
#pragma unroll
  for (int e = 0; e < ND; ++e) {
    const int d = lane + 32 * e;
    qr[e] = d < hd ? q[int64_t(h) * hd + d] * a.scale : 0.0f;
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j0 = my_lo + warp * KW; j0 < my_hi; j0 += 4 * KW) {
    float kr[KW][ND], vr[KW][ND];
#pragma unroll
    for (int i = 0; i < KW; ++i) {
      const int64_t row = int64_t(min(j0 + i, my_hi - 1)) * a.kv_dim + head_off;  // past the end: any row
#pragma unroll
      for (int e = 0; e < ND; ++e) {
        const int d = lane + 32 * e;
        kr[i][e] = d < hd ? kv_load<F16>(k_plane, row + d) : 0.0f;
        vr[i][e] = d < hd ? kv_load<F16>(v_plane, row + d) : 0.0f;
      }
    }
    float sc[KW];
    float mx = m;
#pragma unroll
    for (int i = 0; i < KW; ++i) {
      float p = 0.0f;
#pragma unroll
      for (int e = 0; e < ND; ++e) p += qr[e] * kr[i][e];
      p = warp_sum(p);
      sc[i] = j0 + i < my_hi ? p : -INFINITY;
      mx = fmaxf(mx, sc[i]);  // finite: key j0 is in range
    }
    const float corr = expf(m - mx);  // 0 on the warp's first keys (m = -inf)
    l *= corr;
#pragma unroll
    for (int e = 0; e < ND; ++e) acc[e] *= corr;
#pragma unroll
    for (int i = 0; i < KW; ++i) {
      const float p = expf(sc[i] - mx);  // 0 past the end
      l += p;
#pragma unroll
      for (int e = 0; e < ND; ++e) acc[e] += p * vr[i][e];
    }
    m = mx;
  }
  // The four warps' partials (a warp without keys: max -inf, sum 0), merged by the block.
  float* mine = wsh + warp * kStride;
#pragma unroll
  for (int e = 0; e < ND; ++e) mine[lane + 32 * e] = acc[e];
  if (lane == 0) {
    mine[32 * ND] = m;
    mine[32 * ND + 1] = l;
  }
  __syncthreads();
  if (splits == 1) {
    merge_partials(wsh, kStride, 32 * ND, 4, h, a, out, q8, nullptr);
    return;
  }
  // This split's merge into work [split][n_head][hd + 2]; the last busy split of the head to finish merges
  // them all.
  const int64_t wstride = int64_t(a.n_head) * (hd + 2);
  merge_partials(wsh, kStride, 32 * ND, 4, h, a, nullptr, q8, work + split * wstride + int64_t(h) * (hd + 2));
  __syncthreads();  // the block's partial written before thread 0 counts it
  if (threadIdx.x == 0) {
    // Release: the partial (ordered before by the barrier) is visible to the block that sees this count;
    // acquire: the last block sees every other split's partial (and shares that by the barrier below).
    ::cuda::atomic_ref<int, ::cuda::thread_scope_device> count(counters[h]);
    last = count.fetch_add(1, ::cuda::memory_order_acq_rel) == busy - 1;
    if (last) count.store(0, ::cuda::memory_order_relaxed);  // for the next launch
  }
  __syncthreads();
  if (!last) return;
  merge_splits(work + int64_t(h) * (hd + 2), wstride, busy, h, a, out, q8, reinterpret_cast<float2*>(wsh));
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
               const AttnArgs& a, int splits, float* work, int* counters, float* out, const Q8& q8,
               const SeqPlanes* seqs, cudaStream_t s) {
  if (n_tok <= 0) return;
  if (!seqs && attention_tiled(a, n_tok)) {
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
  if (n_tok == 1 || seqs) {
    const dim3 grid(a.n_head, splits > 1 ? splits : 1, n_tok);
    const SeqPlanes one{};
    auto go = [&](auto kernel) {
      launch_pdl(kernel, grid, 128, 0, s, q, k_plane, v_plane, pos, a, splits, work, counters, out, q8,
                 seqs ? *seqs : one);
    };
    const int nd = (a.head_dim + 31) / 32;
    auto by_dims = [&]<bool F16>() {
      if (nd <= 1)
        go(attention_decode_kernel<1, F16>);
      else if (nd <= 2)
        go(attention_decode_kernel<2, F16>);
      else if (nd <= 4)
        go(attention_decode_kernel<4, F16>);
      else if (nd <= 8)
        go(attention_decode_kernel<8, F16>);
      else
        go(attention_decode_kernel<16, F16>);
    };
    if (a.f16)
      by_dims.template operator()<true>();
    else
      by_dims.template operator()<false>();
    return;
  }
  const size_t shared = size_t(a.head_dim + kThreads + 4 * a.head_dim + 32) * sizeof(float);
  launch_pdl(attention_kernel, dim3(a.n_head, n_tok), kThreads, shared, s, q, k_plane, v_plane, pos, a, out,
             q8);
}

}  // namespace tilellm::cuda
