#version 450
// Gated linear unit whose output one integer product reads (the down projection of one token): out =
// act(gate) * up as glu.comp computes it, and out rounded to int8 per block of 32 (q8.glsl) for that
// product. One invocation a block of 32 (n a multiple of 32). act: SiLU (TL_ACT 0) or GELU-tanh (1),
// specialization constant 1. out may be gate's buffer.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer G { vec4 gate4[]; };
layout(std430, binding = 1) readonly buffer U { vec4 up4[]; };
layout(std430, binding = 2) writeonly buffer O { vec4 out4[]; };
layout(std430, binding = 3) writeonly buffer Q { uint q8w[]; };
layout(std430, binding = 3) writeonly buffer QF { float q8f[]; };
layout(push_constant) uniform P { uint n; } pc;
layout(constant_id = 1) const uint TL_ACT = 0;

#include "q8.glsl"

void main() {
  const uint b = gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint nb = pc.n / 32u;
  if (b >= nb) return;
  vec4 v[8];
  [[unroll]] for (uint k = 0; k < 8u; ++k) {
    const vec4 g = gate4[8u * b + k], u = up4[8u * b + k];
    [[unroll]] for (uint e = 0; e < 4u; ++e) v[k][e] = TL_ACT == 1u ? tl_gelu_mul(g[e], u[e]) : tl_silu_mul(g[e], u[e]);
    out4[8u * b + k] = v[k];
  }
  tl_q8_store(v, b, nb);
}
