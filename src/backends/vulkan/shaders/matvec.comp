#version 450
// y = W x for one token (decode) in the block formats (quants.glsl's TL_FMT 2 ... 8; the float formats run
// matmul.comp with one token). W: [n_rows] device rows of row_bytes (rows row0 .. row0 + n_rows of the
// matrix, as matmul.comp); x: [n_in]; y: [n_out] (written at row0 + r).
//
// Work: one work-group per TL_ROWS rows (specialization constant 2). Each block of 32 weights is split into
// TL_PARTS parts (constant 3: 1, 2 or 4 for the nibble formats, 2, 4 or 8 for the byte ones) and invocation
// i takes parts i, i + L, ... of every row of the group, TL_UNROLL (constant 4) of them loaded before any is
// used while whole steps of TL_UNROLL x L parts remain: neighbouring invocations read neighbouring code words and neighbouring activations, so both loads
// are coalesced, and each activation is read once for TL_ROWS rows. One reduction of the TL_ROWS partial
// sums ends the group. Rows past n_rows repeat the last row (never written): the control flow is uniform.
//
// Arithmetic: every format's weight is w = d v + m with v a non-negative code (quants.glsl's list; the
// signed byte formats' codes flipped to q + 128, their m absorbing -128 d), so a part's dot product is
// d (sum v x) + m (sum x), the second sum shared by the group's rows. A code is turned into a float where it
// lies in its word: (word & 0xF00) | 0x4B000000 is the float 2^23 + 256 v, exact, so 2^23 subtracted leaves
// 256 v, and the activation it meets was scaled by 1/256 when it was loaded (exact: a power of two). That
// is one logic op, one add and one fma per weight; the words' upper halves take one shift.
#define TL_RED_WIDTH 8
#include "common.glsl"

layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint row_bytes, n_in, n_rows, n_tok, n_out, row0, img_width; } pc;
layout(constant_id = 2) const uint TL_ROWS = 4;    // <= TL_RED_WIDTH
layout(constant_id = 3) const uint TL_PARTS = 4;   // a power of two; nibbles <= 4, bytes 2 ... 8
layout(constant_id = 4) const uint TL_UNROLL = 4;  // 1 ... 4

#include "quants.glsl"

const bool kNibbles = TL_FMT == 2u || TL_FMT == 3u || TL_FMT == 5u || TL_FMT == 8u;
// 32-bit code words per part: a block has 4 (nibbles: word c holds elements 4c .. 4c + 3 in its bytes' low
// nibbles and 16 + 4c ... in their high ones) or 8 (bytes: word c holds elements 4c .. 4c + 3).
const uint kWords = (kNibbles ? 4u : 8u) / TL_PARTS;
// Activations per part as vec4s: a nibble word meets two (its low and high nibbles' elements).
const uint kVecs = kNibbles ? 2u * kWords : kWords;
const float kMagic = 8388608.0;  // 2^23

// Part p's code words of the block whose codes start at byte `codes` (16-byte aligned), in c[0 .. kWords).
void load_codes(uint codes, uint p, out uint c[4]) {
  [[unroll]] for (uint k = 0; k < 4u; ++k) c[k] = 0u;
  if (kWords == 4u) {
    const uvec4 v = tl_w4((codes >> 4) + p);
    c[0] = v.x, c[1] = v.y, c[2] = v.z, c[3] = v.w;
  } else if (kWords == 2u) {
    const uvec2 v = tl_w2((codes >> 3) + p);
    c[0] = v.x, c[1] = v.y;
  } else {
    c[0] = tl_w((codes >> 2) + p);
  }
}

// The floats 2^23 + (word & mask) for the four masks, less 2^23.
vec4 in_place(uint lo, uint hi, uint mask_a, uint mask_b) {
  return uintBitsToFloat(uvec4(lo & mask_a, lo & mask_b, hi & mask_a, hi & mask_b) | 0x4B000000u) - kMagic;
}

// (d, m) of part p of block b of the row at `row` (n elements): w = d v + m for the part's codes v.
vec2 part_scale(uint row, uint b, uint p, uint n) {
  const uint nb = n / 32u;
  if (TL_FMT == 2u) {
    const float d = tl_half(row + 16u * nb + 2u * b);
    return vec2(d, -8.0 * d);
  }
  if (TL_FMT == 3u || TL_FMT == 5u) {
    const uint s = row + 16u * nb + 4u * (TL_FMT == 3u ? b : b / 2u);
    return vec2(tl_half(s), tl_half(s + 2u));
  }
  if (TL_FMT == 8u) {
    const uint s = row + 16u * nb + 8u * b;
    return vec2(tl_f32(s), tl_f32(s + 4u));
  }
  if (TL_FMT == 4u) {
    const float d = tl_half(row + 32u * nb + 2u * b);
    return vec2(d, -128.0 * d);
  }
  if (TL_FMT == 6u) return vec2(tl_half(row + 32u * nb), tl_half(row + 32u * nb + 2u));
  // KQ8: the (scale, offset) of the 16 elements the part lies in (a part has at most 4 words).
  const uint g = row + n + 8u * (2u * b + (p * kWords) / 4u);
  const float d = tl_f32(g);
  return vec2(d, tl_f32(g + 4u) - 128.0 * d);
}

