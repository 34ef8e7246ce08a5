#version 450
// Y = X W^T for prompts on cooperative matrices (tensor cores), every weight format: the prefill GEMM on a
// device that lists 16 x 16 x 16 fp16 matrices with fp32 sums (Capabilities::coopmat_f16). Decode and the
// other devices keep matmul.comp / the matvecs.
// W: [n_rows] device rows of row_bytes (formats in quants.glsl; rows row0 .. row0 + n_rows of the matrix,
// as matmul.comp); x: [n_tok][n_in]; y: [n_tok][n_out].
//
// A work-group computes a tile of TL_BM = 64 rows by TL_BN = 64 tokens with four subgroups, each a 32 x 32
// quarter as 2 x 2 matrices of 16 x 16 (in C = A B: A the weights, rows by inputs; B the activations,
// inputs by tokens; C rows by tokens). Each step over the inputs takes TL_BK = 64 of them (two blocks of
// 32): the invocations decode the tile's 64 x 2 weight blocks (tl_block, the formats' exact values) and
// convert the 64 tokens' 64 activations, both rounded to fp16 into shared memory, then every subgroup
// loads its A and B matrices from there and multiplies. Both fp16 roundings are the precision of this path
// (~4e-4 of the largest output; the self-check's bound for it is wider than for the float shaders).
// Rows past n_rows repeat the last row and tokens past n_tok the last token (never written); a row's
// inputs past n_in are zeros.
//
// The local size (specialization constant 0) is four subgroups: 4 x the device's subgroup size, so that
// gl_NumSubgroups == 4 (a device whose subgroups come out otherwise fails the self-check and keeps
// matmul.comp). Specialization constant 1 is TL_FMT. TL_CM_EMULATE 1 (coopmat.glsl) is the test build that
// runs this tiling without cooperative matrices.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 0) readonly buffer W4 { uvec4 w4[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint row_bytes, n_in, n_rows, n_tok, n_out, row0; } pc;

#include "quants.glsl"

// Blocks of 32 inputs a step: 2 (the backend's); the emulated test build takes 1 to fit lavapipe's 32 KiB of
// shared memory.
#ifndef TL_BK_BLOCKS
#define TL_BK_BLOCKS 2
#endif
const uint TL_BM = 64u, TL_BN = 64u, TL_BKB = TL_BK_BLOCKS, TL_BK = 32u * TL_BKB;
// Row strides of the shared tiles in elements: 8 halves (16 bytes) past the step's 64, so that neighbouring
// rows start in other banks; multiples of 8 halves keep every matrix load 16-byte aligned.
const uint TL_SK = TL_BK + 8u, TL_SC = TL_BM + 4u;
shared float16_t tl_a[TL_BM * TL_SK];  // [r][k]: row r0 + r, input k0 + k (A row-major)
shared float16_t tl_b[TL_BN * TL_SK];  // [t][k]: token t0 + t, input k0 + k (B column-major)
shared float tl_c[TL_BN * TL_SC];      // [t][r]: the tile's sums (C column-major), written out at the end

#include "coopmat.glsl"

void main() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
  // Row tiles past the device's x limit continue in z.
  const uint r0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * TL_BM;
  const uint t0 = gl_WorkGroupID.y * TL_BN;
  if (r0 >= pc.n_rows) return;  // the whole group
  const uint n = pc.n_in, nblocks = (n + 31u) / 32u;
  // This subgroup's quarter: rows qm .. qm + 32, tokens qn .. qn + 32 of the tile.
  const uint qm = (gl_SubgroupID & 1u) * 32u, qn = (gl_SubgroupID >> 1u) * 32u;
  tl_cm_c c00 = tl_cm_fill_c(0.0), c01 = tl_cm_fill_c(0.0), c10 = tl_cm_fill_c(0.0), c11 = tl_cm_fill_c(0.0);
  for (uint kb = 0; kb < nblocks; kb += TL_BKB) {
    // Weights: item i is row i / TL_BKB's block kb + i % TL_BKB.
    for (uint i = lid; i < TL_BKB * TL_BM; i += ls) {
      const uint r = i / TL_BKB, h = i % TL_BKB;
      vec4 v[8];
      if (kb + h < nblocks) {
        tl_block(min(r0 + r, pc.n_rows - 1u) * pc.row_bytes, kb + h, n, v);
      } else {
        [[unroll]] for (uint c = 0; c < 8u; ++c) v[c] = vec4(0.0);
      }
      const uint base = r * TL_SK + 32u * h;
      [[unroll]] for (uint c = 0; c < 8u; ++c) {
        [[unroll]] for (uint e = 0; e < 4u; ++e) tl_a[base + 4u * c + e] = float16_t(v[c][e]);
      }
    }
    // Activations: item i is token i / (8 TL_BKB)'s inputs k0 + 4 (i % (8 TL_BKB)) ... + 3.
    for (uint i = lid; i < 8u * TL_BKB * TL_BN; i += ls) {
      const uint t = i / (8u * TL_BKB), c = i % (8u * TL_BKB), k = 32u * kb + 4u * c;
      const uint xt = min(t0 + t, pc.n_tok - 1u) * n;
      vec4 e;
      if (TL_FMT >= 2u && k < n) {
        e = x4[(xt + k) / 4u];  // whole blocks: n % 32 == 0, aligned
      } else {
        [[unroll]] for (uint j = 0; j < 4u; ++j) e[j] = k + j < n ? x[xt + k + j] : 0.0;
      }
      [[unroll]] for (uint j = 0; j < 4u; ++j) tl_b[t * TL_SK + 4u * c + j] = float16_t(e[j]);
    }
    barrier();
    [[unroll]] for (uint kk = 0; kk < TL_BK; kk += 16u) {
      const tl_cm_a a0 = TL_CM_LOAD_A(tl_a, qm * TL_SK + kk, tl_cm_row_major, TL_SK);
      const tl_cm_a a1 = TL_CM_LOAD_A(tl_a, (qm + 16u) * TL_SK + kk, tl_cm_row_major, TL_SK);
      const tl_cm_b b0 = TL_CM_LOAD_B(tl_b, qn * TL_SK + kk, tl_cm_column_major, TL_SK);
      const tl_cm_b b1 = TL_CM_LOAD_B(tl_b, (qn + 16u) * TL_SK + kk, tl_cm_column_major, TL_SK);
      c00 = tl_cm_mul_add(a0, b0, c00);
      c01 = tl_cm_mul_add(a0, b1, c01);
      c10 = tl_cm_mul_add(a1, b0, c10);
      c11 = tl_cm_mul_add(a1, b1, c11);
    }
    barrier();
  }
  TL_CM_STORE_C(tl_c, qn * TL_SC + qm, c00, tl_cm_column_major, TL_SC);
  TL_CM_STORE_C(tl_c, (qn + 16u) * TL_SC + qm, c01, tl_cm_column_major, TL_SC);
  TL_CM_STORE_C(tl_c, qn * TL_SC + qm + 16u, c10, tl_cm_column_major, TL_SC);
  TL_CM_STORE_C(tl_c, (qn + 16u) * TL_SC + qm + 16u, c11, tl_cm_column_major, TL_SC);
  barrier();
  for (uint i = lid; i < TL_BM * TL_BN; i += ls) {
    const uint t = i / TL_BM, r = i % TL_BM;
    if (r0 + r < pc.n_rows && t0 + t < pc.n_tok) y[(t0 + t) * pc.n_out + pc.row0 + r0 + r] = tl_c[t * TL_SC + r];
  }
}
