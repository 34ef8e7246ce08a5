#version 450
// Causal attention of one query head of one token over the cached keys and values of its layer, with
// block-wise online softmax (the CPU's formula, attention.cpp): keys are visited in chunks of L (the local
// size); each chunk's scores update a running max m, denominator l and weighted sum acc:
//   m' = max(m, max_j s_j);  acc = acc e^(m - m') + sum_j e^(s_j - m') v_j;  l = l e^(m - m') + sum_j e^(s_j - m')
// and out = acc / l. Invocation i scores key i of the chunk; the weighted sum of V is split over the
// invocations by dims (at most TL_MAX_DIMS each: head_dim <= TL_MAX_DIMS * L, checked by the host) and, where
// rows are 16-byte aligned, also by keys (main's comment).
// q, out: [n_tok][n_head][head_dim]; cache: [layer][K|V][pos][kv_dim] (kv.glsl: words, TL_KV_F16 halves; or
// the _kvimage variant's RGBA16F image);
// pos: [n_tok]. Query head h reads KV head h / (n_head / n_head_kv); a query at position p sees keys
// max(0, p - window + 1) .. p (window 0: all). Groups (n_head, n_tok).
// TL_Q8 (specialization constant 2) 1: the output is also rounded for the integer products that read it
// (q8.glsl, into binding 4): the host uses it for one token with head_dim % 32 == 0, where each group's
// head is whole blocks of the row (qbase / 32 ...), rounded by the group once its output is written.
// The binding is there in both variants (the host passes a buffer).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 2) readonly buffer Pos { int pos[]; };
layout(std430, binding = 3) coherent buffer O { float outv[]; };
layout(std430, binding = 3) coherent buffer O4 { vec4 outv4[]; };
layout(std430, binding = 4) writeonly buffer Q8W { uint q8w[]; };
layout(std430, binding = 4) writeonly buffer Q8F { float q8f[]; };
layout(push_constant) uniform P {
  uint layer_off, n_ctx, kv_dim, n_head, n_head_kv, head_dim, window;
  float scale;
  uint vec;  // 1: K rows 16-byte aligned (dot_row)
} pc;
layout(constant_id = 1) const uint TL_KV_F16 = 1;
layout(constant_id = 2) const uint TL_Q8 = 0;
#define TL_KV_BINDING 1
#define TL_KV_READONLY 1
#define TL_KV_DIM pc.kv_dim
#include "kv.glsl"

#include "q8.glsl"

const uint TL_MAX_DIMS = 8;
shared float q_sh[TL_MAX_DIMS * gl_WorkGroupSize.x];
shared float p_sh[gl_WorkGroupSize.x];

// q . K row at element e (hd elements), from the q in shared memory. When every row of every head starts at
// a multiple of 16 bytes (vec: the host's check), the row is read 16 bytes at a time (8 halves or 4 floats),
// up to 16 loads issued before any is used (one memory round trip for a row of 128 halves, not 16); else
// element by element.
float dot_row(uint e, uint hd, bool vec) {
  float d = 0.0;
  if (!vec) {
    for (uint i = 0; i < hd; ++i) d += q_sh[i] * tl_kv(e + i);
    return d;
  }
  const uint per = TL_KV_F16 == 1u ? 8u : 4u;  // elements a load
  for (uint i0 = 0; i0 < hd; i0 += 16u * per) {
    uvec4 c[16];
    [[unroll]] for (uint k = 0; k < 16u; ++k) {
      if (i0 + per * k < hd) c[k] = tl_kv16((e + i0 + per * k) / per);
    }
    [[unroll]] for (uint k = 0; k < 16u; ++k) {
      const uint i = i0 + per * k;
      if (i >= hd) break;
      if (TL_KV_F16 == 1u) {
        const vec2 a = unpackHalf2x16(c[k].x), b = unpackHalf2x16(c[k].y), f = unpackHalf2x16(c[k].z),
                   g = unpackHalf2x16(c[k].w);
        d += q_sh[i] * a.x + q_sh[i + 1u] * a.y + q_sh[i + 2u] * b.x + q_sh[i + 3u] * b.y + q_sh[i + 4u] * f.x +
             q_sh[i + 5u] * f.y + q_sh[i + 6u] * g.x + q_sh[i + 7u] * g.y;
      } else {
        const vec4 f = uintBitsToFloat(c[k]);
        d += q_sh[i] * f.x + q_sh[i + 1u] * f.y + q_sh[i + 2u] * f.z + q_sh[i + 3u] * f.w;
      }
    }
  }
  return d;
}

// The V row of key j at dims 8 p .. 8 p + 7 (halves) or 4 p .. 4 p + 3 (floats) as floats, from one 16-byte
// load (the vec layout).
void v_part(uint e, out float v[8]) {
  if (TL_KV_F16 == 1u) {
    const uvec4 c = tl_kv16(e >> 3);
    const vec2 a = unpackHalf2x16(c.x), b = unpackHalf2x16(c.y), f = unpackHalf2x16(c.z), g = unpackHalf2x16(c.w);
    v = float[8](a.x, a.y, b.x, b.y, f.x, f.y, g.x, g.y);
  } else {
    const vec4 f = uintBitsToFloat(tl_kv16(e >> 2));
    v = float[8](f.x, f.y, f.z, f.w, 0.0, 0.0, 0.0, 0.0);
  }
}

