// Rotary position embedding from the per-position cos/sin table, and the layer's RoPE of q and k fused with
// the KV write. A thread takes one pair of a head: pair i < n_half turns dims (2i, 2i + 1) (norm) or
// (i, i + n_half) (neox) by the table row of the token's position, as the CPU backend computes it
// (cpu/rope.cpp: a c - b s, a s + b c, each product rounded: bit-equal); the pairs past n_half cover the
// unrotated tail of the head (dims rope_dim + 2 (i - n_half) and the next), which only the fused kernel
// copies (into the cache).
#include "common.cuh"

namespace tilellm::cuda {
namespace {

// Dims of pair i of a head (see the file's top).
__device__ __forceinline__ void pair_dims(const RopeArgs& r, int i, int& i0, int& i1) {
  if (i < r.n_half) {
    i0 = r.mode == 0 ? 2 * i : i;
    i1 = r.mode == 0 ? 2 * i + 1 : i + r.n_half;
  } else {
    i0 = r.rope_dim + 2 * (i - r.n_half);
    i1 = i0 + 1;
  }
}

// Pair i of a head at h turned by the table row cs (common.cuh: rope_turn).
__device__ __forceinline__ void turn(float* h, int i, int i0, int i1, const float* cs) {
  float a = h[i0], b = h[i1];
  rope_turn(a, b, cs[2 * i], cs[2 * i + 1]);
  h[i0] = a;
  h[i1] = b;
}

__device__ __forceinline__ void put(void* plane, bool f16, int64_t at, float v) {
  if (f16)
    static_cast<__half*>(plane)[at] = __float2half_rn(v);
  else
    static_cast<float*>(plane)[at] = v;
}

__global__ void rope_kernel(float* x, int n_tok, int n_heads, const int32_t* pos, RopeArgs r) {
  griddep_wait();
  griddep_launch_dependents();
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(n_tok) * n_heads * r.n_half) return;
  const int i = int(idx % r.n_half);
  const int64_t head = idx / r.n_half;
  const int t = int(head / n_heads);
  int i0, i1;
  pair_dims(r, i, i0, i1);
  turn(x + head * r.head_dim, i, i0, i1, r.table + size_t(pos[t]) * r.n_half * 2);
}

// Threads over [n_tok][n_head + 2 n_head_kv][head_dim / 2]: the q heads, then the k heads, then the v heads.
__global__ void rope_kv_store_kernel(float* q, float* k, const float* v, int n_tok, int n_head, int n_head_kv,
                                     const int32_t* pos, RopeArgs r, void* k_plane, void* v_plane, bool f16,
                                     const __grid_constant__ SeqPlanes sp) {
  griddep_wait();
  griddep_launch_dependents();
  const int pairs = r.head_dim / 2, heads = n_head + 2 * n_head_kv;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(n_tok) * heads * pairs) return;
  const int i = int(idx % pairs);
  const int h = int((idx / pairs) % heads);
  const int t = int(idx / (int64_t(pairs) * heads));
  const int p = pos[t];
  const float* cs = r.table + size_t(p) * r.n_half * 2;
  const int kv_dim = n_head_kv * r.head_dim;
  int i0, i1;
  pair_dims(r, i, i0, i1);
  if (h < n_head) {
    if (i < r.n_half) turn(q + (int64_t(t) * n_head + h) * r.head_dim, i, i0, i1, cs);
    return;
  }
  const bool is_k = h < n_head + n_head_kv;
  const int kh = is_k ? h - n_head : h - n_head - n_head_kv;
  const int64_t src = int64_t(t) * kv_dim + int64_t(kh) * r.head_dim;
  float a, b;
  if (is_k) {
    float* kr = k + src;
    if (i < r.n_half) turn(kr, i, i0, i1, cs);
    a = kr[i0];
    b = kr[i1];
  } else {
    a = v[src + i0];
    b = v[src + i1];
  }
  void* plane = is_k ? k_plane : v_plane;
  const int64_t row = int64_t(sp.seq[t]) * sp.stride + int64_t(p) * kv_dim + int64_t(kh) * r.head_dim;
  put(plane, f16, row + i0, a);
  put(plane, f16, row + i1, b);
}

}  // namespace

void rope(float* x, int n_tok, int n_heads, const int32_t* pos, const RopeArgs& r, cudaStream_t s) {
  const int64_t n = int64_t(n_tok) * n_heads * r.n_half;
  if (n > 0) launch_pdl(rope_kernel, ceil_div(n, 256), 256, 0, s, x, n_tok, n_heads, pos, r);
}

void rope_kv_store(float* q, float* k, const float* v, int n_tok, int n_head, int n_head_kv,
                   const int32_t* pos, const RopeArgs& r, void* k_plane, void* v_plane, bool f16,
                   const SeqPlanes& sp, cudaStream_t s) {
  const int64_t n = int64_t(n_tok) * (n_head + 2 * n_head_kv) * (r.head_dim / 2);
  if (n > 0)
    launch_pdl(rope_kv_store_kernel, ceil_div(n, 256), 256, 0, s, q, k, v, n_tok, n_head, n_head_kv, pos, r,
               k_plane, v_plane, f16, sp);
}

}  // namespace tilellm::cuda
