#include "format/asym_quant.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "base/fp16.h"

namespace tilellm {
namespace {

// Asymmetric quantization of n float values to codes 0..max_code: scale = (hi - lo) / max_code and offset
// = lo, both rounded to fp16 first; the codes are then rounded against the rounded pair, so that
// scale * code + offset is exactly what the kernels compute with.
void quantize_group(const float* v, int64_t n, int max_code, uint8_t* codes, uint16_t* scale,
                    uint16_t* offset) {
  float lo = v[0], hi = v[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, v[i]);
    hi = std::max(hi, v[i]);
  }
  *offset = fp32_to_fp16(lo);
  *scale = fp32_to_fp16((hi - lo) / float(max_code));
  const float o = fp16_to_fp32(*offset), d = fp16_to_fp32(*scale);
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float c = std::nearbyint((v[i] - o) * inv);
    codes[i] = static_cast<uint8_t>(std::clamp(c, 0.0f, float(max_code)));
  }
}

}  // namespace

int64_t asym_group_size(AsymFormat f, int64_t n_in) {
  return f == AsymFormat::Int4B64 ? 64 : n_in;
}

int64_t asym_groups(AsymFormat f, int64_t n_in) {
  const int64_t g = asym_group_size(f, n_in);
  return (n_in + g - 1) / g;
}

int asym_max_code(AsymFormat f) {
  return f == AsymFormat::Int8B0 ? 255 : 15;
}

void quantize_row_asym(AsymFormat f, const float* row, int64_t n_in, uint8_t* codes, uint16_t* scales,
                       uint16_t* offsets) {
  if (n_in <= 0 || n_in % 32 != 0) fail("internal: converted row of {} values", n_in);
  const int64_t gk = asym_group_size(f, n_in);
  for (int64_t g = 0; g * gk < n_in; ++g) {
    const int64_t k0 = g * gk;
    quantize_group(row + k0, std::min(gk, n_in - k0), asym_max_code(f), codes + k0, &scales[g], &offsets[g]);
  }
}

void dequantize_row_asym(AsymFormat f, const float* row, int64_t n_in, float* out) {
  const int64_t gk = asym_group_size(f, n_in), ng = asym_groups(f, n_in);
  std::vector<uint8_t> codes(static_cast<size_t>(n_in));
  std::vector<uint16_t> sc(static_cast<size_t>(ng)), off(static_cast<size_t>(ng));
  quantize_row_asym(f, row, n_in, codes.data(), sc.data(), off.data());
  for (int64_t k = 0; k < n_in; ++k) {
    const size_t g = size_t(k / gk);
    out[k] = fp16_to_fp32(sc[g]) * float(codes[size_t(k)]) + fp16_to_fp32(off[g]);
  }
}

}  // namespace tilellm
