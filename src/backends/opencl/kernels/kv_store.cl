// Writes K and V rows of new tokens into the device FB-KV cache at their positions, converting to the cache
// type: TL_KV_F16 (generated header) 1 = half, rounded to nearest even like the CPU's fp32_to_fp16; 0 = float.
// cache: one buffer holding whole layers, [layer][K|V][pos < n_ctx][kv_dim]; layer_off: the element offset
// of this layer's K plane in it (its V plane follows n_ctx * kv_dim elements later).
// k, v: [n_tok][kv_dim]; pos: [n_tok] (checked by the host). Global (kv_dim rounded up, n_tok).
#if TL_KV_F16
#define TL_KV_T half
#define TL_KV_PUT(val, p) vstore_half_rte((val), 0, (p))
#else
#define TL_KV_T float
#define TL_KV_PUT(val, p) (*(p) = (val))
#endif

__kernel void kv_store(__global TL_KV_T* cache, ulong layer_off, int n_ctx, int kv_dim,
                       __global const float* k, __global const float* v, __global const int* pos, int n_tok) {
  const int i = get_global_id(0), t = get_global_id(1);
  if (i >= kv_dim || t >= n_tok) return;
  __global TL_KV_T* dst = cache + layer_off + (ulong)pos[t] * kv_dim + i;
  TL_KV_PUT(k[(ulong)t * kv_dim + i], dst);
  TL_KV_PUT(v[(ulong)t * kv_dim + i], dst + (ulong)n_ctx * kv_dim);
}

// Decode's RoPE and KV write in one launch: q and k rotated in place as rope.cl does (same table rows cs,
// same arithmetic), then k's rows (rotated) and v's rows stored as kv_store does. Item (i, h, t) owns two
// elements of head h of token t: heads [0, n_head) are q's, the next n_head_kv k's, the last n_head_kv v's;
// pair i < n_half is the rotated pair of the mode (Norm: 2i, 2i + 1; Neox: i, i + n_half), pairs past it the
// unrotated elements 2i, 2i + 1 (rope_dim = 2 n_half <= head_dim, head_dim even: checked by the host).
// q: [n_tok][n_head][head_dim]; k, v: [n_tok][n_head_kv][head_dim]; cs: [n_tok][n_half][cos, sin].
// Global (head_dim / 2, n_head + 2 n_head_kv, n_tok), rounded up; tail items return.
__kernel void rope_kv_store(__global float* q, __global float* k, __global const float* v,
                            __global const float* cs, int n_tok, int n_head, int n_head_kv, int head_dim,
                            int n_half, int neox, __global TL_KV_T* cache, ulong layer_off, int n_ctx,
                            __global const int* pos) {
  const int i = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
  if (i >= head_dim / 2 || h >= n_head + 2 * n_head_kv || t >= n_tok) return;
  const int kv_dim = n_head_kv * head_dim;
  const bool turn = i < n_half;
  const int i0 = turn && neox ? i : 2 * i, i1 = turn && neox ? i + n_half : 2 * i + 1;
  __global TL_KV_T* row = cache + layer_off + (ulong)pos[t] * kv_dim;  // this token's K row
  if (h >= n_head + n_head_kv) {
    const int hv = h - n_head - n_head_kv;
    __global const float* src = v + (ulong)t * kv_dim + hv * head_dim;
    __global TL_KV_T* dst = row + (ulong)n_ctx * kv_dim + hv * head_dim;  // the V plane's row
    TL_KV_PUT(src[i0], dst + i0);
    TL_KV_PUT(src[i1], dst + i1);
    return;
  }
  const bool is_k = h >= n_head;
  __global float* x = is_k ? k + ((ulong)t * n_head_kv + (h - n_head)) * head_dim
                           : q + ((ulong)t * n_head + h) * head_dim;
  float2 e = (float2)(x[i0], x[i1]);
  if (turn) {
    e = tl_rotate(e.x, e.y, cs[((ulong)t * n_half + i) * 2], cs[((ulong)t * n_half + i) * 2 + 1]);
    x[i0] = e.x;
    x[i1] = e.y;
  }
  if (is_k) {
    __global TL_KV_T* dst = row + (h - n_head) * head_dim;
    TL_KV_PUT(e.x, dst + i0);
    TL_KV_PUT(e.y, dst + i1);
  }
}

#undef TL_KV_T
#undef TL_KV_PUT
