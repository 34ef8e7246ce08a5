#version 450
// Rotary position embedding from the session's table (no trig on the device): pair i of every head of token
// t turns by angle i of position pos[t]. Norm mode rotates (x[2i], x[2i+1]); Neox mode rotates (x[i],
// x[i + n_half]). x: [n_tok][n_heads][head_dim], rotated in place; table: [n_pos][n_half][cos, sin], the whole
// RopeTable on the device; pos: [n_tok] (checked by the host), read here so that a recorded decode step
// needs no new rows. Groups (ceil(n_half / L), n_heads, n_tok); tail items return.
#include "common.glsl"

layout(std430, binding = 0) buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Cs { float cs[]; };
layout(std430, binding = 2) readonly buffer Pos { int pos[]; };
layout(push_constant) uniform P { uint n_heads, head_dim, n_half, neox; } pc;

void main() {
  const uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
  if (i >= pc.n_half) return;
  const uint v = (t * pc.n_heads + h) * pc.head_dim;
  const uint i0 = pc.neox != 0u ? i : 2u * i, i1 = pc.neox != 0u ? i + pc.n_half : 2u * i + 1u;
  const uint row = (uint(pos[t]) * pc.n_half + i) * 2u;
  const float c = cs[row], s = cs[row + 1u];
  const float a = x[v + i0], b = x[v + i1];
  precise float r0 = a * c - b * s;
  precise float r1 = a * s + b * c;
  x[v + i0] = r0;
  x[v + i1] = r1;
}
