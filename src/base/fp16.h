// IEEE binary16 (half) and bfloat16 <-> binary32 conversions, bit-exact and portable.
//
// Every scale in the GGML block formats is a half, and F16/BF16 tensors store these formats directly, so
// these conversions define what "exact dequantization" means. They use integer operations only (no F16C or
// AVX512-BF16 instructions, no float arithmetic), so the result never depends on the CPU, the compiler's FP
// flags or the FTZ/DAZ bits of MXCSR: subnormals, infinities and NaN payloads come out the same everywhere.
// Vector kernels may use hardware conversions that agree exactly (F16C does, subnormals included).
//
// Formats (sign, exponent, mantissa bits):
//   half      1, 5 (bias 15),  10   max finite 65504, min normal 2^-14, min subnormal 2^-24
//   bfloat16  1, 8 (bias 127),  7   the upper 16 bits of a binary32
//   binary32  1, 8 (bias 127), 23
#pragma once

#include <bit>
#include <cstdint>

namespace tilellm {

// Half -> float. Every half is exactly representable as a float, so this is exact; NaN payloads are kept
// (shifted into the top mantissa bits) and stay NaN.
inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);  // normal: rebias the exponent
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: mant * 2^-24. Normalise by shifting the leading one up to the implicit bit (bit 10); a
    // leading one at bit p has value 2^(p-24), so the float exponent field is p - 24 + 127.
    const int lead = 31 - std::countl_zero(mant);  // 0..9
    mant = (mant << (10 - lead)) & 0x3ffu;
    bits = sign | (static_cast<uint32_t>(lead - 24 + 127) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

// Float -> half, rounding to nearest, ties to even (the IEEE default; numpy's astype(float16), F16C). Values
// that round past 65504 become inf; NaN stays NaN (quieted; sign and top payload bits kept).
inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // NaN, quieted
  const uint32_t exp = ax >> 23;                       // biased float exponent
  if (exp >= 127 + 16) return sign | 0x7c00u;          // |f| >= 65536 (or inf): beyond any rounding to 65504
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;  // with the implicit bit (unused when exp == 0)
  if (exp < 127 - 14) {
    // Result is a half subnormal (or rounds up to the smallest normal): count units of 2^-24. f = mant *
    // 2^(exp-150), so f / 2^-24 = mant >> (126 - exp). A shift above 24 means f < 2^-25, half the smallest
    // subnormal, which rounds to zero (float subnormals, exp == 0, too); 2^-25 itself ties to even, 0.
    const uint32_t shift = 126 - exp;  // >= 14
    if (shift > 24) return sign;
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // a carry into 0x400 is the smallest normal: correct
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias, keep 10 mantissa bits, round on the 13 dropped ones. A carry out of the mantissa bumps
  // the exponent, which is again the right encoding (65504 + half an ulp carries into 0x7c00 = inf).
  uint32_t r = ((exp - (127 - 15)) << 10) | ((ax >> 13) & 0x3ffu);
  const uint32_t dropped = ax & 0x1fffu;
  if (dropped > 0x1000u || (dropped == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

// Bfloat16 -> float: the bfloat16 bits are the upper half of the float. Exact.
inline float bf16_to_fp32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// Float -> bfloat16, round to nearest even on the 16 dropped bits (as ggml and the gguf package do); overflow
// becomes inf through the same carry; NaN stays NaN (quiet bit forced, so truncation cannot give inf).
inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace tilellm
