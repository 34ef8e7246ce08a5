// The device weight formats (backends/device_rows.h; the same bytes as the OpenCL backend's) read through
// weights.glsl's tl_w / tl_w4 (binding 0: a storage buffer, or an image in the _image variants; a block's
// codes are one or two aligned 16-byte units). TL_FMT (specialization constant 1) selects the format, in
// DeviceFormat's order; the driver folds the branches when it builds the pipeline.
// Every weight is first formed exactly as its format defines it, then used in float arithmetic (the CPU
// backend's float path). Offsets are in bytes from the start of the buffer; rows of the block formats
// start at multiples of 16 bytes.
//   0 F32, 1 F16: one element each (F16 rows start at even offsets).
//   2 Q4_0: [nb][16] codes, then [nb] half d; w = d (q - 8); element j < 16 the low nibble of byte j,
//     j >= 16 the high nibble of byte j - 16.
//   3 Q4_1: codes as Q4_0, then [nb] (half d, half m); w = d q + m.
//   4 Q8_0: [nb][32] signed codes, then [nb] half d; w = d q.
//   5 INT4B64: codes as Q4_0, then (half d, half m) per 64 weights (block b's pair b / 2); w = d q + m.
//   6 INT8B0: [nb][32] unsigned codes, then one (half d, half m) for the row; w = d q + m.
//   7 KQ8: [n] signed codes, then [n / 16] (float scale, float offset); w = scale q + offset.
//   8 KQ4: codes as Q4_0, then [nb] (float scale, float offset); w = scale q + offset.
#include "weights.glsl"

layout(constant_id = 1) const uint TL_FMT = 0;

uint tl_byte(uint off) { return (tl_w(off >> 2) >> ((off & 3u) * 8u)) & 255u; }
int tl_sbyte(uint off) { return int(tl_byte(off) << 24) >> 24; }
float tl_half(uint off) { return unpackHalf2x16(tl_w(off >> 2) >> ((off & 2u) * 8u)).x; }
float tl_f32(uint off) { return uintBitsToFloat(tl_w(off >> 2)); }

// The 4-bit code of element j (< 32) of the block whose 16 code bytes start at `codes`.
uint tl_nibble(uint codes, uint j) { return j < 16u ? tl_byte(codes + j) & 15u : tl_byte(codes + j - 16u) >> 4; }

// Element i of a device row at `row` of n elements.
float tl_at(uint row, uint i, uint n) {
  const uint nb = n / 32u, b = i / 32u, j = i % 32u;
  if (TL_FMT == 0u) return tl_f32(row + 4u * i);
  if (TL_FMT == 1u) return tl_half(row + 2u * i);
  if (TL_FMT == 2u) return tl_half(row + 16u * nb + 2u * b) * float(int(tl_nibble(row + 16u * b, j)) - 8);
  if (TL_FMT == 3u) {
    const uint p = row + 16u * nb + 4u * b;
    return tl_half(p) * float(tl_nibble(row + 16u * b, j)) + tl_half(p + 2u);
  }
  if (TL_FMT == 4u) return tl_half(row + 32u * nb + 2u * b) * float(tl_sbyte(row + i));
  if (TL_FMT == 5u) {
    const uint p = row + 16u * nb + 4u * (b / 2u);
    return tl_half(p) * float(tl_nibble(row + 16u * b, j)) + tl_half(p + 2u);
  }
  if (TL_FMT == 6u) {
    const uint p = row + 32u * nb;
    return tl_half(p) * float(tl_byte(row + i)) + tl_half(p + 2u);
  }
  if (TL_FMT == 7u) {
    const uint p = row + n + 8u * (i / 16u);
    return tl_f32(p) * float(tl_sbyte(row + i)) + tl_f32(p + 4u);
  }
  const uint p = row + 16u * nb + 8u * b;
  return tl_f32(p) * float(tl_nibble(row + 16u * b, j)) + tl_f32(p + 4u);
}

