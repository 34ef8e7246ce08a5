#version 450
// Writes K and V rows of new tokens into the device FB-KV cache at their positions, in the cache type:
// TL_KV_F16 (specialization constant 1) 1 = halves (two per 32-bit word, so one invocation writes one
// pair: kv_dim is even, checked by the host), 0 = floats; the _kvimage variant writes a texel of four halves
// an invocation (kv.glsl; kv_dim % 4 == 0, checked by the host).
// cache: whole layers, [layer][K|V][pos < n_ctx][kv_dim] (kv.glsl); layer_off: the element offset of this
// layer's K plane in its buffer or image (its V plane follows n_ctx * kv_dim elements later).
// k, v: [n_tok][kv_dim]; pos: [n_tok] (checked by the host). Groups (ceil(kv_dim / n / L), n_tok), n = 2 or 4.
#include "common.glsl"

layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer Pos { int pos[]; };
layout(push_constant) uniform P { uint layer_off, n_ctx, kv_dim; } pc;
layout(constant_id = 1) const uint TL_KV_F16 = 1;
#define TL_KV_BINDING 0
#define TL_KV_READONLY 0
#define TL_KV_DIM pc.kv_dim
#include "kv.glsl"

void main() {
  const uint p = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
#ifdef TL_KV_IMAGE
  const uint n = 4u;  // elements an invocation writes: a texel
#else
  const uint n = 2u;  // a pair (a word of halves)
#endif
  if (n * p >= pc.kv_dim) return;
  const uint src = t * pc.kv_dim + n * p;
  const uint dst = pc.layer_off + uint(pos[t]) * pc.kv_dim + n * p;  // element index in the K plane
  const uint vdst = dst + pc.n_ctx * pc.kv_dim;
#ifdef TL_KV_IMAGE
  tl_kv_put4(dst, vec4(k[src], k[src + 1u], k[src + 2u], k[src + 3u]));
  tl_kv_put4(vdst, vec4(v[src], v[src + 1u], v[src + 2u], v[src + 3u]));
#else
  tl_kv_put2(dst, k[src], k[src + 1u]);
  tl_kv_put2(vdst, v[src], v[src + 1u]);
#endif
}
