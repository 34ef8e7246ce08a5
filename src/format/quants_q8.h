// Quantized activations and integer dot products: the matmul arithmetic of llama.cpp's CPU backend.
//
// llama.cpp does not multiply a quantized weight row with float activations. Once per matmul it converts each
// activation row to the weight type's "vec_dot type" (an 8-bit block format for the quantized weights, the
// weight's own float format for F16/BF16), then takes per-block integer dot products and scales them in
// float. The activation rounding moves logits by up to ~0.5, far more than any accumulation order, so an
// engine whose greedy outputs must equal llama.cpp's has to round the activations exactly the same way.
//
// Contract:
//  - quantize_activations() is bit-exact to ggml on x86-64 (the quantizer that llama.cpp's matmul runs
//  there):
//      Q8_0, Q8_1 (blocks of 32): amax = max |x|, d = amax / 127 (float division), id = 127 / amax (0 when
//        amax is 0), q = x * id rounded to nearest, ties to even; d is stored as a half. Q8_1 adds
//        s = half(d * sum(q)) with the float d. ggml's portable reference (quantize_row_q8_0_ref) differs in
//        two details (id = 1 / d, ties away from zero), but every x86 build of llama.cpp with AVX or later,
//        including its repacked Q4_0 path, uses the rule above.
//      Q8_K (blocks of 256): max = the first x with the largest |x| (sign kept), iscale = -127 / max,
//        q = min(127, round_half_even(iscale * x)), d = 1 / iscale stored as a float (an all-zero block has
//        d = 0 and q = 0), bsums = the sums of q over each run of 16.
//      F16 / BF16: round to nearest even; F32: a copy.
//    Rounding assumes the default floating-point environment (round to nearest) and finite inputs.
//  - dot_row_q() computes what ggml's vec_dot computes: exact integer sums per block (or per K-quant
//    super-block), scaled by the product of the weight's and the activation's block scales in float, with the
//    Q4_1/Q5_1 offset applied through the activation's stored s and the K-quant mins through bsums. Only the
//    float scaling and the accumulation round (accumulation order differs from ggml by design; the error
//    bound is derived in tests/format/test_quants_q8.cpp).
//  - All functions are thread-safe and allocation-free. Unsupported types or lengths throw tilellm::Error
//    naming the type. Rows and activations are read byte-wise: no alignment requirement.
//  - The kernels use AVX2+FMA+F16C when the CPU has them, with AVX-VNNI or AVX-512 (VL, BW, VNNI; 256-bit
//    vectors) where present, picked at run time; on AArch64 they use Advanced SIMD, with the ARMv8.2 dot
//    product where present. A portable scalar path is always compiled and is the reference the vector paths
//    are tested against.
//
// Typical use, one matmul y = W x (W: n_out rows of n elements of type wt):
//   const GgmlType at = activation_type(wt);
//   std::vector<uint8_t> xq(activation_row_size(at, n));   // allocate once, outside the decode loop
//   quantize_activations(at, x, xq.data(), n);
//   for (int64_t r = 0; r < n_out; ++r) y[r] = dot_row_q(wt, w + r * row_size(wt, n), xq.data(), n);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "format/ggml_types.h"
#include "format/quants.h"

namespace tilellm {

// ---- Activation block layouts (packed, little-endian; sizes equal ggml's type_size) ----
// Q8_0, 32 elements: BlockQ8_0 in quants.h ({half d; int8 qs[32]}, 34 bytes), value = d * qs[j]. The weight
// format and the activation format are the same bytes, so the one definition serves both.

// Q8_1, 32 elements: value = d * qs[j]; s = half(d * sum_j qs[j]), precomputed so that a weight offset m
// (Q4_1, Q5_1) contributes m * s to a block's dot product without touching the quants.
struct BlockQ8_1 {
  uint16_t d;  // half
  uint16_t s;  // half
  int8_t qs[32];
};

// Q8_K, 256 elements: value = d * qs[j] with a float d; bsums[k] = sum of qs[16k .. 16k+15], which turns the
// K-quant mins (Q4_K, Q5_K) and the Q6_K offset 32 into one multiply per 16 elements.
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36 && sizeof(BlockQ8_K) == 292);

// ---- API ----

// The activation format llama.cpp pairs with a weight type: Q4_0, Q5_0, Q8_0 -> Q8_0; Q4_1, Q5_1 -> Q8_1;
// Q4_K, Q5_K, Q6_K -> Q8_K; F16 -> F16; BF16 -> BF16; F32 -> F32. Other types throw.
GgmlType activation_type(GgmlType weight_type);

// Bytes of one quantized activation row of n elements (n a multiple of the weight's block size).
// act_type is one of Q8_0, Q8_1, Q8_K, F16, BF16, F32.
size_t activation_row_size(GgmlType act_type, int64_t n);

// Quantizes one row of n floats the way ggml does (rules in the contract above). out receives
// activation_row_size(act_type, n) bytes.
void quantize_activations(GgmlType act_type, const float* x, void* out, int64_t n);

// The values a quantized activation row stands for (Q8_0 / Q8_1: d * q per block, Q8_K: d * q with its
// float d, F16 / BF16: the rounded values, F32: a copy): what the integer kernels multiply by, for
// references. xq: activation_row_size(act_type, n) bytes.
void dequantize_activations(GgmlType act_type, const void* xq, float* out, int64_t n);

// Dot product of one weight row (type weight_type, n elements) with an activation row quantized to
// activation_type(weight_type): integer block sums, scaled per block as ggml does, accumulated in float.
float dot_row_q(GgmlType weight_type, const void* row, const void* xq, int64_t n);

// Consecutive rows against one activation row: y[i] = dot_row_q(rows + i * row_bytes, xq) for i < n_rows.
// The decode matmul's inner call: checks and dispatch happen once, not per row.
void dot_rows_q(GgmlType weight_type, const void* rows, size_t row_bytes, int64_t n_rows, int64_t n,
                const void* xq, float* y);
// Several activation rows at once: y[j * y_stride] = dot_row_q(row, xq + j * xq_stride bytes) for j < n_vec.
// Each weight block is decoded once and applied to every vector (prefill). y must not overlap the inputs.
void dot_row_q_multi(GgmlType weight_type, const void* row, int64_t n, const void* xq, size_t xq_stride,
                     int n_vec, float* y, int64_t y_stride);

// The instruction set these kernels use now: "avx512vnni", "avxvnni" (AVX2+FMA+F16C+AVX-VNNI), "avx2"
// (AVX2+FMA+F16C), "neondot" (Advanced SIMD + ARMv8.2 dot product), "neon" (ARMv8-A Advanced SIMD) or
// "scalar": the running ISA's (base/cpu_isa.h, select_cpu_isa).
const char* quant_q8_isa_name();

}  // namespace tilellm
