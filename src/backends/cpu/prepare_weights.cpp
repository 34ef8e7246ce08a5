// CpuBackend::prepare_weights: the load-time repack (or conversion) of every matrix the layer loop multiplies
// by, per --weights (tiled_weight.h). Runs once per backend, split over its thread pool.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/tiled_f32_gemm.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/asym_quant.h"
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

// The feed-forward input matrices, which --degrade tile-mask masks: gate and up (phi3's fused gate_up is
// named ffn_up), named as GGUF files name them.
bool feeds_forward_input(const std::string& name) {
  auto ends = [&](std::string_view s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends("ffn_gate.weight") || ends("ffn_up.weight");
}

}  // namespace

void CpuBackend::prepare_weights(const WeightSet& ws, WeightsMode mode) {
  prepared_.clear();
  const bool quantized = mode_ == ActivationMode::Quantized;
  const std::vector<const Weight*>& mats = ws.matrices;

  // Native mode tiles only where a vector tile kernel exists: the scalar one is the reference, slower than
  // the vectorized row kernels.
  const bool tile_native = quantized && std::string_view(tiled_isa_name()) != "scalar";
  // F16 and BF16 matrices go into float tiles where a vector kernel exists for their type, in the 8-bit
  // activation mode (with --activations f32 the GGUF rows stay the exact reference).
  auto tile_float_ok = [&](GgmlType t) {
    return quantized && tiles_as_float(t) && std::string_view(tiled_float_isa_name(t)) != "scalar";
  };
  // p.rows: w's exact values as rows of `as` (F32 or F16), each row passed through `adjust` first when set.
  auto float_rows = [&](const Weight& w, GgmlType as, Prepared& p,
                        const std::function<void(float*)>& adjust) {
    p.rows = w;
    p.rows.type = as;
    p.rows.row_bytes = size_t(w.n_in) * (as == GgmlType::F32 ? 4 : 2);
    p.rows_data = AlignedBuffer(p.rows.row_bytes * size_t(w.n_out));
    uint8_t* dst = p.rows_data.as<uint8_t>();
    pool_.parallel_for(w.n_out, 64, [&](int64_t b, int64_t e, int) {
      std::vector<float> row(size_t(w.n_in));
      for (int64_t r = b; r < e; ++r) {
        dequantize_row(w.type, w.row(r), row.data(), w.n_in);
        if (adjust) adjust(row.data());
        uint8_t* d = dst + size_t(r) * p.rows.row_bytes;
        if (as == GgmlType::F32) {
          std::memcpy(d, row.data(), p.rows.row_bytes);
        } else {
          for (int64_t k = 0; k < w.n_in; ++k) {
            const uint16_t h = fp32_to_fp16(row[size_t(k)]);
            std::memcpy(d + 2 * k, &h, 2);
          }
        }
      }
    });
    p.rows.data = p.rows_data.as<uint8_t>();
    p.rows.file_mapped = false;
  };
  bool warned = false;
  for (const Weight* w : mats) {
    if (prepared_.count(w)) continue;  // listed twice
    Prepared p;
    switch (mode) {
      case WeightsMode::Native:
        if (tile_float_ok(w->type)) {
          p.float_tiled = true;
          p.float_tiles = tile_float(*w, w->type, &pool_);
          break;
        }
        if (!tile_native || !tiles_natively(w->type)) continue;
        p.tiled = true;
        p.tiles = tile_weight(*w, native_tile_kind(w->type), &pool_);
        break;
      case WeightsMode::Int4B64:
      case WeightsMode::Int8B0:
      case WeightsMode::Int4B0: {
        if (below_8_bits(w->type) && !warned) {
          std::fprintf(stderr,
                       "warning: --weights %s re-quantizes weights stored in %s (fewer than 8 bits): the "
                       "rounding of both formats adds up; perplexity shows the cost\n",
                       weights_mode_name(mode), std::string(type_name(w->type)).c_str());
          warned = true;
        }
        const TileKind kind = converted_tile_kind(mode);
        if (!quantized) {
          // The float path: the converted weights' exact values (the same conversion the tiles and the
          // OpenCL device hold) as F32 rows meeting float32 activations, the reference for the device.
          const AsymFormat f = asym_format(kind);
          float_rows(*w, GgmlType::F32, p, [f, n = w->n_in](float* row) {
            std::vector<float> exact(static_cast<size_t>(n));
            dequantize_row_asym(f, row, n, exact.data());
            std::copy(exact.begin(), exact.end(), row);
          });
          break;
        }
        p.tiled = true;
        p.tiles = tile_weight(*w, kind, &pool_);
        break;
      }
      case WeightsMode::F16:
        if (tile_float_ok(GgmlType::F16)) {
          p.float_tiled = true;
          p.float_tiles = tile_float(*w, GgmlType::F16, &pool_);
        } else if (w->type != GgmlType::F16) {
          float_rows(*w, GgmlType::F16, p, nullptr);
        } else {
          continue;  // the GGUF rows are F16 already
        }
        break;
      case WeightsMode::F32:
        // F32 tiles meet the activations unrounded, so they serve both activation modes.
        if (std::string_view(tiled_float_isa_name(GgmlType::F32)) != "scalar") {
          p.float_tiled = true;
          p.float_tiles = tile_float(*w, GgmlType::F32, &pool_);
          if (f32gemm::available()) f32gemm::prepare(p.float_tiles);
        } else if (w->type != GgmlType::F32) {
          float_rows(*w, GgmlType::F32, p, nullptr);
        } else {
          continue;
        }
        break;
    }
    // --degrade tile-mask: the mask is chosen from the rows' exact values, before their pages are released.
    if (mask_fraction_ > 0 && (p.tiled || p.float_tiled) && feeds_forward_input(w->name))
      p.mask = select_tile_mask(*w, p.tiled ? p.tiles.n_tiles : p.float_tiles.n_tiles, mask_fraction_);
    // The tied output matrix is also the embedding table, whose rows are still looked up.
    if ((p.tiled || p.float_tiled) && !(ws.embedding && w->data == ws.embedding->data)) release_rows(*w);
    prepared_.emplace(w, std::move(p));
  }
  // Scratch for the tiled activations: tiled_acts_bytes(n_in, n_tok) is at most 1.5 bytes per value plus
  // four 64-byte alignments.
  act_t_ = AlignedBuffer(prepared_.empty() ? 0 : size_t(max_act_elems_) * 2 + 4 * 64);
  // (Float tiles read their rounded activations from act_q_, which holds 4 bytes per element.)
  // Scratch of the F32 GEMM for the most tokens a matmul of each matrix can see.
  size_t gemm_floats = 0;
  for (const auto& [w, p] : prepared_) {
    if (!p.float_tiled || p.float_tiles.type != GgmlType::F32 || !f32gemm::available()) continue;
    const int64_t max_tok = std::max<int64_t>(1, max_act_elems_ / std::max<int64_t>(1, w->n_in));
    gemm_floats = std::max(gemm_floats, f32gemm::scratch_floats(p.float_tiles, max_tok));
  }
  f32_scratch_ = AlignedBuffer(gemm_floats * sizeof(float));
}

}  // namespace tilellm
