// Row dequantization and dot products for the GGML block formats: argument checks, ISA dispatch, and the
// portable scalar kernels. The scalar kernels are the reference: they follow the format definitions in
// quants.h literally, one block at a time, and the vector kernels (quants_avx2.cpp, quants_neon.cpp) are
// tested against them and the gguf package.
//
// Why the dequantized values are exact, and the same whether or not a compiler fuses a multiply and an add:
// every product in a format definition is exact in float. A half has 11 significant bits and every integer
// factor here (quant, 6-bit scale, int8 scale, (q - 32) * scale for Q6_K) has at most 13, so each product
// fits in 24 bits. The only rounding is the final "+ m" / "- dmin*mn", which rounds once either way.
#include "format/quants.h"

#include <algorithm>
#include <atomic>

#include "base/cpu_isa.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/quants_kernels.h"

namespace tilellm {
namespace quant_detail {
namespace {

// ---- Scalar block decoders: one block -> its floats ----

void decode_q4_0(const uint8_t* b, float* y) {
  const float d = fp16_to_fp32(load_u16(b + offsetof(BlockQ4_0, d)));
  const uint8_t* qs = b + offsetof(BlockQ4_0, qs);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 15) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

void decode_q4_1(const uint8_t* b, float* y) {
  const float d = fp16_to_fp32(load_u16(b + offsetof(BlockQ4_1, d)));
  const float m = fp16_to_fp32(load_u16(b + offsetof(BlockQ4_1, m)));
  const uint8_t* qs = b + offsetof(BlockQ4_1, qs);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 15) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// Q5_0 / Q5_1 share the bit layout; the 5-bit value of element j.
inline int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int low = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
  return low | static_cast<int>(((qh >> j) & 1u) << 4);
}

void decode_q5_0(const uint8_t* b, float* y) {
  const float d = fp16_to_fp32(load_u16(b + offsetof(BlockQ5_0, d)));
  const uint32_t qh = load_u32(b + offsetof(BlockQ5_0, qh));
  const uint8_t* qs = b + offsetof(BlockQ5_0, qs);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q5_value(qs, qh, j) - 16);
}

void decode_q5_1(const uint8_t* b, float* y) {
  const float d = fp16_to_fp32(load_u16(b + offsetof(BlockQ5_1, d)));
  const float m = fp16_to_fp32(load_u16(b + offsetof(BlockQ5_1, m)));
  const uint32_t qh = load_u32(b + offsetof(BlockQ5_1, qh));
  const uint8_t* qs = b + offsetof(BlockQ5_1, qs);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q5_value(qs, qh, j)) + m;
}

void decode_q8_0(const uint8_t* b, float* y) {
  const float d = fp16_to_fp32(load_u16(b + offsetof(BlockQ8_0, d)));
  const uint8_t* qs = b + offsetof(BlockQ8_0, qs);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(qs[j]));
}

void decode_q4_k(const uint8_t* b, float* y) {
  const float d = fp16_to_fp32(load_u16(b + offsetof(BlockQ4_K, d)));
  const float dmin = fp16_to_fp32(load_u16(b + offsetof(BlockQ4_K, dmin)));
  const uint8_t* scales = b + offsetof(BlockQ4_K, scales);
  const uint8_t* qs = b + offsetof(BlockQ4_K, qs);
  for (int s = 0; s < 8; ++s) {
    int sc, mn;
    k_scale_min(scales, s, &sc, &mn);
    const float ds = d * static_cast<float>(sc);
    const float ms = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) y[32 * s + l] = ds * static_cast<float>((q[l] >> shift) & 15) - ms;
  }
}

void decode_q5_k(const uint8_t* b, float* y) {
  const float d = fp16_to_fp32(load_u16(b + offsetof(BlockQ5_K, d)));
  const float dmin = fp16_to_fp32(load_u16(b + offsetof(BlockQ5_K, dmin)));
  const uint8_t* scales = b + offsetof(BlockQ5_K, scales);
  const uint8_t* qh = b + offsetof(BlockQ5_K, qh);
  const uint8_t* qs = b + offsetof(BlockQ5_K, qs);
  for (int s = 0; s < 8; ++s) {
    int sc, mn;
    k_scale_min(scales, s, &sc, &mn);
    const float ds = d * static_cast<float>(sc);
    const float ms = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 15) | (((qh[l] >> s) & 1) << 4);
      y[32 * s + l] = ds * static_cast<float>(v) - ms;
    }
  }
}

