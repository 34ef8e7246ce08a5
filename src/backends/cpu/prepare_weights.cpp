// CpuBackend::prepare_weights: the load-time repack (or conversion) of every matrix the layer loop multiplies
// by, per --weights (tiled_weight.h). Runs once per backend, split over its thread pool.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>

#include "backends/cpu/cpu_backend.h"
#include "format/error.h"
#include "format/fp16.h"
#include "format/quants.h"

namespace tilellm {
namespace {

// Types with fewer than 8 bits per weight: converting them to another block format quantizes twice.
bool below_8_bits(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

// Tells the kernel that the mapped file pages of a matrix now held in tiles will not be read: it drops them
// from this process's resident set (a model's matrices would otherwise be resident twice, as file pages and
// as tiles). Only whole pages inside the range are released; a later read, should one come, faults the pages
// back in from the file, so this changes memory use, never results. Only for file-mapped weights: on ordinary
// memory the same call would zero the pages.
void release_rows(const Weight& w) {
  if (!w.file_mapped) return;
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(w.data);
  const uintptr_t end = begin + w.row_bytes * size_t(w.n_out);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace

void CpuBackend::prepare_weights(const ModelWeights& mw, WeightsMode mode) {
  prepared_.clear();
  const bool quantized = mode_ == ActivationMode::Quantized;
  std::vector<const Weight*> mats;
  for (const LayerWeights& l : mw.layers) {
    for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) mats.push_back(w);
  }
  mats.push_back(&mw.output);

  // Native mode tiles only where a vector tile kernel exists: the scalar one is the reference, slower than
  // the vectorized row kernels.
  const bool tile_native = quantized && std::string_view(tiled_isa_name()) != "scalar";
  // F16 and BF16 matrices go into float tiles where a vector kernel exists for their type, in the 8-bit
  // activation mode (with --activations f32 the GGUF rows stay the exact reference).
  auto tile_float_ok = [&](GgmlType t) {
    return quantized && tiles_as_float(t) && std::string_view(tiled_float_isa_name(t)) != "scalar";
  };
  bool warned = false;
  for (const Weight* w : mats) {
    Prepared p;
    switch (mode) {
      case WeightsMode::Native:
        if (tile_float_ok(w->type)) {
          p.float_tiled = true;
          p.float_tiles = tile_float(*w, &pool_);
          break;
        }
        if (!tile_native || !tiles_natively(w->type)) continue;
        p.tiled = true;
        p.tiles = tile_weight(*w, native_tile_kind(w->type), &pool_);
        break;
      case WeightsMode::Int4B64:
      case WeightsMode::Int8B0:
        if (below_8_bits(w->type) && !warned) {
          std::fprintf(stderr,
                       "warning: --weights %s re-quantizes weights stored in %s (fewer than 8 bits): the "
                       "rounding of both formats adds up; perplexity shows the cost\n",
                       weights_mode_name(mode), std::string(type_name(w->type)).c_str());
          warned = true;
        }
        if (!quantized) {
          // The float path: the converted weights' exact values (the same conversion the tiles and the
          // OpenCL device hold) as F32 rows meeting float32 activations, the reference for the device.
          const TileKind kind = mode == WeightsMode::Int4B64 ? TileKind::Int4B64 : TileKind::Int8B0;
          p.rows = *w;
          p.rows.type = GgmlType::F32;
          p.rows.row_bytes = size_t(w->n_in) * sizeof(float);
          p.rows_data = AlignedBuffer(p.rows.row_bytes * size_t(w->n_out));
          auto* dst = p.rows_data.as<float>();
          pool_.parallel_for(w->n_out, 64, [&](int64_t b, int64_t e, int) {
            std::vector<float> row(size_t(w->n_in));
            for (int64_t r = b; r < e; ++r) {
              dequantize_row(w->type, w->row(r), row.data(), w->n_in);
              dequantize_row_asym(kind, row.data(), w->n_in, dst + r * w->n_in);
            }
          });
          p.rows.data = p.rows_data.as<uint8_t>();
          p.rows.file_mapped = false;
          break;
        }
        p.tiled = true;
        p.tiles =
            tile_weight(*w, mode == WeightsMode::Int4B64 ? TileKind::Int4B64 : TileKind::Int8B0, &pool_);
        break;
      case WeightsMode::F16: {
        if (w->type == GgmlType::F16) {
          if (!tile_float_ok(GgmlType::F16)) continue;
          p.float_tiled = true;
          p.float_tiles = tile_float(*w, &pool_);
          break;
        }
        p.rows = *w;
        p.rows.type = GgmlType::F16;
        p.rows.row_bytes = size_t(w->n_in) * 2;
        p.rows_data = AlignedBuffer(p.rows.row_bytes * size_t(w->n_out));
        auto* dst = p.rows_data.as<uint16_t>();
        pool_.parallel_for(w->n_out, 64, [&](int64_t b, int64_t e, int) {
          std::vector<float> row(size_t(w->n_in));
          for (int64_t r = b; r < e; ++r) {
            dequantize_row(w->type, w->row(r), row.data(), w->n_in);
            for (int64_t k = 0; k < w->n_in; ++k) dst[r * w->n_in + k] = fp32_to_fp16(row[size_t(k)]);
          }
        });
        p.rows.data = p.rows_data.as<uint8_t>();
        p.rows.file_mapped = false;
        if (tile_float_ok(GgmlType::F16)) {  // the converted rows only feed the tiles
          p.float_tiled = true;
          p.float_tiles = tile_float(p.rows, &pool_);
          p.rows_data = AlignedBuffer();
          p.rows.data = nullptr;
        }
        break;
      }
    }
    // The tied output matrix is also the embedding table, whose rows are still looked up.
    if ((p.tiled || p.float_tiled) && w->data != mw.tok_embd.data) release_rows(*w);
    prepared_.emplace(w, std::move(p));
  }
  // Scratch for the tiled activations: tiled_acts_bytes(n_in, n_tok) is at most 1.5 bytes per value plus
  // four 64-byte alignments.
  act_t_ = AlignedBuffer(prepared_.empty() ? 0 : size_t(max_act_elems_) * 2 + 4 * 64);
  // (Float tiles read their rounded activations from act_q_, which holds 4 bytes per element.)
}

}  // namespace tilellm
