// Float tiles (layout and arithmetic in tiled_float.h): the repack, the activation rounding, the scalar
// reference kernel and the dispatch over the vector kernels (tiled_float_<isa>.cpp).
#include "backends/cpu/tiled_float.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/tiled_float_kernels.h"
#include "base/cpu_isa.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/quants.h"

namespace tilellm {
namespace {

constexpr int kRows = 16;

// The contract's formula element by element, reading the tiles through TiledFloat::at (checked against the
// GGUF rows by the repack test).
void scalar_kernel(const TiledFloat& w, const void* acts, int64_t n_tok, int64_t tile0, int64_t tile1,
                   float* y, int64_t y_stride) {
  const bool bf16 = w.type == GgmlType::BF16;  // F16 and F32 activations are floats
  for (int64_t r = tile0 * kRows; r < std::min(w.n_out, tile1 * kRows); ++r) {
    for (int64_t t = 0; t < n_tok; ++t) {
      float acc = 0.0f;
      for (int64_t k = 0; k < w.n_in; ++k) {
        const float x =
            bf16 ? bf16_to_fp32(uint16_t(static_cast<const uint32_t*>(acts)[t * w.n_pairs() + k / 2] >>
                                         (16 * (k % 2))))
                 : static_cast<const float*>(acts)[t * w.n_in + k];
        acc += w.at(r, k) * x;
      }
      y[t * y_stride + r] = acc;
    }
  }
}

using tiled_float_detail::Kernel;
using tiled_float_detail::Kernels;

// The kernel of the running ISA (base/cpu_isa.h) for each tile type.
struct Tables {
  IsaTable<Kernel> f16, bf16, f32;
};
IsaTable<Kernel> table_of(Kernel Kernels::*member) {
  using namespace tiled_float_detail;
  auto of = [member](const Kernels* k) { return k ? k->*member : nullptr; };
  return {{CpuIsa::Scalar, scalar_kernel},
          {CpuIsa::Avx2, of(avx2_kernels())},
          {CpuIsa::Avx512Vnni, of(avx512_kernels())},
          {CpuIsa::Neon, of(neon_kernels())}};
}
const IsaTable<Kernel>& table(GgmlType type) {
  static const Tables t = {table_of(&Kernels::f16), table_of(&Kernels::bf16), table_of(&Kernels::f32)};
  return type == GgmlType::BF16 ? t.bf16 : type == GgmlType::F32 ? t.f32 : t.f16;
}

}  // namespace

float TiledFloat::at(int64_t r, int64_t k) const {
  const int64_t rr = r % kRows;
  if (type == GgmlType::F32) return tile_f32(r / kRows)[k * kRows + rr];
  const uint16_t* t = tile(r / kRows);
  if (type == GgmlType::BF16) return bf16_to_fp32(t[(k / 2) * 2 * kRows + rr * 2 + k % 2]);
  return fp16_to_fp32(t[k * kRows + rr]);
}

bool tiles_as_float(GgmlType t) {
  return t == GgmlType::F16 || t == GgmlType::BF16;
}

TiledFloat tile_float(const Weight& w, GgmlType as, ThreadPool* pool) {
  const bool copy = w.type == as;
  if (!(as == GgmlType::F16 || as == GgmlType::F32 || (as == GgmlType::BF16 && copy)))
    fail("internal: weight {} of type {} cannot be tiled as {}", w.name, type_name(w.type), type_name(as));
  TiledFloat t;
  t.type = as;
  t.n_in = w.n_in;
  t.n_out = w.n_out;
  t.n_tiles = (w.n_out + kRows - 1) / kRows;
  const size_t raw = as == GgmlType::BF16  ? size_t(t.n_pairs()) * kRows * 4
                     : as == GgmlType::F32 ? size_t(w.n_in) * kRows * 4
                                           : size_t(w.n_in) * kRows * 2;
  t.tile_bytes = (raw + kAlign - 1) / kAlign * kAlign;
  t.data = AlignedBuffer(t.tile_bytes * size_t(t.n_tiles));  // zeroed: padding rows stay zero
  const bool bf16 = as == GgmlType::BF16, f32 = as == GgmlType::F32;
  auto pack = [&](int64_t b, int64_t e, int) {
    std::vector<float> row(copy ? 0 : size_t(w.n_in));
    for (int64_t ti = b; ti < e; ++ti) {
      uint8_t* base = t.data.as<uint8_t>() + size_t(ti) * t.tile_bytes;
      auto* d16 = reinterpret_cast<uint16_t*>(base);
      auto* d32 = reinterpret_cast<float*>(base);
      for (int rr = 0; rr < kRows && ti * kRows + rr < w.n_out; ++rr) {
        const uint8_t* src = w.row(ti * kRows + rr);
        if (!copy) dequantize_row(w.type, src, row.data(), w.n_in);
        for (int64_t k = 0; k < w.n_in; ++k) {
          if (f32) {
            float v;
            if (copy) {
              std::memcpy(&v, src + 4 * k, 4);
            } else {
              v = row[size_t(k)];
            }
            d32[k * kRows + rr] = v;
            continue;
          }
          uint16_t* d = bf16 ? &d16[(k / 2) * 2 * kRows + rr * 2 + k % 2] : &d16[k * kRows + rr];
          if (copy) {
            std::memcpy(d, src + 2 * k, 2);
          } else {
            *d = fp32_to_fp16(row[size_t(k)]);
          }
        }
      }
    }
  };
  if (pool) {
    pool->parallel_for(t.n_tiles, 16, pack);
  } else {
    pack(0, t.n_tiles, 0);
  }
  return t;
}

size_t float_acts_bytes(GgmlType type, int64_t n_in, int64_t n_tok) {
  return type == GgmlType::BF16 ? size_t(n_tok) * size_t((n_in + 1) / 2) * 4 : size_t(n_tok * n_in) * 4;
}

void prepare_float_acts(GgmlType type, const float* x, int64_t n_in, int64_t t0, int64_t t1, void* acts) {
  if (type == GgmlType::BF16) {
    const int64_t np = (n_in + 1) / 2;
    auto* out = static_cast<uint32_t*>(acts);
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * n_in;
      for (int64_t p = 0; p < np; ++p) {
        const uint32_t hi = 2 * p + 1 < n_in ? fp32_to_bf16(xt[2 * p + 1]) : 0;
        out[t * np + p] = uint32_t(fp32_to_bf16(xt[2 * p])) | hi << 16;
      }
    }
    return;
  }
  auto* out = static_cast<float*>(acts);
  if (type == GgmlType::F32) {
    if (out != x) std::memcpy(out + t0 * n_in, x + t0 * n_in, size_t((t1 - t0) * n_in) * sizeof(float));
    return;
  }
  for (int64_t i = t0 * n_in; i < t1 * n_in; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

void tiled_float_matmul(const TiledFloat& w, const void* acts, int64_t n_tok, int64_t tile0, int64_t tile1,
                        float* y, int64_t y_stride) {
  if (tile0 >= tile1 || n_tok <= 0) return;
  table(w.type).get()(w, acts, n_tok, tile0, tile1, y, y_stride);
}

const char* tiled_float_isa_name(GgmlType type) {
  return table(type).name();
}

}  // namespace tilellm
