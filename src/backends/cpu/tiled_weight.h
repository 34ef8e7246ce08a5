// Weight matrices repacked once at load into the CPU backend's tile layout (SPEC §3, Tile-GEMM), and the
// matmul kernels that read it.
//
// Why tiles: a GGUF row stores one output channel's blocks one after another, so a row-at-a-time kernel
// spends a horizontal sum, a scale conversion and a multiply per (row, block, token). In a tile, 16 output
// rows sit side by side for every 4 input values: one 512-bit vpdpbusd multiplies 16 rows by 4 activations
// and leaves the 16 row sums in 16 lanes, where the per-block scales of all 16 rows are applied with one
// multiply. The same decoded weights then serve several tokens (prefill) while they are in registers. On ARM
// a 128-bit vector takes 4 of the 16 rows (16 bytes of each 64-byte group): one SDOT multiplies them by 4
// activations.
//
// Tile layout (per weight; every size in bytes):
//   n_tiles = ceil(n_out / 16); tile i holds rows 16i .. 16i+15 (rows past n_out are zero codes, zero
//   scales). K is cut into sub-blocks of 32 input values (one activation block); kp = n_sub * 32 >= n_in,
//   values past n_in have zero codes and meet zero activations. A tile is [codes][scales][offsets], each part
//   64-byte aligned, the tile padded to 128 bytes:
//     codes, 4-bit kinds: [n_sub][4 groups][16 rows][4 bytes]; byte j (0..3) of row r in group g of sub-block
//                         s holds the code of k = 32s + 8g + j in its low nibble and of k = 32s + 8g + 4 + j
//                         in its high nibble, so (byte & 15) and (byte >> 4) are each 16 rows x 4 k.
//     codes, 8-bit kinds: [n_sub][8 groups][16 rows][4 bytes]; byte j of row r in group g: k = 32s + 4g + j.
//     scales:  [n_groups][16 rows] fp16, one per row per scale group (a group spans `sub_per_group`
//              sub-blocks);
//     offsets: [n_groups][16 rows] fp16 (kinds with a float offset only).
//   Codes are unsigned: a weight is  w = scale * code + offset  (float-offset kinds), or
//   w = scale * (code - int_offset)  (Q4_0: 8, Q5_0: 16, Q8_0: 128 — the stored signed value plus 128).
//
// Kinds (the repack of the GGUF block formats is lossless: same codes, same fp16 scales):
//   Q4_0     4-bit, group 32, int offset 8                  (GGUF Q4_0)
//   Q8_0     8-bit, group 32, int offset 128                (GGUF Q8_0)
//   Q4_1     4-bit, group 32, float offset m                (GGUF Q4_1)
//   Q5_0     8-bit codes 0..31, group 32, int offset 16     (GGUF Q5_0)
//   Q5_1     8-bit codes 0..31, group 32, float offset m    (GGUF Q5_1)
//   (Q5_0 and Q5_1 hold one byte per 5-bit code, 8.5 bits per weight against the file's 5.5 and 6: the codes
//   go through the 8-bit kernels as loaded. GGUF writers use these types where a K-quant does not fit, for
//   inputs not a multiple of 256 — small models, whose weights are few.)
//   Int4B64  4-bit, group 64, float offset                  (--weights int4b64, MNN's Int4-Block64)
//   Int8B0   8-bit, one group over all of K, float offset   (--weights int8b0, MNN's Int8-Block0)
//   Int4B0   4-bit, one group over all of K, float offset   (--weights int4b0, MNN's Int4-Block0 / W4A8)
//
// K-quant kinds (GGUF Q4_K, Q5_K, Q6_K; n_in a multiple of 256, one super-block per 256 inputs):
//   codes: the layouts above with the super-block's unsigned codes (Q4_K 0..15 as nibbles; Q5_K 0..31 and
//          Q6_K 0..63 as bytes); sub-block s of 32 is inputs 32s .. 32s+31 as for the other kinds.
//   params: [n_sb][320 bytes] after the codes (at scale_off), per super-block:
//     Q4_K, Q5_K: sc [8][16 rows] uint8 at 0, the 6-bit scales unpacked; mn [4 pairs][16 rows][2] uint8 at
//                 128 (byte 2*(16p + r) + i is mn[2p + i] of row r: one zero-extending load and one
//                 vpmaddwd per pair of sub-blocks against a pair of activation sums); d [16] fp16 at 256,
//                 dmin [16] fp16 at 288.
//     Q6_K:       sc [16][16 rows] int8 at 0 (one per 16 inputs); d [16] fp16 at 256.
//   Q5_K and Q6_K keep one byte per code rather than split planes (low nibbles + high bits): 8.6 bits per
//   weight against the file's 5.5 and 6.6, but the codes feed the products as loaded, with no unpacking on
//   any pass. Measured on a random 4096 x 4096 matrix, 2 threads (AVX-512): a decode GEMV on these tiles
//   takes 0.73x (Q5_K) and 0.75x (Q6_K) the time of the row kernels on the file's blocks (Q4_K nibbles:
//   0.58x), 64 tokens 0.30x and 0.47x. In a Q4_K_M model they are the minority (Q6_K in half of ffn_down,
//   Q5_K not at all), so the bytes a split plane would save are a small share of a decode step.
//   A weight is w = (d * sc) * code - dmin * mn (Q4_K, Q5_K) or (d * sc) * (code - 32) (Q6_K), exactly
//   the GGUF dequantization.
//
// Arithmetic: activations are quantized per 32 values exactly as for the row kernels (Q8_0, or Q8_1 for
// Q4_1 and Q5_1: format/quants_q8.h), so for the GGUF kinds every block's integer sum and its float scaling
// are the ones llama.cpp computes; only the order of the float accumulation over blocks differs. Per
// sub-block s of token t and row r:
//   int offset kinds:   y += (ws[r] * dx[t][s]) * float(sum_k code * q - int_offset * sum_k q)
//   Q4_1, Q5_1:         y += (ws[r] * dx[t][s]) * float(sum_k code * q) + wm[r] * s8[t][s]
//                       (s8 = the Q8_1 block's stored half(dx * sum q), as ggml uses it)
//   Int4B64, Int8B0, Int4B0:
//                       y += (ws[r] * dx[t][s]) * float(sum_k code * q) + wo[r] * (dx[t][s] * sum_k q)
// K-quant kinds, activations Q8_K (dy per 256, bsums b16 per 16, b32 = sums per 32), per super-block c:
//   Q4_K, Q5_K:  y += (d[r] * dy[t][c]) * float(isum) - (dmin[r] * dy[t][c]) * float(msum)
//                isum = sum_j sc[r][j] * sum_{k in j} code * q,  msum = sum_j mn[r][j] * b32[t][j]
//   Q6_K:        y += (d[r] * dy[t][c]) * float(isum),
//                isum = sum_j sc[r][j] * (sum_{k in j} code * q - 32 * b16[t][j])
// which is the row kernels' (and llama.cpp's) arithmetic per super-block. isum is exact in int32: per
// sub-block |sum code * q| <= 32 * 31 * 127 (Q5_K), times sc <= 63, times 8 sub-blocks: < 2^26. Q6_K: per 16
// inputs |sum code * q| <= 16 * 63 * 127 and |32 * b16| <= 32 * 16 * 127, times |sc| <= 128, times 16
// sub-blocks: < 2^28 + 2^27. msum <= 8 * 63 * 32 * 127 < 2^21, and |b32| <= 4064 fits the int16 pair.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "backends/modes.h"
#include "backends/weight.h"
#include "base/aligned.h"
#include "base/thread_pool.h"
#include "format/asym_quant.h"
#include "format/ggml_types.h"

