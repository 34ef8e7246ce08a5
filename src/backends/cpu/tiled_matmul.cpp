// Matmul over tiled weights (layout and arithmetic in tiled_weight.h): the activation preparation, the
// portable scalar kernel (the reference the vector kernels are tested against) and the dispatch.
#include <algorithm>
#include <cstring>

#include "backends/cpu/tiled_matmul_kernels.h"
#include "backends/cpu/tiled_weight.h"
#include "base/cpu_isa.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/quants_q8.h"

namespace tilellm {
namespace {

size_t align64(size_t v) {
  return (v + 63) / 64 * 64;
}

// Scratch layout of prepare_tiled_acts: [qs][dx][isum][am], each part 64-byte aligned, sized for the
// largest use of each part by any format: isum holds one int32 per 16 values (Q8_K's bsums), am one float
// per 32 (Q8_K's pairs need one int32 per 64 and share it).
struct ActsLayout {
  size_t qs = 0, dx = 0, isum = 0, am = 0, total = 0;
};
ActsLayout acts_layout(int64_t n_in, int64_t n_tok) {
  ActsLayout l;
  const size_t nb = size_t(n_tok) * size_t(n_in / kSubK);
  l.dx = align64(nb * kSubK);
  l.isum = l.dx + align64(nb * sizeof(float));
  l.am = l.isum + align64(2 * nb * sizeof(int32_t));
  l.total = l.am + align64(nb * sizeof(float));
  return l;
}

// The K-quant kinds' formula (tiled_weight.h) per super-block, reading the tiles through tiled_entry.
void scalar_k_matmul(const TiledWeight& w, const TiledActs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
                     float* y, int64_t y_stride) {
  const int64_t n_sb = w.n_in / kSuperK;
  const int sub = w.kind == TileKind::Q6_K ? 16 : 32;  // inputs per scale
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = t0; t < t1; ++t) {
      const int8_t* q = a.qs + t * a.kp;
      const int32_t* b16 = a.isum + t * (w.n_in / 16);
      float acc = 0.0f;
      for (int64_t c = 0; c < n_sb; ++c) {
        int32_t isum = 0, msum = 0;
        TiledEntry e;
        for (int j = 0; j < kSuperK / sub; ++j) {
          const int64_t k0 = c * kSuperK + j * sub;
          int32_t s = w.kind == TileKind::Q6_K ? -32 * b16[k0 / 16] : 0;
          for (int k = 0; k < sub; ++k) {
            e = tiled_entry(w, r, k0 + k);
            s += e.code * q[k0 + k];
          }
          isum += e.sc * s;
          msum += e.mn * (b16[k0 / 16] + (sub == 32 ? b16[k0 / 16 + 1] : 0));
        }
        const float dy = a.dx[t * n_sb + c];
        acc += float(isum) * (e.d * dy);
        if (w.kind != TileKind::Q6_K) acc -= float(msum) * (e.dmin * dy);
      }
      y[t * y_stride + r] = acc;
    }
  }
}

// The contract's formula element by element, reading the tiles through tiled_entry (the one decoder of the
// layout, checked bit for bit against the GGUF blocks by the repack test).
void scalar_tiled_matmul(const TiledWeight& w, const TiledActs& a, int64_t tile0, int64_t tile1, int64_t t0,
                         int64_t t1, float* y, int64_t y_stride) {
  if (w.k_quant()) {
    return scalar_k_matmul(w, a, tile0 * kTileRows, std::min(w.n_out, tile1 * kTileRows), t0, t1, y,
                           y_stride);
  }
  for (int64_t r = tile0 * kTileRows; r < std::min(w.n_out, tile1 * kTileRows); ++r) {
    for (int64_t t = t0; t < t1; ++t) {
      const int8_t* q = a.qs + t * a.kp;
      float acc = 0.0f;
      for (int64_t u = 0; u < a.n_units; ++u) {
        const int64_t i = t * a.n_units + u;
        int32_t sum = -w.int_offset() * a.isum[i];
        TiledEntry e;
        for (int64_t k = u * a.fold * kSubK; k < (u + 1) * a.fold * kSubK; ++k) {
          e = tiled_entry(w, r, k);  // one scale group holds the unit: its scale and offset are the same
          sum += e.code * q[k];
        }
        acc += float(sum) * (e.scale * a.dx[i]);
        if (w.float_offset()) acc += e.offset * a.am[i];
      }
      y[t * y_stride + r] = acc;
    }
  }
}

using TiledKernel = tiled_detail::Kernel;

// The kernels of the running ISA (base/cpu_isa.h): one table for the block kinds, one for the K-quants.
const IsaTable<TiledKernel>& kernels() {
  using namespace tiled_detail;
  static const IsaTable<TiledKernel> t = {
      {CpuIsa::Scalar, scalar_tiled_matmul},     {CpuIsa::Avx2, avx2_tiled_kernel()},
      {CpuIsa::AvxVnni, avxvnni_tiled_kernel()}, {CpuIsa::Avx512Vnni, avx512vnni_tiled_kernel()},
      {CpuIsa::Neon, neon_tiled_kernel()},       {CpuIsa::NeonDot, neondot_tiled_kernel()}};
  return t;
}
const IsaTable<TiledKernel>& k_kernels() {
  using namespace tiled_detail;
  static const IsaTable<TiledKernel> t = {
      {CpuIsa::Scalar, scalar_tiled_matmul},       {CpuIsa::Avx2, avx2_tiled_k_kernel()},
      {CpuIsa::AvxVnni, avxvnni_tiled_k_kernel()}, {CpuIsa::Avx512Vnni, avx512vnni_tiled_k_kernel()},
      {CpuIsa::Neon, neon_tiled_k_kernel()},       {CpuIsa::NeonDot, neondot_tiled_k_kernel()}};
  return t;
}

}  // namespace

