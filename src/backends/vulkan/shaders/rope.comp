#version 450
// Rotary position embedding from table rows (no trig on the device): pair i of every head turns by angle i
// of its token's position. Norm mode rotates (x[2i], x[2i+1]); Neox mode rotates (x[i], x[i + n_half]).
// x: [n_tok][n_heads][head_dim], rotated in place; cs: [n_tok][n_half][cos, sin], the table rows of the
// tokens' positions, gathered by the host. Groups (ceil(n_half / L), n_heads, n_tok); tail items return.
#include "common.glsl"

layout(std430, binding = 0) buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Cs { float cs[]; };
layout(push_constant) uniform P { uint n_heads, head_dim, n_half, neox; } pc;

void main() {
  const uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
  if (i >= pc.n_half) return;
  const uint v = (t * pc.n_heads + h) * pc.head_dim;
  const uint i0 = pc.neox != 0u ? i : 2u * i, i1 = pc.neox != 0u ? i + pc.n_half : 2u * i + 1u;
  const float c = cs[(t * pc.n_half + i) * 2u], s = cs[(t * pc.n_half + i) * 2u + 1u];
  const float a = x[v + i0], b = x[v + i1];
  precise float r0 = a * c - b * s;
  precise float r1 = a * s + b * c;
  x[v + i0] = r0;
  x[v + i1] = r1;
}
