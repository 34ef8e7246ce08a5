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
// sum_j (d c_j + m) (dx q_j) = d dx sum_j c_j q_j + m s. One reduction of the rows' sums ends the group.
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

// SPV_KHR_integer_dot_product (Debian's glslang has no GLSL extension for it): capabilities DotProductKHR
// (6019) and DotProductInput4x8BitPackedKHR (6018); the last operand 0 is PackedVectorFormat4x8Bit.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int tl_sdot(uint a, uint b, spirv_literal int packed_format);  // OpSDotKHR: signed x signed
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int tl_sudot(uint a, uint b, spirv_literal int packed_format);  // OpSUDotKHR: signed a x unsigned b

const bool kNibbles = TL_FMT == 2u || TL_FMT == 3u || TL_FMT == 5u || TL_FMT == 8u;

// The rounded input's block b: its codes (words 0..3 and 4..7), d and the halves' sums.
struct XBlock {
  uvec4 lo, hi;
  float d;
  vec2 s;
};

XBlock load_x(uint b, uint nb) {
  XBlock x;
  x.lo = xq4[2u * b];
  x.hi = xq4[2u * b + 1u];
  x.d = xqf[8u * nb + b];
  x.s = vec2(xqf[9u * nb + 2u * b], xqf[9u * nb + 2u * b + 1u]);
  return x;
}

// (d, m) of block b of the row at `row` (n elements), with w = d c + m for the codes c as the dot products
// take them (the signed byte formats' codes as they are, m = 0); KQ8 has a pair per half of 16: the second
// half's in dm2.
void block_scales(uint row, uint b, uint n, out vec2 dm, out vec2 dm2) {
  const uint nb = n / 32u;
  dm2 = vec2(0.0);
  if (TL_FMT == 2u) {
    const float d = tl_half(row + 16u * nb + 2u * b);
    dm = vec2(d, -8.0 * d);
  } else if (TL_FMT == 3u || TL_FMT == 5u) {
    const uint s = row + 16u * nb + 4u * (TL_FMT == 3u ? b : b / 2u);
    dm = vec2(tl_half(s), tl_half(s + 2u));
  } else if (TL_FMT == 8u) {
    const uint s = row + 16u * nb + 8u * b;
    dm = vec2(tl_f32(s), tl_f32(s + 4u));
  } else if (TL_FMT == 4u) {
    dm = vec2(tl_half(row + 32u * nb + 2u * b), 0.0);
  } else if (TL_FMT == 6u) {
    dm = vec2(tl_half(row + 32u * nb), tl_half(row + 32u * nb + 2u));
  } else {  // KQ8
    const uint g = row + n + 16u * b;
    dm = vec2(tl_f32(g), tl_f32(g + 4u));
    dm2 = vec2(tl_f32(g + 8u), tl_f32(g + 12u));
  }
}

// A block of one row as loaded: its codes and scales.
struct RowBlock {
  uvec4 c0, c1;  // c1: the byte formats' second 16 bytes
  vec2 dm, dm2;
};

void load_block(uint row, uint b, uint n, out RowBlock rb) {
  const uint codes = row + (kNibbles ? 16u : 32u) * b;  // 16-byte aligned
  rb.c0 = tl_w4(codes >> 4);
  rb.c1 = kNibbles ? uvec4(0u) : tl_w4((codes >> 4) + 1u);
  block_scales(row, b, n, rb.dm, rb.dm2);
}

// The block's contribution: d dx (sum c q) + m s (each half on its own for KQ8).
float block_dot(RowBlock rb, XBlock x) {
  int lo = 0, hi = 0;
  [[unroll]] for (uint t = 0; t < 4u; ++t) {
    if (kNibbles) {
      // word t: weights 4t .. 4t + 3 in its low nibbles, 16 + 4t ... in its high ones
      lo += tl_sudot(x.lo[t], rb.c0[t] & 0x0F0F0F0Fu, 0);
      hi += tl_sudot(x.hi[t], (rb.c0[t] >> 4) & 0x0F0F0F0Fu, 0);
    } else if (TL_FMT == 6u) {  // unsigned bytes
      lo += tl_sudot(x.lo[t], rb.c0[t], 0);
      hi += tl_sudot(x.hi[t], rb.c1[t], 0);
    } else {  // signed bytes
      lo += tl_sdot(x.lo[t], rb.c0[t], 0);
      hi += tl_sdot(x.hi[t], rb.c1[t], 0);
    }
  }
  if (TL_FMT == 7u)
    return rb.dm.x * x.d * float(lo) + rb.dm.y * x.s.x + rb.dm2.x * x.d * float(hi) + rb.dm2.y * x.s.y;
  return rb.dm.x * x.d * float(lo + hi) + rb.dm.y * (x.s.x + x.s.y);
}

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
        if (r < TL_ROWS) load_block(row[r], b, n, rb[r]);
      }
      const XBlock x = load_x(b, nb);
      [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
        if (r < TL_ROWS) acc[r] += block_dot(rb[r], x);
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