void decode_q6_k(const uint8_t* b, float* y) {
  const float d = fp16_to_fp32(load_u16(b + offsetof(BlockQ6_K, d)));
  const uint8_t* scales = b + offsetof(BlockQ6_K, scales);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b + offsetof(BlockQ6_K, ql) + 64 * h;
    const uint8_t* qh = b + offsetof(BlockQ6_K, qh) + 32 * h;
    const int8_t* sc = reinterpret_cast<const int8_t*>(scales) + 8 * h;
    float* yh = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4), (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                        (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | ((qh[l] >> 6) << 4)};
      for (int k = 0; k < 4; ++k) {
        const int e = l + 32 * k;
        yh[e] = (d * static_cast<float>(sc[e / 16])) * static_cast<float>(q[k] - 32);
      }
    }
  }
}

// ---- Row kernels built from the decoders ----

// Eight partial sums, element i always in sum i % 8: shorter rounding chains (n/8) and room for the compiler
// to use SSE2 even in this baseline build.
struct Acc8 {
  float s[8] = {};
  void add(const float* w, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) s[i & 7] += w[i] * x[i];
  }
  float total() const { return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])); }
};

template <int64_t kBlock, size_t kBytes, void (*Decode)(const uint8_t*, float*)>
void dequant_blocks(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) Decode(src + b * kBytes, dst + b * kBlock);
}

// One block decoded into a block-sized buffer, then applied: fused per block, no row temporary.
template <int64_t kBlock, size_t kBytes, void (*Decode)(const uint8_t*, float*)>
float dot_blocks(const uint8_t* row, const float* x, int64_t n_blocks) {
  Acc8 acc;
  float w[kBlock];
  for (int64_t b = 0; b < n_blocks; ++b) {
    Decode(row + b * kBytes, w);
    acc.add(w, x + b * kBlock, kBlock);
  }
  return acc.total();
}

// Plain float types: "blocks" are elements; decode runs of 64.
template <typename T, float (*Convert)(T)>
void dequant_plain(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    dst[i] = Convert(v);
  }
}

template <typename T, float (*Convert)(T)>
float dot_plain(const uint8_t* row, const float* x, int64_t n) {
  Acc8 acc;
  float w[64];
  for (int64_t i = 0; i < n; i += 64) {
    const int64_t len = std::min<int64_t>(64, n - i);
    dequant_plain<T, Convert>(row + i * sizeof(T), w, len);
    acc.add(w, x + i, len);  // len is a multiple of 8 except at the end, so element i stays in sum i % 8
  }
  return acc.total();
}

float identity(float v) {
  return v;
}

void dot_f32_accumulate_scalar(const float* w, int64_t n, const float* x, int64_t x_stride, int n_vec,
                               float* y, int64_t y_stride) {
  for (int j = 0; j < n_vec; ++j) {
    Acc8 acc;
    acc.add(w, x + j * x_stride, n);
    y[j * y_stride] += acc.total();
  }
}

template <int64_t kBlock, size_t kBytes, void (*Decode)(const uint8_t*, float*)>
constexpr RowKernels block_kernels() {
  return {dequant_blocks<kBlock, kBytes, Decode>, dot_blocks<kBlock, kBytes, Decode>};
}

const KernelTable kScalar = {
    "scalar",
    {
        {dequant_plain<float, identity>, dot_plain<float, identity>},
        {dequant_plain<uint16_t, fp16_to_fp32>, dot_plain<uint16_t, fp16_to_fp32>},
        {dequant_plain<uint16_t, bf16_to_fp32>, dot_plain<uint16_t, bf16_to_fp32>},
        block_kernels<32, sizeof(BlockQ4_0), decode_q4_0>(),
        block_kernels<32, sizeof(BlockQ4_1), decode_q4_1>(),
        block_kernels<32, sizeof(BlockQ5_0), decode_q5_0>(),
        block_kernels<32, sizeof(BlockQ5_1), decode_q5_1>(),
        block_kernels<32, sizeof(BlockQ8_0), decode_q8_0>(),
        block_kernels<kQK_K, sizeof(BlockQ4_K), decode_q4_k>(),
        block_kernels<kQK_K, sizeof(BlockQ5_K), decode_q5_k>(),
        block_kernels<kQK_K, sizeof(BlockQ6_K), decode_q6_k>(),
    },
    dot_f32_accumulate_scalar,
};

}  // namespace

