#version 450
// Y = X W^T for prompts on cooperative matrices (tensor cores), every weight format: the prefill GEMM on a
// device that lists 16 x 16 x 16 fp16 matrices with fp32 sums (Capabilities::coopmat_f16). Decode and the
// other devices keep matmul.comp / the matvecs.
// W: [n_rows] device rows of row_bytes (formats in quants.glsl; rows row0 .. row0 + n_rows of the matrix,
// as matmul.comp); x: [n_tok][n_in]; y: [n_tok][n_out].
//
// A work-group computes a tile of TL_BM = 128 rows by TL_BN = 128 tokens with eight subgroups, each a 64 x 32
// eighth as 4 x 2 matrices of 16 x 16 (in C = A B: A the weights, rows by inputs; B the activations, inputs
// by tokens; C rows by tokens): a weight block decoded once serves 128 tokens, and each matrix loaded from
// shared memory serves two or four products. Each step over the inputs takes TL_BK = 64 of them (two blocks
// of 32): the invocations decode the tile's 128 x 2 weight blocks (tl_block, the formats' exact values) and
// convert the 128 tokens' 64 activations, both rounded to fp16 into shared memory four at a time (one 8-byte
// store), then every subgroup loads its A and B matrices from there and multiplies. Both fp16 roundings are
// the precision of this path (~4e-4 of the largest output; the self-check's bound for it is wider than for
// the float shaders).
// Rows past n_rows repeat the last row and tokens past n_tok the last token (never written); a row's
// inputs past n_in are zeros. A result matrix wholly inside y, at a 16-byte aligned place, is stored there
// directly; the others go through the subgroup's 16 x 16 scratch in shared memory, element by element.
//
// The local size (specialization constant 0) is eight subgroups: 8 x the device's subgroup size, so that
// gl_NumSubgroups == 8 (a device whose subgroups come out otherwise fails the self-check and keeps
// matmul.comp). Specialization constant 1 is TL_FMT. TL_CM_EMULATE 1 (coopmat.glsl) is the test build that
// runs this tiling without cooperative matrices.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint row_bytes, n_in, n_rows, n_tok, n_out, row0, img_width; } pc;

#include "quants.glsl"

// Blocks of 32 inputs a step: 2 (the backend's); the emulated test build takes 1 to fit lavapipe's 32 KiB of
// shared memory.
#ifndef TL_BK_BLOCKS
#define TL_BK_BLOCKS 2
#endif
const uint TL_BM = 128u, TL_BN = 128u, TL_BKB = TL_BK_BLOCKS, TL_BK = 32u * TL_BKB, TL_NSG = 8u;
// Row stride of the shared tiles in f16vec4s: the step's TL_BK / 4 and 2 more (16 bytes), so that the eight
// rows of a matrix load start in other banks; every matrix then starts 16-byte aligned, as the loads need.
const uint TL_SK = TL_BK / 4u + 2u;
shared f16vec4 tl_a[TL_BM * TL_SK];             // [r][k / 4]: row r0 + r, inputs k0 + k .. + 3 (A row-major)
shared f16vec4 tl_b[TL_BN * TL_SK];             // [t][k / 4]: token t0 + t, the same inputs (B column-major)
shared float tl_s[TL_NSG * 256u];      // [subgroup][token 16][row 16]: a C matrix on its way to y

#include "coopmat.glsl"

// This subgroup's result matrix (i, j), rows m .. m + 16 and tokens t .. t + 16 of y's columns from row0:
// straight into y when it is whole and 16-byte aligned there, else through the subgroup's scratch.
void tl_store(tl_cm_c c, uint m, uint t) {
  if (m + 16u <= pc.n_rows && t + 16u <= pc.n_tok && (pc.n_out | pc.row0) % 4u == 0u) {
    TL_CM_STORE_C(y, t * pc.n_out + pc.row0 + m, c, tl_cm_column_major, pc.n_out);
    return;
  }
  const uint s = gl_SubgroupID * 256u;
  TL_CM_STORE_C(tl_s, s, c, tl_cm_column_major, 16u);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  for (uint e = gl_SubgroupInvocationID; e < 256u; e += gl_SubgroupSize) {
    const uint r = m + e % 16u, k = t + e / 16u;
    if (r < pc.n_rows && k < pc.n_tok) y[k * pc.n_out + pc.row0 + r] = tl_s[s + e];
  }
  subgroupBarrier();  // the scratch is read before the next matrix overwrites it
}

void main() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
  // Row tiles past the device's x limit continue in z.
  const uint r0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * TL_BM;
  const uint t0 = gl_WorkGroupID.y * TL_BN;
  if (r0 >= pc.n_rows) return;  // the whole group
  const uint n = pc.n_in, nblocks = (n + 31u) / 32u;
  // This subgroup's eighth: rows qm .. qm + 64, tokens qn .. qn + 32 of the tile.
  const uint qm = (gl_SubgroupID & 1u) * 64u, qn = (gl_SubgroupID >> 1u) * 32u;
  tl_cm_c c00 = tl_cm_fill_c(0.0), c01 = tl_cm_fill_c(0.0), c10 = tl_cm_fill_c(0.0), c11 = tl_cm_fill_c(0.0);
  tl_cm_c c20 = tl_cm_fill_c(0.0), c21 = tl_cm_fill_c(0.0), c30 = tl_cm_fill_c(0.0), c31 = tl_cm_fill_c(0.0);
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
      [[unroll]] for (uint c = 0; c < 8u; ++c) tl_a[r * TL_SK + 8u * h + c] = f16vec4(v[c]);
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
      tl_b[t * TL_SK + c] = f16vec4(e);
    }
    barrier();
    [[unroll]] for (uint kk = 0; kk < TL_BK / 4u; kk += 4u) {
      const tl_cm_b b0 = TL_CM_LOAD_B(tl_b, qn * TL_SK + kk, tl_cm_column_major, TL_SK);
      const tl_cm_b b1 = TL_CM_LOAD_B(tl_b, (qn + 16u) * TL_SK + kk, tl_cm_column_major, TL_SK);
      tl_cm_a a = TL_CM_LOAD_A(tl_a, qm * TL_SK + kk, tl_cm_row_major, TL_SK);
      c00 = tl_cm_mul_add(a, b0, c00);
      c01 = tl_cm_mul_add(a, b1, c01);
      a = TL_CM_LOAD_A(tl_a, (qm + 16u) * TL_SK + kk, tl_cm_row_major, TL_SK);
      c10 = tl_cm_mul_add(a, b0, c10);
      c11 = tl_cm_mul_add(a, b1, c11);
      a = TL_CM_LOAD_A(tl_a, (qm + 32u) * TL_SK + kk, tl_cm_row_major, TL_SK);
      c20 = tl_cm_mul_add(a, b0, c20);
      c21 = tl_cm_mul_add(a, b1, c21);
      a = TL_CM_LOAD_A(tl_a, (qm + 48u) * TL_SK + kk, tl_cm_row_major, TL_SK);
      c30 = tl_cm_mul_add(a, b0, c30);
      c31 = tl_cm_mul_add(a, b1, c31);
    }
    barrier();
  }
  const uint m = r0 + qm, t = t0 + qn;
  tl_store(c00, m, t);
  tl_store(c01, m, t + 16u);
  tl_store(c10, m + 16u, t);
  tl_store(c11, m + 16u, t + 16u);
  tl_store(c20, m + 32u, t);
  tl_store(c21, m + 32u, t + 16u);
  tl_store(c30, m + 48u, t);
  tl_store(c31, m + 48u, t + 16u);
}
