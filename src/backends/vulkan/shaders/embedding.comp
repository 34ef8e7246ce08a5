#version 450
// Token embedding lookup: out[t][i] = scale * table[ids[t]][i], the row dequantized exactly (quants.glsl,
// TL_FMT). table: rows row0 .. row0 + rows of the table, device rows of row_bytes (a table too large for one
// buffer is looked up one buffer at a time: a token whose row is in another buffer returns); ids: [n_tok]
// (checked by the host; read here, so that a recorded decode step takes each step's token); out:
// [n_tok][n]. Groups (ceil(n / L), n_tok).
#include "common.glsl"

layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float outv[]; };
layout(push_constant) uniform P { uint row_bytes, n, row0, rows; float scale; } pc;

#include "quants.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  const uint id = uint(ids[t]);
  if (i >= pc.n || id < pc.row0 || id >= pc.row0 + pc.rows) return;
  const float v = tl_at((id - pc.row0) * pc.row_bytes, i, pc.n);
  outv[t * pc.n + i] = pc.scale != 1.0 ? v * pc.scale : v;
}