namespace tilellm {

enum class TileKind { Q4_0, Q8_0, Q4_1, Int4B64, Int8B0, Int4B0, Q4_K, Q5_K, Q6_K, Q5_0, Q5_1 };

inline constexpr int kTileRows = 16;  // output rows per tile (one 512-bit vector of int32 or float lanes)
inline constexpr int kSubK = 32;      // input values per sub-block (one activation block)
inline constexpr int kSuperK = 256;   // input values per K-quant super-block (one Q8_K activation block)
inline constexpr size_t kKParamBytes = 320;  // per tile per super-block: scales, mins, d, dmin
inline constexpr size_t kKMinOff = 128, kKDOff = 256, kKDminOff = 288;  // within those 320 bytes

// Whether kind is one of the converted kinds (Int4B64, Int8B0, Int4B0).
bool converted_kind(TileKind kind);

struct TiledWeight {
  TileKind kind = TileKind::Q4_0;
  int64_t n_in = 0, n_out = 0;
  int64_t n_tiles = 0;        // ceil(n_out / kTileRows)
  int64_t n_sub = 0;          // ceil(n_in / kSubK)
  int64_t sub_per_group = 1;  // sub-blocks sharing one (scale, offset) per row
  int64_t n_groups = 0;       // n_sub / sub_per_group
  size_t code_bytes = 0;      // per tile
  size_t scale_off = 0;       // byte offset of the scales (K-quant kinds: the super-block params) in a tile
  size_t offset_off = 0;      // byte offset of the offsets within a tile (float-offset kinds)
  size_t tile_bytes = 0;      // multiple of 128
  AlignedBuffer data;         // [n_tiles][tile_bytes]

