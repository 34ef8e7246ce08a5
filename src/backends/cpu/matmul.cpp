// y[t] = W x[t] for quantized or float weights; matmul_shared runs several weights that read the same input
// (q/k/v, gate/up) as one: the input is quantized once and one parallel region covers all their rows, so a
// decode step pays one thread synchronisation where it would pay three.
// Output rows are split across threads. For several tokens, each thread walks its rows in groups small enough
// to stay in cache while a tile of tokens is applied to them, so each weight block is decoded once per tile.
// In the quantized-activation mode the activation rows are first quantized (in parallel over tokens) to the
// format the weight type pairs with and the dot products run on those; in the F32 mode the weights are
// dequantized exactly and meet float32 activations.
#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/tiled_f32_gemm.h"
#include "base/error.h"
#include "format/quants.h"
#include "format/quants_q8.h"

namespace tilellm {
namespace {

constexpr int64_t kTokTile = 16;
// Up to 16 weights share an input: q/k/v, gate/up, or the gate and up products of 8 experts a token chose.
constexpr int kMaxShared = 16;

// The units (rows or tiles) of n <= kMaxShared weights laid end to end and split over the pool as one range,
// so that weights sharing an input share one parallel region: weight i owns [start[i], start[i + 1]) and
// f(i, lo, hi) receives its units [lo, hi). grain(total) gives the smallest chunk.
template <class Count, class Grain, class F>
void split_end_to_end(ThreadPool& pool, int n, Count count, Grain grain, F&& f) {
  int64_t start[kMaxShared + 1] = {0};
  for (int i = 0; i < n; ++i) start[i + 1] = start[i] + count(i);
  pool.parallel_for(start[n], grain(start[n]), [&](int64_t b, int64_t e, int) {
    for (int i = 0; i < n; ++i) {
      const int64_t lo = std::max(b, start[i]), hi = std::min(e, start[i + 1]);
      if (lo < hi) f(i, lo - start[i], hi - start[i]);
    }
  });
}

// Tiles per chunk: for decode a few tiles, so both threads finish together; for prefill one tile (each is
// already n_tok times the work).
int64_t tile_grain(int64_t n_tok, int64_t total, int n_threads) {
  return n_tok == 1 ? std::max<int64_t>(1, total / (8 * int64_t(n_threads))) : 1;
}

}  // namespace

CpuBackend::CpuBackend(ThreadPool& pool, ActivationMode mode, int64_t max_act_elems, WeightsMode weights)
    : pool_(pool),
      mode_(mode),
      weights_(weights),
      max_act_elems_(max_act_elems),
      // No activation format takes more than 4 bytes per element (Q8_K: 292 bytes per 256).
      act_q_(mode == ActivationMode::Quantized ? size_t(max_act_elems) * 4 : 0) {}

void CpuBackend::matmul(const Weight& w, const float* x, int64_t n_tok, float* y) {
  const Weight* ws[1] = {&w};
  float* ys[1] = {y};
  matmul_shared(ws, ys, 1, x, n_tok);
}

void CpuBackend::rounded_matmul_input(const Weight& w, const float* x, int64_t n_tok, float* out) const {
  const int64_t n = w.n_in;
  if (mode_ != ActivationMode::Quantized) {
    std::copy(x, x + n_tok * n, out);
    return;
  }
  // The format each path quantizes to (matmul_tiled, matmul_float_tiled, the row kernels).
  const Prepared* p = prepared(w);
  const GgmlType at = p && p->tiled         ? p->tiles.activation_type()
                      : p && p->float_tiled ? p->float_tiles.type
                                            : activation_type(p ? p->rows.type : w.type);
  std::vector<uint8_t> q(activation_row_size(at, n));
  for (int64_t t = 0; t < n_tok; ++t) {
    quantize_activations(at, x + t * n, q.data(), n);
    dequantize_activations(at, q.data(), out + t * n, n);
  }
}

void CpuBackend::matmul_shared(const Weight* const* ws_in, float* const* ys, int n, const float* x,
                               int64_t n_tok) {
  if (n <= 0) return;
  // Weights prepared at load (prepare_weights.cpp): tiles go to the tile kernels, converted rows replace the
  // GGUF rows. A call mixing tiled and row weights runs them one by one.
  const Weight* ws_rows[kMaxShared];
  const Weight* const* ws = ws_in;
  if (!prepared_.empty() && n <= kMaxShared) {
    const Prepared* ps[kMaxShared];
    int n_tiled = 0, n_float = 0;
    for (int i = 0; i < n; ++i) {
      ps[i] = prepared(*ws_in[i]);
      n_tiled += ps[i] && ps[i]->tiled;
      n_float += ps[i] && ps[i]->float_tiled;
      ws_rows[i] = ps[i] && !ps[i]->tiled && !ps[i]->float_tiled ? &ps[i]->rows : ws_in[i];
    }
    bool same = n_tiled == n;
    for (int i = 1; i < n && same; ++i) {
      same = ps[i]->tiles.n_in == ps[0]->tiles.n_in &&
             ps[i]->tiles.activation_type() == ps[0]->tiles.activation_type() &&
             ps[i]->tiles.act_fold() == ps[0]->tiles.act_fold();
    }
    if (same) return matmul_tiled(ps, ys, n, x, n_tok);
    bool same_float = n_float == n;
    for (int i = 1; i < n && same_float; ++i) {
      same_float = ps[i]->float_tiles.n_in == ps[0]->float_tiles.n_in &&
                   ps[i]->float_tiles.type == ps[0]->float_tiles.type;
    }
    if (same_float) return matmul_float_tiled(ps, ys, n, x, n_tok);
    if (n_tiled + n_float > 0) {
      for (int i = 0; i < n; ++i) matmul_shared(&ws_in[i], &ys[i], 1, x, n_tok);
      return;
    }
    ws = ws_rows;
  } else if (!prepared_.empty()) {
    for (int i = 0; i < n; ++i) matmul_shared(&ws_in[i], &ys[i], 1, x, n_tok);
    return;
  }
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

  split_end_to_end(
      pool_, n, [&](int i) { return ws[i]->n_out; }, [&](int64_t) { return n_tok == 1 ? 16 : 8; },
      [&](int i, int64_t lo, int64_t hi) { rows(*ws[i], ys[i], lo, hi); });
}

void CpuBackend::matmul_tiled(const Prepared* const* ps, float* const* ys, int n, const float* x,
                              int64_t n_tok) {
  const TiledWeight& w0 = ps[0]->tiles;
  const int64_t n_in = w0.n_in;
  const GgmlType at = w0.activation_type();
  const int64_t fold = w0.act_fold();
  if (n_tok * n_in > max_act_elems_ || tiled_acts_bytes(n_in, n_tok) > act_t_.size()) {
    fail("internal: matmul of {}x{} activations exceeds the scratch of {}", n_tok, n_in, max_act_elems_);
  }
  // Quantize each token's row, then lay it out for the tile kernels; a lone token is done here rather than
  // paying a pool wake-up for it.
  const size_t rs = activation_row_size(at, n_in);
  uint8_t* q = act_q_.as<uint8_t>();
  auto prep = [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) quantize_activations(at, x + t * n_in, q + size_t(t) * rs, n_in);
    prepare_tiled_acts(at, fold, n_in, q, rs, n_tok, b, e, act_t_.as<void>());
  };
  if (n_tok <= 2) {
    prep(0, n_tok, 0);
  } else {
    pool_.parallel_for(n_tok, 1, prep);
  }
  const TiledActs acts = prepare_tiled_acts(at, fold, n_in, q, rs, n_tok, 0, 0, act_t_.as<void>());

