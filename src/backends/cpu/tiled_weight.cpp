// The repack of weight matrices into tiles (layout in tiled_weight.h), and the conversions of --weights.
#include "backends/cpu/tiled_weight.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/fp16.h"
#include "format/asym_quant.h"
#include "format/quants.h"

namespace tilellm {
namespace {

size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

// The 32 unsigned codes of sub-block s of one source row, and its scale and offset as fp16 bits, for the
// GGUF kinds (lossless: the block's own codes and halves).
void gguf_sub_block(TileKind kind, const uint8_t* row, int64_t s, uint8_t codes[kSubK], uint16_t* scale,
                    uint16_t* offset) {
  switch (kind) {
    case TileKind::Q4_0: {
      BlockQ4_0 b;
      std::memcpy(&b, row + size_t(s) * sizeof b, sizeof b);
      for (int j = 0; j < 16; ++j) {
        codes[j] = b.qs[j] & 15;
        codes[j + 16] = b.qs[j] >> 4;
      }
      *scale = b.d;
      *offset = 0;
      return;
    }
    case TileKind::Q4_1: {
      BlockQ4_1 b;
      std::memcpy(&b, row + size_t(s) * sizeof b, sizeof b);
      for (int j = 0; j < 16; ++j) {
        codes[j] = b.qs[j] & 15;
        codes[j + 16] = b.qs[j] >> 4;
      }
      *scale = b.d;
      *offset = b.m;
      return;
    }
    case TileKind::Q5_0:
    case TileKind::Q5_1: {
      // Bit 4 of element j is bit j of the little-endian uint32 qh (format/quants.h).
      const bool q5_1 = kind == TileKind::Q5_1;
      BlockQ5_1 b1;
      BlockQ5_0 b0;
      const uint8_t* qs;
      uint32_t qh;
      if (q5_1) {
        std::memcpy(&b1, row + size_t(s) * sizeof b1, sizeof b1);
        qs = b1.qs;
        qh = uint32_t(b1.qh[0]) | uint32_t(b1.qh[1]) << 8 | uint32_t(b1.qh[2]) << 16 |
             uint32_t(b1.qh[3]) << 24;
        *scale = b1.d;
        *offset = b1.m;
      } else {
        std::memcpy(&b0, row + size_t(s) * sizeof b0, sizeof b0);
        qs = b0.qs;
        qh = uint32_t(b0.qh[0]) | uint32_t(b0.qh[1]) << 8 | uint32_t(b0.qh[2]) << 16 |
             uint32_t(b0.qh[3]) << 24;
        *scale = b0.d;
        *offset = 0;
      }
      for (int j = 0; j < 16; ++j) {
        codes[j] = uint8_t((qs[j] & 15) | ((qh >> j) & 1) << 4);
        codes[j + 16] = uint8_t((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
      }
      return;
    }
    case TileKind::Q8_0: {
      BlockQ8_0 b;
      std::memcpy(&b, row + size_t(s) * sizeof b, sizeof b);
      for (int j = 0; j < kSubK; ++j) codes[j] = static_cast<uint8_t>(b.qs[j] + 128);
      *scale = b.d;
      *offset = 0;
      return;
    }
    default:
      fail("internal: {} is not a GGUF tile kind", int(kind));
  }
}

// Writes the 32 codes of sub-block s of row rr (0..15) into a tile's code area.
void put_codes(uint8_t* tile_codes, int bits, int64_t s, int rr, const uint8_t codes[kSubK]) {
  if (bits == 8) {
    uint8_t* sub = tile_codes + size_t(s) * 8 * 64;
    for (int g = 0; g < 8; ++g)
      for (int j = 0; j < 4; ++j) sub[g * 64 + rr * 4 + j] = codes[4 * g + j];
  } else {
    uint8_t* sub = tile_codes + size_t(s) * 4 * 64;
    for (int g = 0; g < 4; ++g)
      for (int j = 0; j < 4; ++j)
        sub[g * 64 + rr * 4 + j] = static_cast<uint8_t>(codes[8 * g + j] | (codes[8 * g + 4 + j] << 4));
  }
}

// One K-quant super-block of a source row, unpacked: its 256 unsigned codes, the per-sub-block scales
// (8 for Q4_K/Q5_K, 16 signed for Q6_K) and mins, and d, dmin as fp16 bits (lossless: the block's own).
struct KBlock {
  uint8_t codes[kSuperK];
  int sc[16], mn[8];
  uint16_t d, dmin;
};

void k_block(TileKind kind, const uint8_t* row, int64_t c, KBlock* kb) {
  kb->dmin = 0;
  if (kind == TileKind::Q6_K) {
    BlockQ6_K b;
    std::memcpy(&b, row + size_t(c) * sizeof b, sizeof b);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      uint8_t* y = kb->codes + 128 * h;
      for (int l = 0; l < 32; ++l) {
        y[l] = uint8_t((ql[l] & 15) | ((qh[l] & 3) << 4));
        y[l + 32] = uint8_t((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4));
        y[l + 64] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        y[l + 96] = uint8_t((ql[l + 32] >> 4) | ((qh[l] >> 6) << 4));
      }
    }
    for (int j = 0; j < 16; ++j) kb->sc[j] = b.scales[j];
    kb->d = b.d;
    return;
  }
  const bool q5 = kind == TileKind::Q5_K;
  const size_t bytes = q5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  const uint8_t* b = row + size_t(c) * bytes;
  const uint8_t* scales = b + 4;  // after d, dmin in both layouts
  const uint8_t* qh = q5 ? b + offsetof(BlockQ5_K, qh) : nullptr;
  const uint8_t* qs = b + (q5 ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs));
  std::memcpy(&kb->d, b, 2);
  std::memcpy(&kb->dmin, b + 2, 2);
  for (int j = 0; j < 8; ++j) {
    // The 6-bit packing of quants.h (BlockQ4_K).
    if (j < 4) {
      kb->sc[j] = scales[j] & 63;
      kb->mn[j] = scales[j + 4] & 63;
    } else {
      kb->sc[j] = (scales[j + 4] & 15) | ((scales[j - 4] >> 6) << 4);
      kb->mn[j] = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
    }
    const uint8_t* q = qs + 32 * (j / 2);
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> (4 * (j % 2))) & 15;
      if (q5) v |= ((qh[l] >> j) & 1) << 4;
      kb->codes[32 * j + l] = uint8_t(v);
    }
  }
}

