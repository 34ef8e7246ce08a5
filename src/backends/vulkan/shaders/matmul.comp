#version 450
// y[t] = W x[t] for every weight format (quants.glsl, TL_FMT), decode and prefill alike.
// W: [n_rows] device rows of row_bytes (rows row0 .. row0 + n_rows of the matrix: a matrix too large for one
// buffer is multiplied one buffer at a time); x: [n_tok][n_in]; y: [n_tok][n_out].
// One work-group per TL_ROWS rows by TL_TOKENS tokens (specialization constants 3 and 2, each at most 4:
// 4 x 1 for the float formats' decode, 4 x 4 for prompts): invocation i decodes blocks i, i + L, ... of its rows once and multiplies each by the
// group's tokens, so a block is decoded once per tile of tokens and each activation chunk read once per
// TL_ROWS rows; one
// reduction of the TL_ROWS x TL_TOKENS partial sums ends the group. Rows past n_out repeat the last
// row of the buffer and tokens past n_tok the last token (never written), so the control flow stays uniform.
#define TL_RED_WIDTH 16
#include "common.glsl"

layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint row_bytes, n_in, n_rows, n_tok, n_out, row0, img_width; } pc;
layout(constant_id = 2) const uint TL_TOKENS = 4;
layout(constant_id = 3) const uint TL_ROWS = 4;  // <= 4

#include "quants.glsl"

void main() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
  // Row groups past the device's x limit continue in z.
  const uint r0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * TL_ROWS;
  const uint t0 = gl_WorkGroupID.y * TL_TOKENS;
  if (r0 >= pc.n_rows) return;  // the whole group: no barrier is left waiting
  const uint n = pc.n_in, nblocks = (n + 31u) / 32u;
  // acc[4 r + t]: row r0 + r, token t0 + t. Every loop runs to a literal bound with the specialization
  // constant as a condition inside: a compiler can unroll it, and keep the arrays in registers, before the
  // constants are known (on the H200 it made no difference: NVIDIA's compiler unrolls after specializing).
  float acc[16];
  [[unroll]] for (uint k = 0; k < 16u; ++k) acc[k] = 0.0;
  for (uint b = lid; b < nblocks; b += ls) {
    // The tokens' 32 activations of this block: the block formats' rows are whole blocks (n % 32 == 0), so
    // eight aligned vec4 loads; the float formats' last block reads zeros past n.
    vec4 xs[4][8];
    [[unroll]] for (uint t = 0; t < 4u; ++t) {
      // Tokens past TL_TOKENS repeat the last one (their sums are never used or written).
      const uint xt = min(t0 + min(t, TL_TOKENS - 1u), pc.n_tok - 1u) * n;
      [[unroll]] for (uint c = 0; c < 8u; ++c) {
        if (TL_FMT >= 2u) {
          xs[t][c] = x4[(xt + 32u * b) / 4u + c];
        } else {
          vec4 e;
          [[unroll]] for (uint k = 0; k < 4u; ++k) {
            const uint i = 32u * b + 4u * c + k;
            e[k] = i < n ? x[xt + i] : 0.0;
          }
          xs[t][c] = e;
        }
      }
    }
    [[unroll]] for (uint r = 0; r < 4u; ++r) {
      if (r < TL_ROWS) {
        vec4 v[8];
        tl_block(min(r0 + r, pc.n_rows - 1u) * pc.row_bytes, b, n, v);
        [[unroll]] for (uint t = 0; t < 4u; ++t) {
          float s = 0.0;
          [[unroll]] for (uint c = 0; c < 8u; ++c) s += dot(v[c], xs[t][c]);
          if (t < TL_TOKENS) acc[4u * r + t] += s;
        }
      }
    }
  }
  tl_group_sums(acc, 4u * (TL_ROWS - 1u) + TL_TOKENS);
  if (lid == 0u) {
    [[unroll]] for (uint r = 0; r < 4u; ++r) {
      [[unroll]] for (uint t = 0; t < 4u; ++t) {
        if (r < TL_ROWS && t < TL_TOKENS && r0 + r < pc.n_rows && t0 + t < pc.n_tok)
          y[(t0 + t) * pc.n_out + pc.row0 + r0 + r] = acc[4u * r + t];
      }
    }
  }
}