  bool k_quant() const { return kind == TileKind::Q4_K || kind == TileKind::Q5_K || kind == TileKind::Q6_K; }
  int bits() const {
    return kind == TileKind::Q4_0 || kind == TileKind::Q4_1 || kind == TileKind::Int4B64 ||
                   kind == TileKind::Int4B0 || kind == TileKind::Q4_K
               ? 4
               : 8;
  }
  int int_offset() const {
    switch (kind) {
      case TileKind::Q4_0:
        return 8;
      case TileKind::Q5_0:
        return 16;
      case TileKind::Q6_K:
        return 32;
      case TileKind::Q8_0:
        return 128;
      default:
        return 0;
    }
  }
  // Kinds with a float offset per scale group (for the K-quants the mins live in the super-block params).
  bool float_offset() const { return int_offset() == 0 && !k_quant(); }
  const uint8_t* tile(int64_t i) const { return data.as<uint8_t>() + size_t(i) * tile_bytes; }
  // The activation block format the kernels read: for the GGUF kinds llama.cpp's pairings (Q8_1 for Q4_1 and
  // Q5_1, Q8_K for the K-quant kinds, Q8_0 otherwise); for the converted kinds Q8_K where n_in is a whole
  // number of its 256-value blocks (as llama.cpp pairs its K-quants), else Q8_0.
  GgmlType activation_type() const {
    if (k_quant() || (converted() && n_in % kSuperK == 0)) return GgmlType::Q8_K;
    return kind == TileKind::Q4_1 || kind == TileKind::Q5_1 ? GgmlType::Q8_1 : GgmlType::Q8_0;
  }
  // Sub-blocks per unit of the prepared activations (TiledActs below): 0 for the K-quant kinds (their
  // super-block layout); for the converted kinds on Q8_K activations the sub-blocks that share both a
  // weight scale group and an activation block (Int4B64: 2; Int8B0, Int4B0: 8), so that the integer sums
  // of a unit are scaled once; 1 otherwise.
  int64_t act_fold() const {
    if (k_quant()) return 0;
    if (activation_type() == GgmlType::Q8_K) return std::min<int64_t>(sub_per_group, kSuperK / kSubK);
    return 1;
  }
  bool converted() const { return converted_kind(kind); }
};

// Whether `native` mode tiles a weight of this GGUF type.
bool tiles_natively(GgmlType t);

// The tile kind native mode repacks a weight of this GGUF type into (tiles_natively(t) must hold).
TileKind native_tile_kind(GgmlType t);

// Repacks (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K into their own kinds; lossless) or converts (kinds Int4B64,
// Int8B0, Int4B0, from the weight's exact float values) a weight matrix. The work is split over pool when
// given.
TiledWeight tile_weight(const Weight& w, TileKind kind, ThreadPool* pool);

// The format of a converted kind (format/asym_quant.h, the conversion every backend shares); the tile kind
// of a converted --weights mode (Int4B64, Int8B0, Int4B0).
AsymFormat asym_format(TileKind kind);
TileKind converted_tile_kind(WeightsMode mode);

// Weight (row r, input k) as the kernels see it: scale * (code - int_offset) + offset (offset 0 for the
// int offset kinds). For tests and references. K-quant kinds also give the integer parts: scale = d * sc,
// offset = -(dmin * mn) (Q4_K, Q5_K; 0 for Q6_K), exactly the GGUF dequantization's two products.
struct TiledEntry {
  int code = 0;
  float scale = 0.0f;
  float offset = 0.0f;
  int sc = 0, mn = 0;           // K-quants: the sub-block scale (signed for Q6_K) and min
  float d = 0.0f, dmin = 0.0f;  // K-quants: the super-block's d and dmin
};
TiledEntry tiled_entry(const TiledWeight& w, int64_t r, int64_t k);
float tiled_value(const TiledWeight& w, int64_t r, int64_t k);

// Activations of n_tok tokens prepared for the tile kernels from rows quantized by quantize_activations()
// to w.activation_type(), in units of `fold` = w.act_fold() sub-blocks of 32 (n_units = n_sub / fold):
//   qs   [n_tok][kp] int8         the block quants, contiguous per token (kp = n_sub * 32)
//   dx   [n_tok][n_units] float   the activation scale of the unit (its Q8_0 / Q8_1 block's, or its Q8_K
//                                 super-block's d)
//   isum [n_tok][n_units] int32   the sum of the unit's quants (int offset kinds subtract int_offset * isum)
//   am   [n_tok][n_units] float   the offset multiplier: Q8_1's stored s (Q4_1, Q5_1), dx * isum (the
//                                 converted kinds)
// so a kernel adds a unit's integer products up, then scales them once:
//   y += (ws[r] * dx[t][u]) * float(sum over the unit of code * q) + wo[r] * am[t][u]
// (the weight scale group holds the whole unit: fold divides sub_per_group). fold 0, from Q8_K rows for the
// K-quant kinds (n_sb = n_in / 256 super-blocks):
//   qs    as above
//   dx    [n_tok][n_sb] float   the super-block scales d
//   isum  [n_tok][n_in / 16] int32  the bsums (sum of q per 16)
//   pairs [n_tok][n_in / 64] int32  b32 of sub-blocks 2p (low 16 bits) and 2p + 1 (high 16 bits), b32 = the
//                               sum of q per 32: one vpmaddwd against a row's mins pair
struct TiledActs {
  const int8_t* qs = nullptr;
  const float* dx = nullptr;
  const int32_t* isum = nullptr;
  const float* am = nullptr;
  const int32_t* pairs = nullptr;
  int64_t kp = 0, n_sub = 0;  // n_sub: sub-blocks of 32 (also for Q8_K)
  int64_t fold = 1, n_units = 0;
};
// They depend only on the activation format (Q8_0, Q8_1 or Q8_K), the fold and n_in, so weights that read
// the same input with the same fold share one preparation. Bytes of scratch prepare_tiled_acts needs for
// n_tok tokens of n_in values (n_in a multiple of 32), whatever the format: at most 1.5 bytes per value plus
// four 64-byte alignments.
size_t tiled_acts_bytes(int64_t n_in, int64_t n_tok);
// Fills scratch (tiled_acts_bytes, 64-byte aligned) from n_tok rows of activations xq quantized to act_type
// (Q8_0, Q8_1 or Q8_K; row stride xq_stride bytes) for tokens [t0, t1); returns the views over all n_tok
// tokens.
TiledActs prepare_tiled_acts(GgmlType act_type, int64_t fold, int64_t n_in, const uint8_t* xq,
                             size_t xq_stride, int64_t n_tok, int64_t t0, int64_t t1, void* scratch);

// y[t * y_stride + r] = row r of w times token t, for tiles [tile0, tile1) and tokens [t0, t1).
void tiled_matmul(const TiledWeight& w, const TiledActs& a, int64_t tile0, int64_t tile1, int64_t t0,
                  int64_t t1, float* y, int64_t y_stride);

// The tile kernels' instruction set now: "avx512vnni", "avxvnni", "avx2" or "scalar" on x86; "neondot",
// "neon" or "scalar" on ARM: the running ISA's (base/cpu_isa.h, select_cpu_isa).
const char* tiled_isa_name();

}  // namespace tilellm