// Writes super-block c of tile row rr: codes into the code area, scales / mins / d / dmin into the params.
void put_k_block(const TiledWeight& t, uint8_t* tile, int64_t c, int rr, const KBlock& kb) {
  for (int j = 0; j < kSuperK / kSubK; ++j) put_codes(tile, t.bits(), 8 * c + j, rr, kb.codes + kSubK * j);
  uint8_t* p = tile + t.scale_off + size_t(c) * kKParamBytes;
  const int n_sc = t.kind == TileKind::Q6_K ? 16 : 8;
  for (int j = 0; j < n_sc; ++j) p[j * kTileRows + rr] = static_cast<uint8_t>(kb.sc[j]);
  if (t.kind != TileKind::Q6_K) {
    for (int j = 0; j < 8; ++j) p[kKMinOff + 2 * ((j / 2) * kTileRows + rr) + j % 2] = uint8_t(kb.mn[j]);
    std::memcpy(p + kKDminOff + 2 * rr, &kb.dmin, 2);
  }
  std::memcpy(p + kKDOff + 2 * rr, &kb.d, 2);
}

uint8_t get_code(const uint8_t* tile_codes, int bits, int64_t s, int rr, int e) {
  if (bits == 8) return tile_codes[size_t(s) * 8 * 64 + (e / 4) * 64 + rr * 4 + e % 4];
  const int g = e / 8, hi = (e % 8) / 4, j = e % 4;
  const uint8_t b = tile_codes[size_t(s) * 4 * 64 + g * 64 + rr * 4 + j];
  return hi ? b >> 4 : b & 15;
}

GgmlType source_of(TileKind k) {
  switch (k) {
    case TileKind::Q4_0:
      return GgmlType::Q4_0;
    case TileKind::Q4_1:
      return GgmlType::Q4_1;
    case TileKind::Q5_0:
      return GgmlType::Q5_0;
    case TileKind::Q5_1:
      return GgmlType::Q5_1;
    case TileKind::Q8_0:
      return GgmlType::Q8_0;
    case TileKind::Q4_K:
      return GgmlType::Q4_K;
    case TileKind::Q5_K:
      return GgmlType::Q5_K;
    case TileKind::Q6_K:
      return GgmlType::Q6_K;
    default:
      return GgmlType::F32;  // converted kinds take any source
  }
}

}  // namespace