// sum v x over part p's codes c, against the activations scaled as in_place leaves the codes (xl: the
// words' elements, or their low nibbles' ones; xh: the high nibbles' ones).
float part_codes_dot(uint c[4], vec4 xl[4], vec4 xh[4]) {
  float s = 0.0;
  [[unroll]] for (uint k = 0; k < 4u; ++k) {
    if (k < kWords) {
      uint lo = c[k];
      if (!kNibbles && TL_FMT != 6u) lo ^= 0x80808080u;  // signed bytes: q + 128
      const uint hi = lo >> 16;
      if (kNibbles) {
        s += dot(in_place(lo, hi, 0xFu, 0xF00u), xl[k]);
        s += dot(in_place(lo, hi, 0xF0u, 0xF000u), xh[k]);
      } else {
        s += dot(in_place(lo, hi, 0xFFu, 0xFF00u), xl[k]);
      }
    }
  }
  return s;
}

// One part of every row of the group: the activations (scaled as in_place leaves the codes), their sum,
// the rows' code words and (d, m).
struct Unit {
  vec4 xl[4], xh[4];
  float sx;
  uint codes[TL_RED_WIDTH][4];
  vec2 dm[TL_RED_WIDTH];
};

// The scales in_place leaves on the codes of a word, undone on the activations: elements of bytes 0 and 2
// (low nibble, or byte) 1, bytes 1 and 3 1/256; high nibbles 1/16 of that.
const vec4 kLoScale = vec4(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0), kHiScale = kLoScale * (1.0 / 16.0);

// Every loop below runs to a literal bound with the specialization constant as a condition inside: a
// compiler can unroll it, and keep the arrays in registers, before the constants are known (matmul.comp).
void load_unit(uint u, uint n, uint row[TL_RED_WIDTH], out Unit un) {
  const uint b = u / TL_PARTS, p = u % TL_PARTS;
  vec4 s4 = vec4(0.0);
  [[unroll]] for (uint k = 0; k < 4u; ++k) {
    un.xl[k] = un.xh[k] = vec4(0.0);
    if (k < kWords) {
      const vec4 lo = x4[8u * b + p * kWords + k];
      s4 += lo;
      un.xl[k] = lo * kLoScale;
      if (kNibbles) {
        const vec4 hi = x4[8u * b + 4u + p * kWords + k];
        s4 += hi;
        un.xh[k] = hi * kHiScale;
      }
    }
  }
  un.sx = s4.x + s4.y + s4.z + s4.w;
  [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
    if (r < TL_ROWS) {
      load_codes(row[r] + (kNibbles ? 16u : 32u) * b, p, un.codes[r]);
      un.dm[r] = part_scale(row[r], b, p, n);
    }
  }
}

void add_unit(Unit un, inout float acc[TL_RED_WIDTH]) {
  [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
    if (r < TL_ROWS) acc[r] += un.dm[r].x * part_codes_dot(un.codes[r], un.xl, un.xh) + un.dm[r].y * un.sx;
  }
}

void main() {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
  const uint n = pc.n_in, units = (n / 32u) * TL_PARTS;
  // Row groups past the device's x limit continue in z; a dispatch of fewer groups than row groups (the
  // host's choice) has each group take row groups g, g + G, ... (uniform per group: its barriers are met).
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.z;
  for (uint g = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x; g * TL_ROWS < pc.n_rows; g += stride) {
    const uint r0 = g * TL_ROWS;
    float acc[TL_RED_WIDTH];
    [[unroll]] for (uint k = 0; k < TL_RED_WIDTH; ++k) acc[k] = 0.0;
    uint row[TL_RED_WIDTH];
    [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) row[r] = min(r0 + r, pc.n_rows - 1u) * pc.row_bytes;
    // Whole steps of TL_UNROLL x L parts, their loads issued before any is used; then the rest one at a time.
    uint base = 0;
    for (; base + ls * TL_UNROLL <= units; base += ls * TL_UNROLL) {
      Unit un[4];
      [[unroll]] for (uint j = 0; j < 4u; ++j) {
        if (j < TL_UNROLL) load_unit(base + j * ls + lid, n, row, un[j]);
      }
      [[unroll]] for (uint j = 0; j < 4u; ++j) {
        if (j < TL_UNROLL) add_unit(un[j], acc);
      }
    }
    for (uint u = base + lid; u < units; u += ls) {
      Unit un;
      load_unit(u, n, row, un);
      add_unit(un, acc);
    }
    tl_group_sums(acc, TL_ROWS);
    if (lid == 0u) {
      [[unroll]] for (uint r = 0; r < TL_RED_WIDTH; ++r) {
        if (r < TL_ROWS && r0 + r < pc.n_rows) y[pc.row0 + r0 + r] = acc[r];
      }
    }
  }
}