size_t tiled_acts_bytes(int64_t n_in, int64_t n_tok) {
  return acts_layout(n_in, n_tok).total;
}

TiledActs prepare_tiled_acts(GgmlType act_type, int64_t fold, int64_t n_in, const uint8_t* xq,
                             size_t xq_stride, int64_t n_tok, int64_t t0, int64_t t1, void* scratch) {
  const bool q8_k = act_type == GgmlType::Q8_K;
  const bool units = !q8_k || fold > 0;  // the unit layout (fold 0: the K-quants' super-block layout)
  // A unit lies within one activation block: one sub-block of Q8_0 / Q8_1, a divisor of Q8_K's eight.
  const bool fold_ok = q8_k ? fold == 0 || (fold > 0 && (kSuperK / kSubK) % fold == 0) : fold == 1;
  if (n_in % (q8_k ? kSuperK : kSubK) != 0 ||
      (act_type != GgmlType::Q8_0 && act_type != GgmlType::Q8_1 && !q8_k) || !fold_ok) {
    fail("internal: tiled activations of {} values in {}, {} sub-blocks a unit", n_in, type_name(act_type),
         fold);
  }
  const int64_t n_sub = n_in / kSubK;
  const ActsLayout l = acts_layout(n_in, n_tok);
  auto* base = static_cast<uint8_t*>(scratch);
  TiledActs a;
  a.qs = reinterpret_cast<const int8_t*>(base + l.qs);
  a.dx = reinterpret_cast<const float*>(base + l.dx);
  a.isum = reinterpret_cast<const int32_t*>(base + l.isum);
  a.am = reinterpret_cast<const float*>(base + l.am);
  a.pairs = reinterpret_cast<const int32_t*>(base + l.am);
  a.kp = n_in;
  a.n_sub = n_sub;
  a.fold = fold;
  a.n_units = units ? n_sub / fold : 0;
  auto* qs = reinterpret_cast<int8_t*>(base + l.qs);
  auto* dx = reinterpret_cast<float*>(base + l.dx);
  auto* isum = reinterpret_cast<int32_t*>(base + l.isum);
  auto* am = reinterpret_cast<float*>(base + l.am);
  if (q8_k) {
    const int64_t n_sb = n_in / kSuperK;
    auto* pairs = reinterpret_cast<int32_t*>(base + l.am);
    const int64_t per_sb = units ? kSuperK / kSubK / fold : 0;  // units per super-block
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t c = 0; c < n_sb; ++c) {
        BlockQ8_K b;
        std::memcpy(&b, xq + size_t(t) * xq_stride + size_t(c) * sizeof b, sizeof b);
        std::memcpy(qs + t * a.kp + c * kSuperK, b.qs, kSuperK);
        if (units) {
          // One unit is fold * 32 quants of the super-block, all under its d.
          for (int64_t u = 0; u < per_sb; ++u) {
            const int64_t i = t * a.n_units + c * per_sb + u;
            int32_t sum = 0;
            for (int64_t e = u * fold * kSubK; e < (u + 1) * fold * kSubK; ++e) sum += b.qs[e];
            dx[i] = b.d;
            isum[i] = sum;
            am[i] = b.d * float(sum);
          }
          continue;
        }
        dx[t * n_sb + c] = b.d;
        int32_t* b16 = isum + t * (n_in / 16) + c * 16;
        for (int j = 0; j < 16; ++j) b16[j] = b.bsums[j];
        for (int p = 0; p < 4; ++p) {
          // Two sums of 32 (|b32| <= 4064) as the int16 halves of one word.
          const uint32_t lo = uint16_t(b16[4 * p] + b16[4 * p + 1]),
                         hi = uint16_t(b16[4 * p + 2] + b16[4 * p + 3]);
          pairs[t * (n_in / 64) + c * 4 + p] = int32_t(lo | (hi << 16));
        }
      }
    }
    return a;
  }
  const bool q8_1 = act_type == GgmlType::Q8_1;
  const size_t block = q8_1 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* row = xq + size_t(t) * xq_stride;
    for (int64_t s = 0; s < n_sub; ++s) {
      const uint8_t* b = row + size_t(s) * block;
      uint16_t d, sh = 0;
      std::memcpy(&d, b, 2);
      if (q8_1) std::memcpy(&sh, b + 2, 2);
      const int8_t* src = reinterpret_cast<const int8_t*>(b + (q8_1 ? 4 : 2));
      int32_t sum = 0;
      for (int e = 0; e < kSubK; ++e) sum += src[e];
      std::memcpy(qs + t * a.kp + s * kSubK, src, kSubK);
      const size_t i = size_t(t * n_sub + s);
      dx[i] = fp16_to_fp32(d);
      isum[i] = sum;
      am[i] = q8_1 ? fp16_to_fp32(sh) : dx[i] * float(sum);
    }
  }
  return a;
}

void tiled_matmul(const TiledWeight& w, const TiledActs& a, int64_t tile0, int64_t tile1, int64_t t0,
                  int64_t t1, float* y, int64_t y_stride) {
  if (a.n_sub != w.n_sub || a.fold != w.act_fold())
    fail("internal: tiled activations of {} blocks ({} a unit) for a weight of {} ({})", a.n_sub, a.fold,
         w.n_sub, w.act_fold());
  if (tile0 >= tile1 || t0 >= t1) return;
  (w.k_quant() ? k_kernels() : kernels()).get()(w, a, tile0, tile1, t0, t1, y, y_stride);
}

const char* tiled_isa_name() {
  return kernels().name();
}

}  // namespace tilellm