// Small integer codes as floats without an int -> float conversion, which NVIDIA GPUs issue at a quarter
// of their FMA rate (a decode matvec is then bound by the conversions, not by memory; measured on the H200:
// docs/PERF.md): for 0 <= n < 2^23 the float with bits 0x4B000000 | n is 2^23 + n, so subtracting 2^23 + off
// gives n - off exactly. A shift, a mask, an or and a subtract per code, all full rate.
vec4 tl_codes4(uvec4 n, float off) { return uintBitsToFloat(n | 0x4B000000u) - (8388608.0 + off); }
// The four bytes of word c (lowest-addressed first), or the low or high nibbles of its bytes, as floats
// minus off; the bytes as signed values (flipping the sign bit makes each q + 128).
vec4 tl_bytes4(uint c, float off) { return tl_codes4((uvec4(c) >> uvec4(0, 8, 16, 24)) & 255u, off); }
vec4 tl_lo4(uint c, float off) { return tl_codes4((uvec4(c) >> uvec4(0, 8, 16, 24)) & 15u, off); }
vec4 tl_hi4(uint c, float off) { return tl_codes4((uvec4(c) >> uvec4(4, 12, 20, 28)) & 15u, off); }
vec4 tl_sbytes4(uint c) { return tl_bytes4(c ^ 0x80808080u, 128.0); }

// The 32 weights of block b (elements 32b .. 32b + 31) of a row at `row` of n elements, as 8 vec4s; the
// float formats read past n as zeros (their rows need not be whole blocks).
void tl_block(uint row, uint b, uint n, out vec4 v[8]) {
  const uint nb = n / 32u;
  if (TL_FMT == 0u || TL_FMT == 1u) {
    [[unroll]] for (uint c = 0; c < 8u; ++c) {
      vec4 e;
      [[unroll]] for (uint k = 0; k < 4u; ++k) {
        const uint i = 32u * b + 4u * c + k;
        e[k] = i < n ? (TL_FMT == 0u ? tl_f32(row + 4u * i) : tl_half(row + 2u * i)) : 0.0;
      }
      v[c] = e;
    }
    return;
  }
  if (TL_FMT == 4u || TL_FMT == 6u || TL_FMT == 7u) {
    // Byte codes: 8 words.
    const uint codes = row + 32u * b;
    float d0, m0, d1, m1;
    if (TL_FMT == 4u) {
      d0 = d1 = tl_half(row + 32u * nb + 2u * b);
      m0 = m1 = 0.0;
    } else if (TL_FMT == 6u) {
      d0 = d1 = tl_half(row + 32u * nb);
      m0 = m1 = tl_half(row + 32u * nb + 2u);
    } else {
      const uint p = row + n + 16u * b;  // groups 2b and 2b + 1
      d0 = tl_f32(p);
      m0 = tl_f32(p + 4u);
      d1 = tl_f32(p + 8u);
      m1 = tl_f32(p + 12u);
    }
    const uvec4 lo = tl_w4(codes >> 4), hi = tl_w4((codes >> 4) + 1u);
    [[unroll]] for (uint c = 0; c < 8u; ++c) {
      const uint word = c < 4u ? lo[c] : hi[c - 4u];
      const vec4 q = TL_FMT == 6u ? tl_bytes4(word, 0.0) : tl_sbytes4(word);
      v[c] = c < 4u ? q * d0 + m0 : q * d1 + m1;
    }
    return;
  }
  // Nibble codes: 4 words; elements 0..15 the low nibbles, 16..31 the high ones.
  float d, m;
  if (TL_FMT == 2u) {
    d = tl_half(row + 16u * nb + 2u * b);
    m = -8.0 * d;
  } else if (TL_FMT == 3u || TL_FMT == 5u) {
    const uint p = row + 16u * nb + 4u * (TL_FMT == 3u ? b : b / 2u);
    d = tl_half(p);
    m = tl_half(p + 2u);
  } else {
    const uint p = row + 16u * nb + 8u * b;
    d = tl_f32(p);
    m = tl_f32(p + 4u);
  }
  const uvec4 codes = tl_w4((row >> 4) + b);
  [[unroll]] for (uint c = 0; c < 4u; ++c) {
    const uint word = codes[c];
    if (TL_FMT == 2u) {
      // d (q - 8), formed as the format defines it.
      v[c] = d * tl_lo4(word, 8.0);
      v[c + 4u] = d * tl_hi4(word, 8.0);
    } else {
      v[c] = d * tl_lo4(word, 0.0) + m;
      v[c + 4u] = d * tl_hi4(word, 0.0) + m;
    }
  }
}