const KernelTable& scalar_kernels() {
  return kScalar;
}

}  // namespace quant_detail

namespace {

using quant_detail::KernelTable;

int slot_of(GgmlType t) {
  using namespace quant_detail;
  switch (t) {
    case GgmlType::F32:
      return kF32;
    case GgmlType::F16:
      return kF16;
    case GgmlType::BF16:
      return kBF16;
    case GgmlType::Q4_0:
      return kQ4_0;
    case GgmlType::Q4_1:
      return kQ4_1;
    case GgmlType::Q5_0:
      return kQ5_0;
    case GgmlType::Q5_1:
      return kQ5_1;
    case GgmlType::Q8_0:
      return kQ8_0;
    case GgmlType::Q4_K:
      return kQ4_K;
    case GgmlType::Q5_K:
      return kQ5_K;
    case GgmlType::Q6_K:
      return kQ6_K;
    default:
      return -1;
  }
}

// The table the running ISA uses (base/cpu_isa.h): AVX2 on every x86 level, Advanced SIMD on ARM.
const KernelTable& active() {
  static const IsaTable<const KernelTable*> tables = {{CpuIsa::Scalar, &quant_detail::scalar_kernels()},
                                                      {CpuIsa::Avx2, quant_detail::avx2_kernels()},
                                                      {CpuIsa::Neon, quant_detail::neon_kernels()}};
  return *tables.get();
}

// Validates (t, n) and returns the kernel slot and the number of blocks.
int checked_slot(GgmlType t, int64_t n, const char* op, int64_t* n_blocks) {
  const int slot = slot_of(t);
  if (slot < 0) fail("{}: tensor type {} is not supported by the CPU quant kernels", op, type_name(t));
  const int64_t block = type_traits(t).block_size;
  if (n < 0 || n % block != 0) {
    fail("{}: row length {} is not a multiple of the {} block size {}", op, n, type_name(t), block);
  }
  *n_blocks = n / block;
  return slot;
}

}  // namespace

bool is_supported(GgmlType t) {
  return slot_of(t) >= 0;
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  int64_t n_blocks;
  const int slot = checked_slot(t, n, "dequantize_row", &n_blocks);
  active().rows[slot].dequant(static_cast<const uint8_t*>(src), dst, n_blocks);
}

float dot_row(GgmlType t, const void* row, const float* x, int64_t n) {
  int64_t n_blocks;
  const int slot = checked_slot(t, n, "dot_row", &n_blocks);
  return active().rows[slot].dot(static_cast<const uint8_t*>(row), x, n_blocks);
}

void dot_row_multi(GgmlType t, const void* row, int64_t n, const float* x, int64_t x_stride, int n_vec,
                   float* y, int64_t y_stride) {
  int64_t n_blocks;
  const int slot = checked_slot(t, n, "dot_row_multi", &n_blocks);
  const KernelTable& k = active();
  for (int j = 0; j < n_vec; ++j) y[j * y_stride] = 0.0f;
  const auto* src = static_cast<const uint8_t*>(row);
  if (t == GgmlType::F32) {  // nothing to decode: apply the row directly
    k.dot_f32_accumulate(reinterpret_cast<const float*>(src), n, x, x_stride, n_vec, y, y_stride);
    return;
  }
  // Decode kChunk weights once into an L1-resident buffer, then run them against every vector. The chunk is a
  // multiple of every block size (32, 256) and small enough (4 KiB) to stay in L1 next to the x slices.
  constexpr int64_t kChunk = 1024;
  alignas(64) float w[kChunk];
  const TypeTraits& tr = type_traits(t);
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    k.rows[slot].dequant(src + (i / tr.block_size) * tr.type_size, w, len / tr.block_size);
    k.dot_f32_accumulate(w, len, x + i, x_stride, n_vec, y, y_stride);
  }
}

