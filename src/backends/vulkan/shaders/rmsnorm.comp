#version 450
// RMSNorm, alone or after the residual add (TL_ADD, specialization constant 1):
//   TL_ADD 0: y[r] = a[r] / sqrt(mean(a[r]^2) + eps) * w
//   TL_ADD 1: a[r] += x[r], then y[r] as above from the sum (Backend::add_rmsnorm; y must not alias a, x)
// a, x, y: [n_rows][n]; w: [n]. One work-group per row: invocation i takes elements i, i + L, ..., the
// group sums the squares (common.glsl), then each invocation scales the same elements, so y may alias a
// when TL_ADD is 0 (every invocation reads its elements before writing them).
// TL_Q8 (specialization constant 2) 1: y is also rounded for the integer products that read it (q8.glsl,
// into binding 4), by invocation i taking blocks i, i + L, ... once the group's y is written; the host uses it
// for one row of whole blocks of 32 only. The binding is there in both variants (the host passes a buffer).
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

// One row's y (at element 0) rounded, once every invocation of the group has written its part.
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

void main() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
  const uint base = gl_WorkGroupID.x * pc.n;
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
