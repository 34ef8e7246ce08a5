// Random cases for the GPU backends' self-checks (each kernel against the host backend on first use): random
// activations, random weight rows of a GGUF type, and the error measure the verdicts use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "format/ggml_types.h"

namespace tilellm {

// n floats uniform in [-1, 1], none zero (a zero would hide a missed write).
std::vector<float> random_floats(size_t n, std::mt19937& rng);
// n_out random rows of type t (F32, F16, Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K): random quantized fields with
// sane half scales.
std::vector<uint8_t> random_rows(GgmlType t, int64_t n_in, int64_t n_out, std::mt19937& rng);
// max |ref - got| / max |ref|; infinity when the sizes differ or anything is NaN.
double relative_error(const std::vector<float>& ref, const std::vector<float>& got);

}  // namespace tilellm
