#version 450
// The input of one-token integer products rounded to int8 per block of 32 (q8.glsl: the rounding and the
// layout matvec_q8.comp reads), for the inputs no producer rounded itself. One invocation a block.
// x: [n] floats (n a multiple of 32).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) writeonly buffer Q { uint q8w[]; };
layout(std430, binding = 1) writeonly buffer QF { float q8f[]; };
layout(push_constant) uniform P { uint n; } pc;

#include "q8.glsl"

void main() {
  const uint b = gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint nb = pc.n / 32u;
  if (b >= nb) return;
  vec4 v[8];
  [[unroll]] for (uint k = 0; k < 8u; ++k) v[k] = x4[8u * b + k];
  tl_q8_store(v, b, nb);
}
