#version 450
// Gated linear unit: out = act(gate) * up over n floats, act SiLU (TL_ACT 0) or GELU-tanh (1),
// specialization constant 1; the activations are common.glsl's. out may be gate's buffer.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer G { float gate[]; };
layout(std430, binding = 1) readonly buffer U { float up[]; };
layout(std430, binding = 2) writeonly buffer O { float outv[]; };
layout(push_constant) uniform P { uint n; } pc;
layout(constant_id = 1) const uint TL_ACT = 0;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i >= pc.n) return;
  outv[i] = TL_ACT == 1u ? tl_gelu_mul(gate[i], up[i]) : tl_silu_mul(gate[i], up[i]);
}
