#version 450
// The gated feed-forward's input for one token on the integer path (Backend::matmul_glu): y = act(Wg x) *
// (Wu x), the two products as matvec_q8.comp makes them (q8dot.glsl) and the gated unit of glu.comp, in one
// dispatch instead of three; and y rounded to int8 per block of 32 (q8.glsl) for the down product.
// Wg, Wu: [n_rows] device rows of row_bytes each, one format (a matrix in one buffer); x: the input rounded
// (q8.glsl's layout); y: [n_rows] floats; q: y's rounding; counters: [n_rows / 32] zeros between dispatches.
//
// A group takes the same TL_ROWS rows of both matrices (2 TL_ROWS sums, one reduction). The rounding of a
// block of 32 rows needs rows other groups write: the group that completes a block (its count of written
// rows, in `counters`, reaching 32) reads the block back through coherent loads, after the writers'
// memory barriers, rounds it and sets the count back to zero for the next dispatch. pc.round_out 0 (n_rows
// not a multiple of 32, or past the rounding buffer) leaves q and the counters alone.
//
// Specialization constants: 0 the local size L, 1 TL_FMT, 2 TL_ROWS (<= 4, divides 32), 3 TL_ACT (0 SiLU, 1
// GELU-tanh).
#define TL_RED_WIDTH 8
#extension GL_EXT_spirv_intrinsics : require
#include "common.glsl"

layout(std430, binding = 1) readonly buffer XQ4 { uvec4 xq4[]; };
layout(std430, binding = 1) readonly buffer XQF { float xqf[]; };
layout(std430, binding = 2) coherent buffer Y { float y[]; };
layout(std430, binding = 2) coherent buffer Y4 { vec4 y4[]; };
layout(std430, binding = 3) readonly buffer WU { uint wu[]; };
layout(std430, binding = 3) readonly buffer WU2 { uvec2 wu2[]; };
layout(std430, binding = 3) readonly buffer WU4 { uvec4 wu4[]; };
layout(std430, binding = 4) writeonly buffer Q { uint q8w[]; };
layout(std430, binding = 4) writeonly buffer QF { float q8f[]; };
layout(std430, binding = 5) coherent buffer C { uint counters[]; };
layout(push_constant) uniform P { uint row_bytes, n_in, n_rows, round_out; } pc;
layout(constant_id = 2) const uint TL_ROWS = 2;
layout(constant_id = 3) const uint TL_ACT = 0;

#include "quants.glsl"
// Matrix 0: the gate (binding 0, weights.glsl); 1: up (binding 3).
#define TL_WM(m, i) ((m) == 0u ? tl_w(i) : wu[i])
#define TL_W2M(m, i) ((m) == 0u ? tl_w2(i) : wu2[i])
#define TL_W4M(m, i) ((m) == 0u ? tl_w4(i) : wu4[i])
#include "q8dot.glsl"
#include "q8.glsl"

void main() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
  const uint n = pc.n_in, nb = n / 32u;
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.z;
  for (uint g = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x; g * TL_ROWS < pc.n_rows; g += stride) {
    const uint r0 = g * TL_ROWS;
    // acc[r]: gate row r0 + r; acc[TL_ROWS + r]: up row r0 + r.
    float acc[TL_RED_WIDTH];
    uint row[TL_RED_WIDTH];
    [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
      acc[r] = 0.0;
      row[r] = min(r0 + r % TL_ROWS, pc.n_rows - 1u) * pc.row_bytes;
    }
    for (uint b = lid; b < nb; b += ls) {
      RowBlock rb[TL_RED_WIDTH];
      [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
        if (r < 2u * TL_ROWS) load_block(r < TL_ROWS ? 0u : 1u, row[r], b, n, rb[r]);
      }
      const XBlock x = load_x(b, nb);
      [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
        if (r < 2u * TL_ROWS) acc[r] += block_dot(rb[r], b, x);
      }
    }
    tl_group_sums(acc, 2u * TL_ROWS);
    if (lid == 0u) {
      [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
        if (r < TL_ROWS && r0 + r < pc.n_rows)
          y[r0 + r] = TL_ACT == 1u ? tl_gelu_mul(acc[r], acc[TL_ROWS + r]) : tl_silu_mul(acc[r], acc[TL_ROWS + r]);
      }
      if (pc.round_out != 0u) {
        memoryBarrierBuffer();  // this group's rows before its count
        const uint b32 = r0 / 32u, rows = min(TL_ROWS, pc.n_rows - r0);
        if (atomicAdd(counters[b32], rows) + rows == 32u) {
          counters[b32] = 0u;
          memoryBarrierBuffer();  // the other groups' rows, made visible before their counts
          vec4 v[8];
          [[unroll]] for (uint k = 0; k < 8u; ++k) v[k] = y4[8u * b32 + k];
          tl_q8_store(v, b32, pc.n_rows / 32u);
        }
      }
    }
  }
}
