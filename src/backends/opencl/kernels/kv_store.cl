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

#undef TL_KV_T
#undef TL_KV_PUT
