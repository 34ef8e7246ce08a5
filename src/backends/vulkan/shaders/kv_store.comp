#version 450
// Writes K and V rows of new tokens into the device FB-KV cache at their positions, in the cache type:
// TL_KV_F16 (specialization constant 1) 1 = halves (two per 32-bit word, so one invocation writes one
// pair: kv_dim is even, checked by the host), 0 = floats.
// cache: whole layers, [layer][K|V][pos < n_ctx][kv_dim] as 32-bit words; layer_off: the element offset of
// this layer's K plane in its buffer (its V plane follows n_ctx * kv_dim elements later).
// k, v: [n_tok][kv_dim]; pos: [n_tok] (checked by the host). Groups (ceil(kv_dim / 2 / L), n_tok).
#include "common.glsl"

layout(std430, binding = 0) buffer C { uint cache[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer Pos { int pos[]; };
layout(push_constant) uniform P { uint layer_off, n_ctx, kv_dim; } pc;
layout(constant_id = 1) const uint TL_KV_F16 = 1;

void main() {
  const uint p = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  if (2u * p >= pc.kv_dim) return;
  const uint src = t * pc.kv_dim + 2u * p;
  const uint dst = pc.layer_off + uint(pos[t]) * pc.kv_dim + 2u * p;  // element index of the K pair
  const uint vdst = dst + pc.n_ctx * pc.kv_dim;
  if (TL_KV_F16 == 1u) {
    cache[dst / 2u] = packHalf2x16(vec2(k[src], k[src + 1u]));
    cache[vdst / 2u] = packHalf2x16(vec2(v[src], v[src + 1u]));
  } else {
    cache[dst] = floatBitsToUint(k[src]);
    cache[dst + 1u] = floatBitsToUint(k[src + 1u]);
    cache[vdst] = floatBitsToUint(v[src]);
    cache[vdst + 1u] = floatBitsToUint(v[src + 1u]);
  }
}
