#version 450
// RMSNorm, alone or after the residual add (TL_ADD, specialization constant 1):
//   TL_ADD 0: y[r] = a[r] / sqrt(mean(a[r]^2) + eps) * w
//   TL_ADD 1: a[r] += x[r], then y[r] as above from the sum (Backend::add_rmsnorm; y must not alias a, x)
// a, x, y: [n_rows][n]; w: [n]. One work-group per row: invocation i takes elements i, i + L, ..., the
// group sums the squares (common.glsl), then each invocation scales the same elements, so y may alias a
// when TL_ADD is 0 (every invocation reads its elements before writing them).
// TL_Q8 (specialization constant 2) 1: y is also rounded for the integer products that read it (q8.glsl,
// into binding 4): from registers where the row fits them (held_q8_row), else by invocation i taking blocks
// i, i + L, ... once the group's y is written (round_row); the host uses it for one row of whole blocks of
// 32 only. The binding is there in both variants (the host passes a buffer).
#include "common.glsl"

layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 0) buffer A4 { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) readonly buffer Wn { float wn[]; };
layout(std430, binding = 2) readonly buffer Wn4 { vec4 wn4[]; };
layout(std430, binding = 3) coherent buffer Y { float y[]; };
layout(std430, binding = 3) coherent buffer Y4 { vec4 y4[]; };
layout(std430, binding = 4) writeonly buffer Q { uint q8w[]; };
layout(std430, binding = 4) writeonly buffer QF { float q8f[]; };
layout(push_constant) uniform P { uint n; float eps; } pc;
layout(constant_id = 1) const uint TL_ADD = 0;
layout(constant_id = 2) const uint TL_Q8 = 0;

#include "q8.glsl"

// One row's y (at element 0) rounded, once every invocation of the group has written its part: the
// general way, y read back from memory.
void round_row() {
  memoryBarrierBuffer();
  barrier();
  const uint nb = pc.n / 32u;
  for (uint b = gl_LocalInvocationID.x; b < nb; b += gl_WorkGroupSize.x) {
    vec4 v[8];
    [[unroll]] for (uint k = 0; k < 8u; ++k) v[k] = y4[8u * b + k];
    tl_q8_store(v, b, nb);
  }
}

// TL_Q8's row when each invocation holds at most TL_HELD vec4s of it (n / 4 <= TL_HELD L): the loads of a,
// x and the norm weights issued together and the row kept in registers from the sum of squares to the
// rounding, which the eight invocations of a block (vec4s 8 b .. 8 b + 7: neighbouring invocations, since L
// is a multiple of 8) do together, exchanging their max and code sums through shared memory: one memory
// round trip instead of three (decode waits for each). The same operations as tl_q8_store (q8.glsl).
const uint TL_HELD = 4u;
shared float q8_amax[gl_WorkGroupSize.x];
shared int q8_sum[gl_WorkGroupSize.x];
void held_q8_row() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x, n4 = pc.n / 4u, nb = pc.n / 32u;
  vec4 v[TL_HELD], wv[TL_HELD];
  float s = 0.0;
  [[unroll]] for (uint k = 0; k < TL_HELD; ++k) {
    const uint i = lid + k * ls;
    if (i < n4) {
      v[k] = a4[i];
      if (TL_ADD == 1u) v[k] += x4[i];
      wv[k] = wn4[i];
    }
  }
  [[unroll]] for (uint k = 0; k < TL_HELD; ++k) {
    const uint i = lid + k * ls;
    if (i < n4) {
      if (TL_ADD == 1u) a4[i] = v[k];
      s += dot(v[k], v[k]);
    }
  }
  s = tl_group_sum(s);
  const float scale = 1.0 / sqrt(s / float(pc.n) + pc.eps);
  const uint first = lid & ~7u, j = lid & 7u;  // this block's first invocation; the vec4's place in it
  [[unroll]] for (uint k = 0; k < TL_HELD; ++k) {
    if (k * ls >= n4) break;  // uniform
    const uint i = lid + k * ls, b = i / 8u;
    const vec4 yv = i < n4 ? v[k] * scale * wv[k] : vec4(0.0);
    if (i < n4) y4[i] = yv;
    const vec4 ay = abs(yv);
    q8_amax[lid] = max(max(ay.x, ay.y), max(ay.z, ay.w));
    barrier();
    float amax = 0.0;
    [[unroll]] for (uint e = 0; e < 8u; ++e) amax = max(amax, q8_amax[first + e]);
    const float d = tl_div127(amax);
    const float id = d != 0.0 ? tl_reciprocal(d) : 0.0;
    precise const vec4 sy = yv * id;
    const ivec4 c = ivec4(tl_round_away(sy.x), tl_round_away(sy.y), tl_round_away(sy.z), tl_round_away(sy.w));
    q8_sum[lid] = c.x + c.y + c.z + c.w;
    barrier();
    if (i < n4) {
      q8w[i] = uint(c.x & 255) | uint(c.y & 255) << 8 | uint(c.z & 255) << 16 | uint(c.w & 255) << 24;
      if (j == 0u || j == 4u) {  // the block's halves of 16: four vec4s each
        const int half_sum = q8_sum[lid] + q8_sum[lid + 1u] + q8_sum[lid + 2u] + q8_sum[lid + 3u];
        q8f[9u * nb + 2u * b + j / 4u] = d * float(half_sum);
        if (j == 0u) q8f[8u * nb + b] = d;
      }
    }
    barrier();  // q8_amax / q8_sum are rewritten by the next vec4s
  }
}

void main() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
  const uint base = gl_WorkGroupID.x * pc.n;
  if (TL_Q8 == 1u && pc.n / 4u <= TL_HELD * ls) {  // uniform
    held_q8_row();
    return;
  }
  if (pc.n % 4u == 0u) {
    // Rows of whole vec4s (every row then starts 16-byte aligned): 4 elements per load. Uniform branch.
    const uint b4 = base / 4u, n4 = pc.n / 4u;
    float s4 = 0.0;
    for (uint i = lid; i < n4; i += ls) {
      vec4 v = a4[b4 + i];
      if (TL_ADD == 1u) {
        v += x4[b4 + i];
        a4[b4 + i] = v;
      }
      s4 += dot(v, v);
    }
    s4 = tl_group_sum(s4);
    const float scale4 = 1.0 / sqrt(s4 / float(pc.n) + pc.eps);
    for (uint i = lid; i < n4; i += ls) y4[b4 + i] = a4[b4 + i] * scale4 * wn4[i];
    if (TL_Q8 == 1u) round_row();
    return;
  }
  float s = 0.0;
  for (uint i = lid; i < pc.n; i += ls) {
    float v = a[base + i];
    if (TL_ADD == 1u) {
      v += x[base + i];
      a[base + i] = v;
    }
    s += v * v;
  }
  s = tl_group_sum(s);
  const float scale = 1.0 / sqrt(s / float(pc.n) + pc.eps);
  for (uint i = lid; i < pc.n; i += ls) y[base + i] = a[base + i] * scale * wn[i];
}
