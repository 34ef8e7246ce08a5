#version 450
// y = W x for one token (decode) in the block formats, in integers: the quantized activation path
// (--activations q8, the default; backends/modes.h), used where the device has shaderIntegerDotProduct.
// W: [n_rows] device rows of row_bytes (rows row0 .. row0 + n_rows of the matrix, as matvec.comp; formats
// in quants.glsl); x: the input as quantize.comp rounds it; y: [n_out] (written at row0 + r).
//
// Activations: the input rounded to int8 per block of 32 by quantize.comp beforehand (its layout there), once
// for all the products that read it.
//
// Products: invocation i takes blocks i, i + L, ... of each of the group's TL_ROWS rows (16 code bytes of a
// nibble block, 32 of a byte block: one or two 16-byte loads, neighbouring invocations reading neighbouring
// blocks); a block's codes c times the activation codes q as packed 4 x 8-bit dot products (OpSDotKHR and
// OpSUDotKHR: four products and their sum an instruction), and the block's integer sum scaled once:
// sum_j (d c_j + m) (dx q_j) = d dx sum_j c_j q_j + m s (q8dot.glsl, shared with matvec_q8_glu.comp).
// Every row's block is loaded, scale words as they are, before any is used; one reduction of the rows'
// sums ends the group. (A kernel whose subgroups each
// stream their rows round by round, two register buffers deep, as the CUDA backend's streamed matvec does,
// ran 7B Q4_0 decode at 359 t/s on the H200 against this one's 393: docs/PERF.md 2026-12-04 12:05.)
//
// Specialization constants: 0 the local size L, 1 TL_FMT, 2 TL_ROWS (<= 8).
#define TL_RED_WIDTH 8
#extension GL_EXT_spirv_intrinsics : require
#include "common.glsl"

layout(std430, binding = 1) readonly buffer XQ4 { uvec4 xq4[]; };
layout(std430, binding = 1) readonly buffer XQF { float xqf[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint row_bytes, n_in, n_rows, n_tok, n_out, row0, img_width; } pc;
layout(constant_id = 2) const uint TL_ROWS = 8;

#include "quants.glsl"
#include "q8dot.glsl"

void main() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
  const uint n = pc.n_in, nb = n / 32u;
  // Row groups past the device's x limit continue in z; a group may take several (uniform per group).
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.z;
  for (uint g = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x; g * TL_ROWS < pc.n_rows; g += stride) {
    const uint r0 = g * TL_ROWS;
    float acc[TL_RED_WIDTH];
    uint row[TL_RED_WIDTH];
    [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
      acc[r] = 0.0;
      row[r] = min(r0 + r, pc.n_rows - 1u) * pc.row_bytes;
    }
    for (uint b = lid; b < nb; b += ls) {
      // Every row's block loaded before any is used: TL_ROWS loads of 16 or 32 bytes in flight.
      RowBlock rb[TL_RED_WIDTH];
      [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
        if (r < TL_ROWS) load_block(0u, row[r], b, n, rb[r]);
      }
      const XBlock x = load_x(b, nb);
      [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
        if (r < TL_ROWS) acc[r] += block_dot(rb[r], b, x);
      }
    }
    tl_group_sums(acc, TL_ROWS);
    if (lid == 0u) {
      [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
        if (r < TL_ROWS && r0 + r < pc.n_rows) y[pc.row0 + r0 + r] = acc[r];
      }
    }
  }
}