bool tiles_natively(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

TileKind native_tile_kind(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
      return TileKind::Q4_0;
    case GgmlType::Q4_1:
      return TileKind::Q4_1;
    case GgmlType::Q5_0:
      return TileKind::Q5_0;
    case GgmlType::Q5_1:
      return TileKind::Q5_1;
    case GgmlType::Q8_0:
      return TileKind::Q8_0;
    case GgmlType::Q4_K:
      return TileKind::Q4_K;
    case GgmlType::Q5_K:
      return TileKind::Q5_K;
    case GgmlType::Q6_K:
      return TileKind::Q6_K;
    default:
      fail("internal: type {} has no native tile kind", type_name(t));
  }
}

TiledWeight tile_weight(const Weight& w, TileKind kind, ThreadPool* pool) {
  const bool converted = converted_kind(kind);
  if (!converted && w.type != source_of(kind)) {
    fail("internal: weight {} of type {} cannot be repacked as tile kind {}", w.name, type_name(w.type),
         int(kind));
  }
  if (w.n_in <= 0 || w.n_out <= 0) fail("weight {} has an empty shape", w.name);
  // Activations are quantized in blocks of 32, so every tiled matrix takes whole blocks of inputs.
  if (w.n_in % kSubK != 0) fail("weight {}: {} inputs is not a multiple of {}", w.name, w.n_in, kSubK);
  TiledWeight t;
  t.kind = kind;
  if (t.k_quant() && w.n_in % kSuperK != 0) {
    fail("weight {}: {} inputs is not a multiple of the {} super-block of {}", w.name, w.n_in,
         type_name(w.type), kSuperK);
  }
  t.n_in = w.n_in;
  t.n_out = w.n_out;
  t.n_tiles = (w.n_out + kTileRows - 1) / kTileRows;
  t.n_sub = (w.n_in + kSubK - 1) / kSubK;
  t.sub_per_group = kind == TileKind::Int4B64 ? 2 : converted ? t.n_sub : 1;
  t.n_groups = (t.n_sub + t.sub_per_group - 1) / t.sub_per_group;
  t.code_bytes = size_t(t.n_sub) * kSubK * kTileRows * size_t(t.bits()) / 8;
  const size_t param_bytes = t.k_quant() ? size_t(w.n_in / kSuperK) * kKParamBytes
                                         : round_up(size_t(t.n_groups) * kTileRows * 2, 64);
  t.scale_off = round_up(t.code_bytes, 64);
  t.offset_off = t.scale_off + param_bytes;
  t.tile_bytes = round_up(t.offset_off + (t.float_offset() ? param_bytes : 0), kAlign);
  t.data = AlignedBuffer(t.tile_bytes * size_t(t.n_tiles));

  const int bits = t.bits();
  auto pack_tiles = [&](int64_t b, int64_t e, int) {
    std::vector<float> row(converted ? size_t(w.n_in) : 0);
    const int64_t gk = t.sub_per_group * kSubK;                              // input values per group
    std::vector<uint8_t> codes(converted ? size_t(t.n_groups * gk) : 0, 0);  // past n_in: zero codes
    std::vector<uint16_t> gscale(converted ? size_t(t.n_groups) : 0), goff(gscale.size());
    for (int64_t ti = b; ti < e; ++ti) {
      uint8_t* base = t.data.as<uint8_t>() + size_t(ti) * t.tile_bytes;
      auto* scales = reinterpret_cast<uint16_t*>(base + t.scale_off);
      auto* offsets = reinterpret_cast<uint16_t*>(base + t.offset_off);
      for (int rr = 0; rr < kTileRows; ++rr) {
        const int64_t r = ti * kTileRows + rr;
        if (r >= w.n_out) break;  // padding rows keep zero codes and zero scales
        if (t.k_quant()) {
          KBlock kb;
          for (int64_t c = 0; c < w.n_in / kSuperK; ++c) {
            k_block(kind, w.row(r), c, &kb);
            put_k_block(t, base, c, rr, kb);
          }
          continue;
        }
        if (!converted) {
          uint8_t sub[kSubK];
          for (int64_t s = 0; s < t.n_sub; ++s) {
            uint16_t sc, off;
            gguf_sub_block(kind, w.row(r), s, sub, &sc, &off);
            put_codes(base, bits, s, rr, sub);
            scales[s * kTileRows + rr] = sc;
            if (t.float_offset()) offsets[s * kTileRows + rr] = off;
          }
          continue;
        }
        dequantize_row(w.type, w.row(r), row.data(), w.n_in);
        quantize_row_asym(asym_format(kind), row.data(), w.n_in, codes.data(), gscale.data(), goff.data());
        for (int64_t g = 0; g < t.n_groups; ++g) {
          scales[g * kTileRows + rr] = gscale[size_t(g)];
          offsets[g * kTileRows + rr] = goff[size_t(g)];
        }
        for (int64_t s = 0; s < t.n_sub; ++s) put_codes(base, bits, s, rr, codes.data() + s * kSubK);
      }
    }
  };
  if (pool) {
    pool->parallel_for(t.n_tiles, 16, pack_tiles);
  } else {
    pack_tiles(0, t.n_tiles, 0);
  }
  return t;
}

