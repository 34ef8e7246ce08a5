#version 450
// A layer's RoPE and KV write in one dispatch (the op rope_kv_store: rope.comp on q and k, then
// kv_store.comp): q and k rotated in place, k's rotated rows and v's rows written to the device FB-KV at
// their positions in the cache type (TL_KV_F16, specialization constant 1: halves two to a 32-bit word, or
// floats).
// q: [n_tok][n_head][head_dim]; k, v: [n_tok][n_head_kv][head_dim]; table: [n_pos][n_half][cos, sin] (the
// whole RopeTable); pos: [n_tok] (checked by the host); cache: [layer][K|V][pos < n_ctx][kv_dim] words,
// layer_off the element offset of this layer's K plane (its V plane n_ctx * kv_dim elements later).
// Groups (ceil(head_dim / 2 / L), n_head + 2 n_head_kv, n_tok): invocation i of a head owns elements
// {2i, 2i + 1} in norm mode and elements {2i, 2i + 1, 2i + n_half, 2i + 1 + n_half} for 2i < n_half in Neox
// mode, so every element it reads it also writes (no other invocation touches them) and every cache word it
// writes holds an element pair of its own. Past the rotated dims (partial rotation) pairs are copied.
// The host runs this only with head_dim and, in Neox mode, n_half even (the unfused ops otherwise). The
// cache is written through kv.glsl; its _kvimage variant (below main) owns four elements an invocation.
#include "common.glsl"

layout(std430, binding = 0) buffer Q { float q[]; };
layout(std430, binding = 1) buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer Cs { float cs[]; };
layout(std430, binding = 4) readonly buffer Pos { int pos[]; };
layout(push_constant) uniform P { uint n_head, n_head_kv, head_dim, n_half, neox, layer_off, n_ctx; } pc;
layout(constant_id = 1) const uint TL_KV_F16 = 1;
#define TL_KV_BINDING 5
#define TL_KV_READONLY 0
#define TL_KV_DIM (pc.n_head_kv * pc.head_dim)
#include "kv.glsl"

// Pair j of the table row of the token's position, rotating (a, b).
vec2 turn(uint row, uint j, float a, float b) {
  const float c = cs[row + 2u * j], s = cs[row + 2u * j + 1u];
  precise float r0 = a * c - b * s;
  precise float r1 = a * s + b * c;
  return vec2(r0, r1);
}

#ifndef TL_KV_IMAGE
void main() {
  const uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
  const uint hd = pc.head_dim, kv_dim = pc.n_head_kv * hd;
  if (2u * i >= hd) return;
  const uint p = uint(pos[t]);
  const uint krow = pc.layer_off + p * kv_dim, vrow = krow + pc.n_ctx * kv_dim;  // element offsets
  if (h >= pc.n_head + pc.n_head_kv) {
    const uint hv = h - pc.n_head - pc.n_head_kv, src = t * kv_dim + hv * hd + 2u * i;
    tl_kv_put2(vrow + hv * hd + 2u * i, v[src], v[src + 1u]);
    return;
  }
  const bool is_k = h >= pc.n_head;
  const uint base = is_k ? (t * pc.n_head_kv + h - pc.n_head) * hd : (t * pc.n_head + h) * hd;
  const uint kdst = krow + (h - pc.n_head) * hd;  // this K head's cache row (is_k only)
  const uint row = p * pc.n_half * 2u;
  const uint e = 2u * i;
  if (pc.neox == 0u || e >= 2u * pc.n_half) {
    // Norm mode: the pair (e, e + 1) turns by angle i; past the rotated dims it is copied.
    vec2 r = vec2(0.0);
    if (is_k) {
      r = vec2(k[base + e], k[base + e + 1u]);
    } else {
      r = vec2(q[base + e], q[base + e + 1u]);
    }
    if (i < pc.n_half && pc.neox == 0u) {
      r = turn(row, i, r.x, r.y);
      if (is_k) {
        k[base + e] = r.x, k[base + e + 1u] = r.y;
      } else {
        q[base + e] = r.x, q[base + e + 1u] = r.y;
      }
    }
    if (is_k) tl_kv_put2(kdst + e, r.x, r.y);
    return;
  }
  // Neox mode: elements e, e + 1 pair with e + n_half, e + 1 + n_half (angles e and e + 1).
  if (e >= pc.n_half) return;  // owned by the invocation of e - n_half
  const uint f = e + pc.n_half;
  vec4 a;  // x[e], x[e + 1], x[f], x[f + 1]
  if (is_k) {
    a = vec4(k[base + e], k[base + e + 1u], k[base + f], k[base + f + 1u]);
  } else {
    a = vec4(q[base + e], q[base + e + 1u], q[base + f], q[base + f + 1u]);
  }
  const vec2 r0 = turn(row, e, a.x, a.z), r1 = turn(row, e + 1u, a.y, a.w);
  if (is_k) {
    k[base + e] = r0.x, k[base + e + 1u] = r1.x, k[base + f] = r0.y, k[base + f + 1u] = r1.y;
    tl_kv_put2(kdst + e, r0.x, r1.x);
    tl_kv_put2(kdst + f, r0.y, r1.y);
  } else {
    q[base + e] = r0.x, q[base + e + 1u] = r1.x, q[base + f] = r0.y, q[base + f + 1u] = r1.y;
  }
}
#else
// The _kvimage variant: invocation i of a head owns elements e = 4i .. 4i + 3 (two pairs, angles 2i and 2i + 1)
// in norm mode and, in Neox mode, for e < n_half also e + n_half .. + 3 (the host runs it with head_dim % 4 == 0
// and, in Neox mode, n_half % 4 == 0): every cache texel it writes holds four elements of its own.
vec4 load4(bool is_k, uint at) {
  return is_k ? vec4(k[at], k[at + 1u], k[at + 2u], k[at + 3u]) : vec4(q[at], q[at + 1u], q[at + 2u], q[at + 3u]);
}
void store4(bool is_k, uint at, vec4 r) {
  if (is_k) {
    k[at] = r.x, k[at + 1u] = r.y, k[at + 2u] = r.z, k[at + 3u] = r.w;
  } else {
    q[at] = r.x, q[at + 1u] = r.y, q[at + 2u] = r.z, q[at + 3u] = r.w;
  }
}

