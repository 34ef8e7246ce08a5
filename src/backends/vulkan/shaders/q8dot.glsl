// The integer products of the one-token matvecs (matvec_q8.comp, matvec_q8_glu.comp): a block of weights
// (formats in quants.glsl, TL_FMT) times a block of the rounded input (q8.glsl's layout).
//
// The including shader declares, before including this file (after quants.glsl): the rounded input as
// xq4 (uvec4) and xqf (float) over one buffer, and the "#extension GL_EXT_spirv_intrinsics" line. Weights
// are read through TL_WM / TL_W2M / TL_W4M (m, i): the i-th 4-, 8- or 16-byte unit of matrix m; by default
// weights.glsl's tl_w / tl_w2 / tl_w4 for every m (one matrix at binding 0), a shader with a second
// matrix defines them to choose by m (a constant once the loops unroll).
#ifndef TL_W4M
#define TL_WM(m, i) tl_w(i)
#define TL_W2M(m, i) tl_w2(i)
#define TL_W4M(m, i) tl_w4(i)
#endif

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

// The words that hold block b's scales in the row at `row` (n elements) of matrix m, loaded as they are.
uvec4 load_scales(uint m, uint row, uint b, uint n) {
  const uint nb = n / 32u;
  if (TL_FMT == 2u) return uvec4(TL_WM(m, (row + 16u * nb + 2u * b) >> 2), 0u, 0u, 0u);
  if (TL_FMT == 3u) return uvec4(TL_WM(m, (row + 16u * nb + 4u * b) >> 2), 0u, 0u, 0u);
  if (TL_FMT == 5u) return uvec4(TL_WM(m, (row + 16u * nb + 4u * (b / 2u)) >> 2), 0u, 0u, 0u);
  if (TL_FMT == 8u) return uvec4(TL_W2M(m, (row + 16u * nb + 8u * b) >> 3), 0u, 0u);
  if (TL_FMT == 4u) return uvec4(TL_WM(m, (row + 32u * nb + 2u * b) >> 2), 0u, 0u, 0u);
  if (TL_FMT == 6u) return uvec4(TL_WM(m, (row + 32u * nb) >> 2), 0u, 0u, 0u);
  return TL_W4M(m, (row + n + 16u * b) >> 4);  // KQ8: two (scale, offset) pairs, 16-byte aligned
}

// (d, m) of block b from its scale words, with w = d c + m for the codes c as the dot products take them
// (the signed byte formats' codes as they are, m = 0); KQ8 has a pair per half of 16: the second half's in
// dm2. Rows start at multiples of 16 bytes, so a half-precision d of Q4_0 / Q8_0 is the high half of its
// word for odd b.
void block_scales(uvec4 s, uint b, out vec2 dm, out vec2 dm2) {
  dm2 = vec2(0.0);
  if (TL_FMT == 2u) {
    const float d = unpackHalf2x16(s.x >> (16u * (b & 1u))).x;
    dm = vec2(d, -8.0 * d);
  } else if (TL_FMT == 3u || TL_FMT == 5u || TL_FMT == 6u) {
    dm = unpackHalf2x16(s.x);
  } else if (TL_FMT == 8u) {
    dm = uintBitsToFloat(s.xy);
  } else if (TL_FMT == 4u) {
    dm = vec2(unpackHalf2x16(s.x >> (16u * (b & 1u))).x, 0.0);
  } else {  // KQ8
    dm = uintBitsToFloat(s.xy);
    dm2 = uintBitsToFloat(s.zw);
  }
}

// A block of one row of matrix m as loaded: its codes and scale words.
struct RowBlock {
  uvec4 c0, c1;  // c1: the byte formats' second 16 bytes
  uvec4 s;       // load_scales
};

void load_block(uint m, uint row, uint b, uint n, out RowBlock rb) {
  const uint codes = row + (kNibbles ? 16u : 32u) * b;  // 16-byte aligned
  rb.c0 = TL_W4M(m, codes >> 4);
  rb.c1 = kNibbles ? uvec4(0u) : TL_W4M(m, (codes >> 4) + 1u);
  rb.s = load_scales(m, row, b, n);
}

// Block b's contribution: d dx (sum c q) + m s (each half on its own for KQ8).
float block_dot(RowBlock rb, uint b, XBlock x) {
  vec2 dm, dm2;
  block_scales(rb.s, b, dm, dm2);
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
  if (TL_FMT == 7u) return dm.x * x.d * float(lo) + dm.y * x.s.x + dm2.x * x.d * float(hi) + dm2.y * x.s.y;
  return dm.x * x.d * float(lo + hi) + dm.y * (x.s.x + x.s.y);
}
