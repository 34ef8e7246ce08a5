// Random cases for the GPU backends' self-checks (each kernel against the host backend on first use): random
// activations, random weight rows of a GGUF type, and the error measure the verdicts use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "backends/modes.h"
#include "backends/weight.h"
#include "format/ggml_types.h"

namespace tilellm {

// n floats uniform in [-1, 1], none zero (a zero would hide a missed write).
std::vector<float> random_floats(size_t n, std::mt19937& rng);
// n_out random rows of type t (F32, F16, Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K): random quantized fields with
// sane half scales.
std::vector<uint8_t> random_rows(GgmlType t, int64_t n_in, int64_t n_out, std::mt19937& rng);
// A weight of n_out rows of type t over `data` (random_rows' bytes), named "self-check <type>" for the
// messages.
Weight check_weight(GgmlType t, const uint8_t* data, int64_t n_in, int64_t n_out);
// A converted format's case (--weights int4b64 / int8b0): `rows` random float rows of n_in held as F32 (w,
// which the device converts at upload) and the conversion's exact values of them (exact: what the host
// multiplies by). The weights point into the vectors: the struct moves, it is not copied.
struct ConvertedRows {
  ConvertedRows(WeightsMode mode, int64_t n_in, int64_t rows, std::mt19937& rng);
  ConvertedRows(ConvertedRows&&) = default;
  ConvertedRows(const ConvertedRows&) = delete;
  ConvertedRows& operator=(const ConvertedRows&) = delete;
  std::vector<float> src, exact_values;  // [rows][n_in]
  Weight w, exact;
};
// max |ref - got| / max |ref|; infinity when the sizes differ or anything is NaN.
double relative_error(const std::vector<float>& ref, const std::vector<float>& got);

}  // namespace tilellm
