// GGML block formats on the CPU: exact dequantization of a row and fused row-times-vector dot products.
//
// Contract:
//  - dequantize_row() produces, bit for bit, the floats that the GGUF format defines for a row: the values of
//    ggml's dequantize_row_* and of the Python gguf package's gguf.quants.dequantize.
//  - dot_row() and dot_row_multi() compute sum_i w_i * x_i with w_i those exact weights, accumulated in
//    float in several independent partial sums (the rounding error grows like n/8 ulps of sum |w_i x_i|).
//    They decode one block at a time into registers (dot_row) or a small stack buffer (dot_row_multi);
//    they never materialise a whole dequantized row.
//  - All functions are thread-safe and allocation-free. Unsupported types, or a length that is not a
//    multiple of the block size, throw tilellm::Error.
//  - The kernels use AVX2+FMA+F16C, picked at run time, when the CPU has them, and Advanced SIMD on AArch64;
//    a portable scalar path is always compiled and is the reference the vector paths are tested against.
//
// Rows are read byte-wise (no alignment requirement on src/row). The block structs below document the
// layouts and give their offsets; multi-byte fields are little-endian and every d/dmin/m is an IEEE half.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/ggml_types.h"

namespace tilellm {

// ---- Block layouts (packed, no padding; sizes equal ggml's type_size) ----
// Notation: q = the stored unsigned integer of an element, d/m/dmin = the halves converted to float.

// Q4_0, 32 elements: w = d * (q - 8), q in 0..15. Element j (0..15) is the low nibble of qs[j], element
// j + 16 its high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
// Q4_1, 32 elements: w = d * q + m. Nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
// Q5_0, 32 elements: w = d * (q - 16), q in 0..31. Low four bits as Q4_0; bit 4 of element j is bit j of the
// little-endian uint32 qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
// Q5_1, 32 elements: w = d * q + m, bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// Q8_0, 32 elements: w = d * qs[j], qs signed.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};

// K-quant super-blocks hold 256 elements.
inline constexpr int64_t kQK_K = 256;

// Q4_K: 8 sub-blocks of 32, each with a 6-bit scale sc[s] and a 6-bit min mn[s]:
//   w = (d * sc[s]) * q - (dmin * mn[s]),  q in 0..15.
// scales[12] packs the 16 six-bit numbers:
//   s < 4:   sc[s] = scales[s] & 63                            mn[s] = scales[s + 4] & 63
//   s >= 4:  sc[s] = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4
//            mn[s] = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4
// qs: 4 groups of 32 bytes; group g holds sub-block 2g in the low nibbles and sub-block 2g + 1 in the high.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// Q5_K: Q4_K plus a fifth bit: element 32*s + l (sub-block s, l < 32) has bit 4 = bit s of qh[l].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// Q6_K: 16 sub-blocks of 16 with signed 8-bit scales: w = (d * scales[s]) * (q - 32), q in 0..63.
// Two halves of 128 elements; half h uses ql[64h .. 64h+63], qh[32h .. 32h+31], scales[8h .. 8h+7]. Within a
// half, for l < 32 (H = qh[32h + l], L0 = ql[64h + l], L1 = ql[64h + 32 + l]):
//   element l      = (L0 & 15) | (H & 3) << 4            element l + 64 = (L0 >> 4) | (H >> 4 & 3) << 4
//   element l + 32 = (L1 & 15) | (H >> 2 & 3) << 4       element l + 96 = (L1 >> 4) | (H >> 6) << 4
// and element e of the half uses scales[8h + e / 16].
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// ---- Row operations ----

// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
bool is_supported(GgmlType t);

// Converts one row of n elements of type t (row_size(t, n) bytes at src) to float, exactly as the GGUF format
// defines the type. n must be a multiple of the block size.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// sum_i w_i * x_i over one row of n elements of type t, w_i the exact dequantized weight, accumulated in
// float.
float dot_row(GgmlType t, const void* row, const float* x, int64_t n);

// The same row against n_vec vectors: y[j * y_stride] = dot(row, x + j * x_stride) for j < n_vec. Each block
// is decoded once per call and applied to every vector (prefill). y must not overlap x or the row.
void dot_row_multi(GgmlType t, const void* row, int64_t n, const float* x, int64_t x_stride, int n_vec,
                   float* y, int64_t y_stride);

// The weights of a row of Q5_0, Q5_1, Q4_K, Q5_K or Q6_K as one signed byte code per element and one
// (scale, offset) pair per 16 elements: scale[i / 16] * code[i] + offset[i / 16], in float, equals
// dequantize_row's element i bit for bit (the product is exact in float, as every product of these formats
// is, and the add is the format's one rounding; Q4_K/Q5_K's offset is -(dmin * mn), Q6_K's and Q5_0's -0).
// For readers that hold these formats as bytes (the OpenCL backend). n: a multiple of the block size;
// codes: [n]; scale, offset: [n / 16]. Other types throw tilellm::Error.
bool has_code_groups(GgmlType t);
void row_code_groups(GgmlType t, const void* src, int64_t n, int8_t* codes, float* scale, float* offset);

// The instruction set the kernels use now: "avx2" (AVX2+FMA+F16C; on every x86 ISA level from avx2 up),
// "neon" (ARMv8-A Advanced SIMD) or "scalar": the running ISA's (base/cpu_isa.h, select_cpu_isa).
const char* quant_isa_name();

}  // namespace tilellm