void main() {
  const uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
  const uint hd = pc.head_dim, kv_dim = pc.n_head_kv * hd;
  if (4u * i >= hd) return;
  const uint p = uint(pos[t]);
  const uint krow = pc.layer_off + p * kv_dim, vrow = krow + pc.n_ctx * kv_dim;  // element offsets
  const uint e = 4u * i;
  if (h >= pc.n_head + pc.n_head_kv) {
    const uint hv = h - pc.n_head - pc.n_head_kv, src = t * kv_dim + hv * hd + e;
    tl_kv_put4(vrow + hv * hd + e, vec4(v[src], v[src + 1u], v[src + 2u], v[src + 3u]));
    return;
  }
  const bool is_k = h >= pc.n_head;
  const uint base = is_k ? (t * pc.n_head_kv + h - pc.n_head) * hd : (t * pc.n_head + h) * hd;
  const uint kdst = krow + (h - pc.n_head) * hd;  // this K head's cache row (is_k only)
  const uint row = p * pc.n_half * 2u;
  if (pc.neox == 0u || e >= 2u * pc.n_half) {
    // Norm mode: pairs (e, e + 1) and (e + 2, e + 3) turn by angles 2i and 2i + 1 while those are rotated
    // dims; past them (and past Neox mode's rotated half) the elements are copied.
    vec4 r = load4(is_k, base + e);
    if (pc.neox == 0u && 2u * i < pc.n_half) {
      r.xy = turn(row, 2u * i, r.x, r.y);
      if (2u * i + 1u < pc.n_half) r.zw = turn(row, 2u * i + 1u, r.z, r.w);
      store4(is_k, base + e, r);
    }
    if (is_k) tl_kv_put4(kdst + e, r);
    return;
  }
  // Neox mode: elements e .. e + 3 pair with e + n_half .. e + 3 + n_half (angles e .. e + 3).
  if (e >= pc.n_half) return;  // owned by the invocation of e - n_half
  const uint f = e + pc.n_half;
  // Written out pair by pair, as the buffer variant is: with the pairs in a loop over the vectors' components
  // the H200's compiler rounded one product differently (a 1-ulp difference from rope.comp).
  const vec4 a = load4(is_k, base + e), b = load4(is_k, base + f);
  const vec2 r0 = turn(row, e, a.x, b.x), r1 = turn(row, e + 1u, a.y, b.y), r2 = turn(row, e + 2u, a.z, b.z),
             r3 = turn(row, e + 3u, a.w, b.w);
  const vec4 lo = vec4(r0.x, r1.x, r2.x, r3.x), hi = vec4(r0.y, r1.y, r2.y, r3.y);
  store4(is_k, base + e, lo);
  store4(is_k, base + f, hi);
  if (is_k) {
    tl_kv_put4(kdst + e, lo);
    tl_kv_put4(kdst + f, hi);
  }
}
#endif
