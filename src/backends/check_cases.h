// Random cases for the GPU backends' self-checks (each kernel against the host backend on first use): random
// activations, random weight rows of a GGUF type, the error measure the verdicts use, and the element-wise
// ops' cases every GPU backend runs alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "backends/kv_cache.h"
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

// The K and V elements of a one-layer cache at positions `pos` (every position when pos is empty), as
// floats, K's rows then V's: the host reference's (ref's layer 0) appended to want, the device's copy
// (dev: its K plane, then its V plane, each n_ctx x kv_dim elements of ref's type, unpadded) to have.
void cache_rows(const KvCache& ref, const uint8_t* dev, std::span<const int32_t> pos,
                std::vector<float>& want, std::vector<float>& have);

// The element-wise ops' cases: each runs on `dev` and on `host` (the reference) from the same random inputs,
// and `verdict` receives the op and its worst relative_error. rmsnorm, then add_rmsnorm (both its outputs,
// the new residual and the norm, against add then rmsnorm), over 3 rows of `norm_width`; RoPE over 3 tokens
// of 2 heads of 16, both modes; SiLU·mul and GELU·mul over 100 gates spanning both tails of the
// activations; add; and, with `add_rows`, a bias added to 5 rows of 20.
enum class ElementwiseOp { Rmsnorm, AddRmsnorm, Rope, GluSilu, GluGelu, Add, AddRows };
void check_elementwise(Backend& host, Backend& dev, int64_t norm_width, bool add_rows, std::mt19937& rng,
                       const std::function<void(ElementwiseOp, double)>& verdict);

}  // namespace tilellm