void main() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  const uint hd = pc.head_dim, kvh = h / (pc.n_head / pc.n_head_kv);
  const uint qbase = (t * pc.n_head + h) * hd;
  for (uint d = lid; d < hd; d += ls) q_sh[d] = q[qbase + d];
  barrier();
  const int last = pos[t];
  const int first = pc.window > 0u ? max(0, last - int(pc.window) + 1) : 0;
  const uint kbase = pc.layer_off + kvh * hd, vbase = kbase + pc.n_ctx * pc.kv_dim;
  // The weighted sum of V. Scalar layout: invocation i owns dims i, i + L, ... (acc[k]: dim i + k L). vec
  // layout (16-byte rows, a row of V in at most L loads of `per` elements): invocation i owns dims
  // per (i % parts) .. + per - 1 (acc[0 .. per - 1]) over the keys j of a chunk with j % groups == i / parts,
  // so that a row is one load per invocation and `groups` rows are read at once; the groups' sums are added
  // at the end.
  const uint per = TL_KV_F16 == 1u ? 8u : 4u, parts = hd / per;
  const bool vec = pc.vec != 0u && parts <= ls;
  const uint groups = vec ? ls / parts : 1u, part = lid % parts, grp = lid / parts;
  float acc[TL_MAX_DIMS];
  [[unroll]] for (uint k = 0; k < TL_MAX_DIMS; ++k) acc[k] = 0.0;
  float m = -1.0 / 0.0, l = 0.0;
  for (int c0 = first; c0 <= last; c0 += int(ls)) {
    const int j = c0 + int(lid);
    float s = -1.0 / 0.0;
    if (j <= last) {
      s = dot_row(kbase + uint(j) * pc.kv_dim, hd, pc.vec != 0u) * pc.scale;
    }
    const float m_new = max(m, tl_group_max(s));
    const float p = j <= last ? exp(s - m_new) : 0.0;
    p_sh[lid] = p;
    const float alpha = exp(m - m_new);  // 0 on the first chunk (m = -inf)
    l = l * alpha + tl_group_sum(p);  // the sum's barriers also publish p_sh
    const int n_keys = min(int(ls), last - c0 + 1);
    if (vec) {
      if (grp < groups) {
        [[unroll]] for (uint k = 0; k < 8u; ++k) acc[k] *= alpha;
        // Four rows a round, their loads issued together.
        for (int j0 = int(grp); j0 < n_keys; j0 += 4 * int(groups)) {
          float v[4][8];
          [[unroll]] for (int r = 0; r < 4; ++r) {
            const int jj = j0 + r * int(groups);
            if (jj < n_keys) v_part(vbase + uint(c0 + jj) * pc.kv_dim + per * part, v[r]);
          }
          [[unroll]] for (int r = 0; r < 4; ++r) {
            const int jj = j0 + r * int(groups);
            if (jj < n_keys) {
              const float pj = p_sh[jj];
              [[unroll]] for (uint k = 0; k < 8u; ++k) acc[k] += pj * v[r][k];
            }
          }
        }
      }
    } else {
      [[unroll]] for (uint k = 0; k < TL_MAX_DIMS; ++k) {
        const uint d = lid + k * ls;
        if (d < hd) {
          float a = acc[k] * alpha;
          for (int jj = 0; jj < n_keys; ++jj) a += p_sh[jj] * tl_kv(vbase + uint(c0 + jj) * pc.kv_dim + d);
          acc[k] = a;
        }
      }
    }
    m = m_new;
    barrier();  // p_sh is rewritten by the next chunk
  }
  if (vec) {
    // The groups' sums through q_sh (groups x hd <= 8 L floats; q is no longer read).
    if (grp < groups) {
      for (uint k = 0; k < per; ++k) q_sh[grp * hd + per * part + k] = acc[k];
    }
    barrier();
    for (uint d = lid; d < hd; d += ls) {
      float a = 0.0;
      for (uint g = 0; g < groups; ++g) a += q_sh[g * hd + d];
      outv[qbase + d] = a / l;
    }
  } else {
    [[unroll]] for (uint k = 0; k < TL_MAX_DIMS; ++k) {
      const uint d = lid + k * ls;
      if (d < hd) outv[qbase + d] = acc[k] / l;
    }
  }
  if (TL_Q8 == 1u) {
    memoryBarrierBuffer();
    barrier();
    const uint nb = pc.n_head * hd / 32u;
    for (uint b = lid; b < hd / 32u; b += ls) {
      vec4 v[8];
      [[unroll]] for (uint k = 0; k < 8u; ++k) v[k] = outv4[qbase / 4u + 8u * b + k];
      tl_q8_store(v, qbase / 32u + b, nb);
    }
  }
}