  split_end_to_end(
      pool_, n, [&](int i) { return ps[i]->tiles.n_tiles; },
      [&](int64_t total) { return tile_grain(n_tok, total, pool_.active()); },
      [&](int i, int64_t lo, int64_t hi) {
        const TiledWeight& w = ps[i]->tiles;
        masked_tiles(*ps[i], lo, hi, n_tok, ys[i], w.n_out, [&](int64_t t0, int64_t t1) {
          tiled_matmul(w, acts, t0, t1, 0, n_tok, ys[i], w.n_out);
        });
      });
}

void CpuBackend::matmul_float_tiled(const Prepared* const* ps, float* const* ys, int n, const float* x,
                                    int64_t n_tok) {
  const TiledFloat& w0 = ps[0]->float_tiles;
  const int64_t n_in = w0.n_in;
  if (n_tok * n_in > max_act_elems_) {
    fail("internal: matmul of {}x{} activations exceeds the scratch of {}", n_tok, n_in, max_act_elems_);
  }
  if (w0.type == GgmlType::F32 && f32gemm::available()) {
    // Whole matrices on the blocked GEMM, each split over the pool by the GEMM itself.
    for (int i = 0; i < n; ++i) {
      const TiledFloat& w = ps[i]->float_tiles;
      if (f32gemm::scratch_floats(w, n_tok) * sizeof(float) > f32_scratch_.size())
        fail("internal: an F32 matmul of {} tokens exceeds the GEMM scratch", n_tok);
      f32gemm::gemm(w, x, n_tok, ys[i], &pool_, f32_scratch_.as<float>());
    }
    return;
  }
  // The activations rounded to the weights' type (llama.cpp's pairing), in the format of tiled_float.h, in
  // act_q_ (4 bytes per element: enough for both formats); F32 tiles read x as it is.
  const void* acts = x;
  if (w0.type != GgmlType::F32) {
    void* rounded = act_q_.as<void>();
    if (n_tok <= 2) {
      prepare_float_acts(w0.type, x, n_in, 0, n_tok, rounded);
    } else {
      pool_.parallel_for(
          n_tok, 1, [&](int64_t b, int64_t e, int) { prepare_float_acts(w0.type, x, n_in, b, e, rounded); });
    }
    acts = rounded;
  }
  split_end_to_end(
      pool_, n, [&](int i) { return ps[i]->float_tiles.n_tiles; },
      [&](int64_t total) { return tile_grain(n_tok, total, pool_.active()); },
      [&](int i, int64_t lo, int64_t hi) {
        const TiledFloat& w = ps[i]->float_tiles;
        masked_tiles(*ps[i], lo, hi, n_tok, ys[i], w.n_out, [&](int64_t t0, int64_t t1) {
          tiled_float_matmul(w, acts, n_tok, t0, t1, ys[i], w.n_out);
        });
      });
}

}  // namespace tilellm