bool converted_kind(TileKind kind) {
  return kind == TileKind::Int4B64 || kind == TileKind::Int8B0 || kind == TileKind::Int4B0;
}

AsymFormat asym_format(TileKind kind) {
  if (kind == TileKind::Int4B64) return AsymFormat::Int4B64;
  if (kind == TileKind::Int8B0) return AsymFormat::Int8B0;
  if (kind == TileKind::Int4B0) return AsymFormat::Int4B0;
  fail("internal: tile kind {} is not a converted kind", int(kind));
}

TileKind converted_tile_kind(WeightsMode mode) {
  if (mode == WeightsMode::Int4B64) return TileKind::Int4B64;
  if (mode == WeightsMode::Int8B0) return TileKind::Int8B0;
  if (mode == WeightsMode::Int4B0) return TileKind::Int4B0;
  fail("internal: --weights {} has no tile kind", weights_mode_name(mode));
}

TiledEntry tiled_entry(const TiledWeight& w, int64_t r, int64_t k) {
  const uint8_t* tile = w.tile(r / kTileRows);
  const int rr = int(r % kTileRows);
  const int64_t s = k / kSubK, g = s / w.sub_per_group;
  const auto* scales = reinterpret_cast<const uint16_t*>(tile + w.scale_off);
  const auto* offsets = reinterpret_cast<const uint16_t*>(tile + w.offset_off);
  TiledEntry e;
  e.code = get_code(tile, w.bits(), s, rr, int(k % kSubK));
  if (w.k_quant()) {
    const uint8_t* p = tile + w.scale_off + size_t(k / kSuperK) * kKParamBytes;
    const int j = int(k % kSuperK) / (w.kind == TileKind::Q6_K ? 16 : 32);
    const uint8_t sc = p[j * kTileRows + rr];
    e.sc = w.kind == TileKind::Q6_K ? int(static_cast<int8_t>(sc)) : int(sc);
    uint16_t d, dmin = 0;
    std::memcpy(&d, p + kKDOff + 2 * rr, 2);
    e.d = fp16_to_fp32(d);
    e.scale = e.d * float(e.sc);
    if (w.kind != TileKind::Q6_K) {
      e.mn = p[kKMinOff + 2 * ((j / 2) * kTileRows + rr) + j % 2];
      std::memcpy(&dmin, p + kKDminOff + 2 * rr, 2);
      e.dmin = fp16_to_fp32(dmin);
      e.offset = -(e.dmin * float(e.mn));
    }
    return e;
  }
  e.scale = fp16_to_fp32(scales[g * kTileRows + rr]);
  e.offset = w.float_offset() ? fp16_to_fp32(offsets[g * kTileRows + rr]) : 0.0f;
  return e;
}

float tiled_value(const TiledWeight& w, int64_t r, int64_t k) {
  const TiledEntry e = tiled_entry(w, r, k);
  return e.scale * float(e.code - w.int_offset()) + e.offset;
}

}  // namespace tilellm
