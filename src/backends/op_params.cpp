#include "backends/op_params.h"

#include <cmath>

namespace tilellm {

RopeTable::RopeTable(int64_t n_pos_, int64_t rope_dim, float base, float freq_scale, const float* factors,
                     float attn_factor)
    : n_pos(n_pos_), n_half(rope_dim / 2), cos_sin(size_t(n_pos_ * (rope_dim / 2) * 2)) {
  for (int64_t p = 0; p < n_pos; ++p) {
    for (int64_t i = 0; i < n_half; ++i) {
      const double theta = double(p) * double(freq_scale) *
                           std::pow(double(base), -2.0 * double(i) / double(rope_dim)) /
                           (factors ? double(factors[i]) : 1.0);
      cos_sin[size_t((p * n_half + i) * 2)] = float(double(attn_factor) * std::cos(theta));
      cos_sin[size_t((p * n_half + i) * 2 + 1)] = float(double(attn_factor) * std::sin(theta));
    }
  }
}

bool RopeTableStamp::matches(const RopeTable& t) const {
  return table == &t && data == t.cos_sin.data() && n_pos == t.n_pos && n_half == t.n_half &&
         !t.cos_sin.empty() && first == t.cos_sin.front() && last == t.cos_sin.back();
}

void RopeTableStamp::take(const RopeTable& t) {
  table = &t;
  data = t.cos_sin.data();
  n_pos = t.n_pos;
  n_half = t.n_half;
  first = t.cos_sin.empty() ? 0.0f : t.cos_sin.front();
  last = t.cos_sin.empty() ? 0.0f : t.cos_sin.back();
}

}  // namespace tilellm
