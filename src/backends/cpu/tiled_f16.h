// F16 weight matrices repacked into 16-row tiles for prefill (the float counterpart of tiled_weight.h).
//
// Layout: n_tiles = ceil(n_out / 16); tile i is [n_in][16] halves: for each input k, the weights of rows
// 16i .. 16i+15 side by side (32 bytes, one 512-bit vector once converted); rows past n_out are zero. Tiles
// are contiguous and 128-byte aligned. The repack copies the halves: lossless.
//
// Arithmetic (llama.cpp's for F16 weights): each activation is rounded to a half, then products and sums run
// in float: y[t][r] = sum_k float(w[r][k]) * float(half(x[t][k])). Only the order of the float additions
// differs from the row kernels.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/weights.h"
#include "runtime/aligned.h"
#include "runtime/thread_pool.h"

namespace tilellm {

struct TiledF16 {
  int64_t n_in = 0, n_out = 0, n_tiles = 0;
  size_t tile_bytes = 0;  // n_in * 32, rounded up to 128
  AlignedBuffer data;     // [n_tiles][tile_bytes]
  const uint16_t* tile(int64_t i) const {
    return reinterpret_cast<const uint16_t*>(data.as<uint8_t>() + size_t(i) * tile_bytes);
  }
};

// w must be F16. The copy is split over pool when given.
TiledF16 tile_f16(const Weight& w, ThreadPool* pool);

// Rounds n_tok rows of n floats to halves and back (the activations the F16 kernels read), rows [t0, t1).
void round_to_f16(const float* x, float* xr, int64_t n, int64_t t0, int64_t t1);

// y[t * y_stride + r] = row r times xr[t] (xr: [n_tok][n_in] from round_to_f16), tiles [tile0, tile1), tokens
// [0, n_tok).
void tiled_f16_matmul(const TiledF16& w, const float* xr, int64_t n_tok, int64_t tile0, int64_t tile1,
                      float* y, int64_t y_stride);

// "avx512" or "scalar"; whether a vector kernel exists (the backend tiles F16 only then).
const char* tiled_f16_isa_name();
// Tests only: "scalar", "avx512" or "best"; false, changing nothing, when unavailable.
bool select_tiled_f16_isa_for_testing(std::string_view isa);

}  // namespace tilellm
