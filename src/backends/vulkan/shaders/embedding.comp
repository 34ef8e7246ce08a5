#version 450
// Token embedding lookup of one token: out[t][i] = scale * table[row][i], the row dequantized exactly
// (quants.glsl, TL_FMT). table: device rows of row_bytes (the buffer holding the token's row; the host picks
// it and checked the id); out: [n_tok][n]. One invocation per element: ceil(n / L) groups.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) writeonly buffer Out { float outv[]; };
layout(push_constant) uniform P { uint row_bytes, n, row, t; float scale; } pc;

#include "quants.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  const float v = tl_at(pc.row * pc.row_bytes, i, pc.n);
  outv[pc.t * pc.n + i] = pc.scale != 1.0 ? v * pc.scale : v;
}
