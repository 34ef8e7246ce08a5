// Float weight matrices repacked into 16-row tiles (the float counterpart of tiled_weight.h), and the matmul
// kernels that read them: F16 and BF16 (a GGUF matrix of that type, or --weights f16), and F32 (--weights
// f32, any matrix converted to its exact float values).
//
// Layout: n_tiles = ceil(n_out / 16); tiles are contiguous, each padded to 128 bytes; rows past n_out are
// zero. The repack of a matrix of the tile's own type copies the values: lossless.
//   F16:  tile i is [n_in][16] halves: for each input k, the weights of rows 16i .. 16i+15 side by side
//         (32 bytes; one 512-bit vector, or two 256-bit ones, once converted).
//   F32:  tile i is [n_in][16] floats, the same order (64 bytes per k). On AVX-512 whole F32 matrices run
//         on the blocked GEMM (tiled_f32_gemm.h), which reads these tiles as they are and may keep
//         Strassen-Winograd operands formed from them beside them (strassen below).
//   BF16: tile i is [n_pairs][16][2] bfloat16 (n_pairs = ceil(n_in / 2), an odd n_in padded with zeros): for
//         each pair of inputs (2p, 2p+1), row r's two weights side by side, the 16 rows in a row (64 bytes).
//         This is the operand order of AVX-512 BF16's vdpbf16ps (lane r += w[r][2p]*x[2p] + w[r][2p+1]*
//         x[2p+1]); elsewhere a 32-bit lane splits into its two floats with one shift and one mask.
//
// Arithmetic (llama.cpp's for these weights): each activation is rounded to the weight's type (half, or
// bfloat16 round-to-nearest-even), then products and sums run in float:
//   y[t][r] = sum_k float(w[r][k]) * float(round(x[t][k]))
// (F32: no rounding.) Only the order of the float additions differs from the row kernels (and vdpbf16ps
// flushes denormal inputs and outputs to zero; bfloat16 activations below 2^-126 do not occur in a model's
// layers).
//
// Activations as the kernels read them (prepare_float_acts), [n_tok][...] contiguous per token:
//   F16:  float [n_tok][n_in], each value rounded to a half;
//   F32:  float [n_tok][n_in], the activations themselves (the caller may pass x as it is);
//   BF16: uint32 [n_tok][n_pairs], word p = bf16(x[2p]) | bf16(x[2p+1]) << 16 (0 past n_in): the pair one
//         vdpbf16ps multiplies, broadcast whole.
#pragma once

#include <cstdint>
#include <string_view>

#include "backends/weight.h"
#include "base/aligned.h"
#include "base/thread_pool.h"

namespace tilellm {

struct TiledFloat {
  GgmlType type = GgmlType::F16;  // F16, BF16 or F32
  int64_t n_in = 0, n_out = 0, n_tiles = 0;
  size_t tile_bytes = 0;  // F16: n_in * 32, BF16: n_pairs * 64, F32: n_in * 64, rounded up to 128
  AlignedBuffer data;     // [n_tiles][tile_bytes]
  // F32 on AVX-512 with products large enough to pay: the Strassen-Winograd weight operands of the GEMM
  // (tiled_f32_gemm.h says their layout); strassen_min_m 0: none formed.
  int strassen_min_m = 0;
  int64_t s_kh = 0, s_nh = 0;  // their quadrant shape: ceil(n_in / 2) x ceil(n_out / 2)
  AlignedBuffer strassen;
  const uint16_t* tile(int64_t i) const {
    return reinterpret_cast<const uint16_t*>(data.as<uint8_t>() + size_t(i) * tile_bytes);
  }
  const float* tile_f32(int64_t i) const {
    return reinterpret_cast<const float*>(data.as<uint8_t>() + size_t(i) * tile_bytes);
  }
  int64_t n_pairs() const { return (n_in + 1) / 2; }
  // Weight (row r, input k) as a float, for tests and references.
  float at(int64_t r, int64_t k) const;
};

// Whether a GGUF matrix of type t is tiled as it is in native mode (F16, BF16).
bool tiles_as_float(GgmlType t);

// Tiles of type `as` (F16, BF16 or F32) from w: a copy when w is of that type, else w's exact values
// (dequantized) rounded to `as` (F16, F32; BF16 tiles only from BF16 weights). The work is split over pool
// when given.
TiledFloat tile_float(const Weight& w, GgmlType as, ThreadPool* pool);

// Bytes of activations prepare_float_acts writes for n_tok tokens (at most 4 per value, plus one value).
size_t float_acts_bytes(GgmlType type, int64_t n_in, int64_t n_tok);
// Rounds tokens [t0, t1) of x ([n_tok][n_in] floats) into acts, in the format above for `type`.
void prepare_float_acts(GgmlType type, const float* x, int64_t n_in, int64_t t0, int64_t t1, void* acts);

// y[t * y_stride + r] = row r times token t (acts from prepare_float_acts), tiles [tile0, tile1), tokens
// [0, n_tok).
void tiled_float_matmul(const TiledFloat& w, const void* acts, int64_t n_tok, int64_t tile0, int64_t tile1,
                        float* y, int64_t y_stride);

// The instruction set of the kernel that runs for `type` now: "avx512vnni" (AVX-512 F/BW/VL; for BF16 with
// vdpbf16ps where the CPU has AVX512_BF16), "avx2", "neon" or "scalar": the running ISA's (base/cpu_isa.h,
// select_cpu_isa). The backend tiles a type only when a vector kernel exists for it (the scalar one is the
// tests' reference). F32 on "avx512vnni": whole matrices run on the blocked GEMM (tiled_f32_gemm.h).
const char* tiled_float_isa_name(GgmlType type);

}  // namespace tilellm
