// y[t] = W x[t] for quantized or float weights; matmul_shared runs several weights that read the same input
// (q/k/v, gate/up) as one: the input is quantized once and one parallel region covers all their rows, so a
// decode step pays one thread synchronisation where it would pay three.
// Output rows are split across threads. For several tokens, each thread walks its rows in groups small enough
// to stay in cache while a tile of tokens is applied to them, so each weight block is decoded once per tile.
// In the quantized-activation mode the activation rows are first quantized (in parallel over tokens) to the
// format the weight type pairs with and the dot products run on those; in the F32 mode the weights are
// dequantized exactly and meet float32 activations.
#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "format/error.h"
#include "format/quants.h"
#include "format/quants_q8.h"

namespace tilellm {
namespace {

constexpr int64_t kTokTile = 16;
constexpr int kMaxShared = 4;

}  // namespace

CpuBackend::CpuBackend(ThreadPool& pool, ActivationMode mode, int64_t max_act_elems)
    : pool_(pool),
      mode_(mode),
      max_act_elems_(max_act_elems),
      // No activation format takes more than 4 bytes per element (Q8_K: 292 bytes per 256).
      act_q_(mode == ActivationMode::Quantized ? size_t(max_act_elems) * 4 : 0) {}

void CpuBackend::matmul(const Weight& w, const float* x, int64_t n_tok, float* y) {
  const Weight* ws[1] = {&w};
  float* ys[1] = {y};
  matmul_shared(ws, ys, 1, x, n_tok);
}

void CpuBackend::matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                               int64_t n_tok) {
  if (n <= 0) return;
  const int64_t n_in = ws[0]->n_in;
  const GgmlType at = activation_type(ws[0]->type);
  bool same = n <= kMaxShared;
  for (int i = 1; i < n && same; ++i) same = ws[i]->n_in == n_in && activation_type(ws[i]->type) == at;
  if (!same) {  // inputs that cannot share one quantized copy run one by one
    for (int i = 0; i < n; ++i) matmul_shared(&ws[i], &ys[i], 1, x, n_tok);
    return;
  }
  const bool quantized = mode_ == ActivationMode::Quantized && at != GgmlType::F32;
  const uint8_t* xq = nullptr;
  size_t rs = 0;
  if (quantized) {
    if (n_tok * n_in > max_act_elems_) {
      fail("internal: matmul of {}x{} activations exceeds the scratch of {}", n_tok, n_in, max_act_elems_);
    }
    rs = activation_row_size(at, n_in);
    uint8_t* q = act_q_.as<uint8_t>();
    pool_.parallel_for(n_tok, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) quantize_activations(at, x + t * n_in, q + size_t(t) * rs, n_in);
    });
    xq = q;
  }

  // Rows [r0, r1) of weight w into y ([n_tok][w.n_out]).
  auto rows = [&](const Weight& w, float* y, int64_t r0, int64_t r1) {
    const int64_t n_out = w.n_out;
    if (n_tok == 1) {
      if (quantized) {
        dot_rows_q(w.type, w.row(r0), w.row_bytes, r1 - r0, n_in, xq, y + r0);
      } else {
        for (int64_t r = r0; r < r1; ++r) y[r] = dot_row(w.type, w.row(r), x, n_in);
      }
      return;
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTokTile) {
      const int n_vec = int(std::min(kTokTile, n_tok - t0));
      for (int64_t r = r0; r < r1; ++r) {
        if (quantized) {
          dot_row_q_multi(w.type, w.row(r), n_in, xq + size_t(t0) * rs, rs, n_vec, y + t0 * n_out + r, n_out);
        } else {
          dot_row_multi(w.type, w.row(r), n_in, x + t0 * n_in, n_in, n_vec, y + t0 * n_out + r, n_out);
        }
      }
    }
  };

  // The weights' rows laid end to end: weight i owns [start[i], start[i + 1]).
  int64_t start[kMaxShared + 1] = {0};
  for (int i = 0; i < n; ++i) start[i + 1] = start[i] + ws[i]->n_out;
  pool_.parallel_for(start[n], n_tok == 1 ? 16 : 8, [&](int64_t b, int64_t e, int) {
    for (int i = 0; i < n; ++i) {
      const int64_t lo = std::max(b, start[i]), hi = std::min(e, start[i + 1]);
      if (lo < hi) rows(*ws[i], ys[i], lo - start[i], hi - start[i]);
    }
  });
}

}  // namespace tilellm