bool has_code_groups(GgmlType t) {
  return t == GgmlType::Q5_0 || t == GgmlType::Q5_1 || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K;
}

void row_code_groups(GgmlType t, const void* src, int64_t n, int8_t* codes, float* scale, float* offset) {
  using namespace quant_detail;
  if (!has_code_groups(t)) fail("row_code_groups: {} has no code-group form", type_name(t));
  const TypeTraits& tr = type_traits(t);
  if (n <= 0 || n % tr.block_size != 0)
    fail("row_code_groups: {} elements are not whole {} blocks", n, type_name(t));
  const auto* row = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / tr.block_size; ++b) {
    const uint8_t* blk = row + b * tr.type_size;
    int8_t* c = codes + b * tr.block_size;
    float* sc = scale + b * tr.block_size / 16;
    float* of = offset + b * tr.block_size / 16;
    if (t == GgmlType::Q5_0 || t == GgmlType::Q5_1) {
      const bool q50 = t == GgmlType::Q5_0;
      const float d = fp16_to_fp32(load_u16(blk));
      // -0 adds nothing and keeps a product's sign, so the sum is the product bit for bit (+0 would turn
      // a -0 weight into +0).
      const float m = q50 ? -0.0f : fp16_to_fp32(load_u16(blk + offsetof(BlockQ5_1, m)));
      const uint32_t qh = load_u32(blk + (q50 ? offsetof(BlockQ5_0, qh) : offsetof(BlockQ5_1, qh)));
      const uint8_t* qs = blk + (q50 ? offsetof(BlockQ5_0, qs) : offsetof(BlockQ5_1, qs));
      for (int j = 0; j < 32; ++j) c[j] = int8_t(q5_value(qs, qh, j) - (q50 ? 16 : 0));
      sc[0] = sc[1] = d;
      of[0] = of[1] = m;
    } else if (t == GgmlType::Q6_K) {
      const float d = fp16_to_fp32(load_u16(blk + offsetof(BlockQ6_K, d)));
      const auto* scales = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = blk + offsetof(BlockQ6_K, ql) + 64 * h;
        const uint8_t* qh = blk + offsetof(BlockQ6_K, qh) + 32 * h;
        for (int l = 0; l < 32; ++l) {
          const int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4), (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                            (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                            (ql[l + 32] >> 4) | ((qh[l] >> 6) << 4)};
          for (int k = 0; k < 4; ++k) c[128 * h + l + 32 * k] = int8_t(q[k] - 32);
        }
      }
      for (int g = 0; g < 16; ++g) {
        sc[g] = d * static_cast<float>(scales[g]);
        of[g] = -0.0f;  // as Q5_0's
      }
    } else {  // Q4_K, Q5_K
      const bool q5 = t == GgmlType::Q5_K;
      const float d = fp16_to_fp32(load_u16(blk));
      const float dmin = fp16_to_fp32(load_u16(blk + 2));
      const uint8_t* scales = blk + 4;
      const uint8_t* qs = blk + (q5 ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs));
      const uint8_t* qh = blk + offsetof(BlockQ5_K, qh);
      for (int sb = 0; sb < 8; ++sb) {
        int scv, mn;
        k_scale_min(scales, sb, &scv, &mn);
        const uint8_t* q = qs + 32 * (sb / 2);
        const int shift = 4 * (sb % 2);
        for (int l = 0; l < 32; ++l) {
          const int v = ((q[l] >> shift) & 15) | (q5 ? ((qh[l] >> sb) & 1) << 4 : 0);
          c[32 * sb + l] = int8_t(v);
        }
        sc[2 * sb] = sc[2 * sb + 1] = d * static_cast<float>(scv);
        of[2 * sb] = of[2 * sb + 1] = -(dmin * static_cast<float>(mn));
      }
    }
  }
}

const char* quant_isa_name() {
  return active().isa;
}

}  // namespace tilellm
