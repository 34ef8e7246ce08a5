// The project's own converted weight formats (--weights int4b64 / int8b0 / int4b0, MNN's Int4-Block64,
// Int8-Block0 and Int4-Block0): asymmetric quantization of a row of exact float values. Every backend that
// holds these formats converts through these functions (the CPU's tiles, the OpenCL device rows), so all hold
// the same codes, scales and offsets, and a backend's result can be checked against another's.
//
// A row of n_in values (n_in a multiple of 32) is cut into groups of asym_group_size values (Int4B64: 64,
// the last group 32 when n_in % 64 == 32; Int8B0 and Int4B0: all of n_in). Each group is quantized to codes
// 0..15 (4-bit) or 0..255 (8-bit) with scale = (max - min) / max_code and offset = min, both rounded to fp16
// first and the codes rounded against the rounded pair, so a weight is exactly
//   w = fp16_to_fp32(scale) * code + fp16_to_fp32(offset).
#pragma once

#include <cstdint>

namespace tilellm {

enum class AsymFormat { Int4B64, Int8B0, Int4B0 };

int64_t asym_group_size(AsymFormat f, int64_t n_in);
int64_t asym_groups(AsymFormat f, int64_t n_in);
int asym_max_code(AsymFormat f);  // 15 or 255
// codes: [n_in], one code per byte; scales, offsets: [asym_groups(f, n_in)] fp16 bits.
void quantize_row_asym(AsymFormat f, const float* row, int64_t n_in, uint8_t* codes, uint16_t* scales,
                       uint16_t* offsets);
// The converted row's weights as floats (the formula above): the exact values every kernel multiplies by.
void dequantize_row_asym(AsymFormat f, const float* row, int64_t n_in, float* out);

}  // namespace tilellm
