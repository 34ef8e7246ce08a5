// Quantized activations and integer dot products (quants_q8.h): argument checks, ISA dispatch, and the
// portable scalar kernels. The scalar kernels are the reference: they follow the block formats (quants.h,
// quants_q8.h) literally, one block at a time, and the vector kernels (quants_q8_avx2.cpp) are tested against
// them and the NumPy fixtures of tests/reference/make_q8_cases.py.
//
// Arithmetic of one block's contribution (x = weight block, y = activation block, S = exact integer sum):
//   Q4_0, Q5_0, Q8_0:  (dx * dy) * S,                   S = sum (q_x - offset) * q_y
//   Q4_1, Q5_1:        (dx * dy) * S + mx * sy,          S = sum q_x * q_y
//   Q4_K, Q5_K:        (dx * dy) * S - (dminx * dy) * M, S = sum_s sc_s sum q_x q_y, M = sum_s mn_s bsum_s
//   Q6_K:              (dx * dy) * S,                    S = sum_k sc_k sum (q_x - 32) q_y
// dx * dy and mx * sy are exact when both are halves (11 + 11 significant bits); with a Q8_K float dy the
// product rounds once. S is exact in int32 (at most 2^27 in magnitude, Q6_K) and rounds at most once on
// conversion to float (only above 2^24). So a block contributes with at most three roundings before
// accumulation; the test's error bound counts them.
#include "format/quants_q8.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>

#include "base/cpu_isa.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/quants_kernels.h"
#include "format/quants_q8_kernels.h"

namespace tilellm {
namespace q8_detail {
namespace {

using quant_detail::k_scale_min;
using quant_detail::load_u16;
using quant_detail::load_u32;

inline float half_at(const uint8_t* p) {
  return fp16_to_fp32(load_u16(p));
}
inline float float_at(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, sizeof v);
}

// Round to nearest, ties to even, in the default rounding mode: what ggml's cvtps2dq / nearest_int do. The
// argument is already a rounded float product, so no multiply-add can be contracted into it.
inline int round_even(float v) {
  return static_cast<int>(std::nearbyint(v));
}

// ---- Activation quantizers ----

// Q8_0 and Q8_1 share the scale rule; kSum adds Q8_1's s.
template <bool kSum>
void quantize_q8_01(const float* x, uint8_t* out, int64_t n_blocks) {
  constexpr size_t kBytes = kSum ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  constexpr size_t kQs = kSum ? offsetof(BlockQ8_1, qs) : offsetof(BlockQ8_0, qs);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + 32 * b;
    uint8_t* ob = out + b * kBytes;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = round_even(xb[j] * id);
      ob[kQs + j] = static_cast<uint8_t>(static_cast<int8_t>(q));
      sum += q;
    }
    store_u16(ob, fp32_to_fp16(d));
    if constexpr (kSum) store_u16(ob + offsetof(BlockQ8_1, s), fp32_to_fp16(d * static_cast<float>(sum)));
  }
}

void quantize_q8_k(const float* x, uint8_t* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + 256 * b;
    uint8_t* ob = out + b * sizeof(BlockQ8_K);
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {  // strict: the first of equal magnitudes decides the sign
        amax = ax;
        max = xb[j];
      }
    }
    int8_t qs[256] = {};
    int16_t bsums[16] = {};
    float d = 0.0f;
    if (amax != 0.0f) {
      const float iscale = -127.0f / max;
      for (int j = 0; j < 256; ++j) qs[j] = static_cast<int8_t>(std::min(127, round_even(iscale * xb[j])));
      for (int k = 0; k < 16; ++k) {
        int s = 0;
        for (int l = 0; l < 16; ++l) s += qs[16 * k + l];
        bsums[k] = static_cast<int16_t>(s);
      }
      d = 1.0f / iscale;
    }
    std::memcpy(ob + offsetof(BlockQ8_K, d), &d, sizeof d);
    std::memcpy(ob + offsetof(BlockQ8_K, qs), qs, sizeof qs);
    std::memcpy(ob + offsetof(BlockQ8_K, bsums), bsums, sizeof bsums);
  }
}

void quantize_f32(const float* x, uint8_t* out, int64_t n) {
  std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
}
void quantize_f16(const float* x, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store_u16(out + 2 * i, fp32_to_fp16(x[i]));
}
void quantize_bf16(const float* x, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store_u16(out + 2 * i, fp32_to_bf16(x[i]));
}

// ---- Weight block decoders to integers ----

// The 32 signed or unsigned integer quants of a 32-element block, in element order.
void ints_q4(const uint8_t* qs, int offset, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 15) - offset;
    q[j + 16] = (qs[j] >> 4) - offset;
  }
}
void ints_q5(const uint8_t* qh_bytes, const uint8_t* qs, int offset, int* q) {
  const uint32_t qh = load_u32(qh_bytes);
  ints_q4(qs, 0, q);
  for (int j = 0; j < 32; ++j) q[j] += static_cast<int>(((qh >> j) & 1u) << 4) - offset;
}

inline int dot32(const int* q, const uint8_t* yq) {
  int s = 0;
  for (int j = 0; j < 32; ++j) s += q[j] * static_cast<int8_t>(yq[j]);
  return s;
}

// ---- Per-block contributions (formulas in the file comment) ----

// Q8_0 activations.
float block_q4_0(const uint8_t* x, const uint8_t* y) {
  int q[32];
  ints_q4(x + offsetof(BlockQ4_0, qs), 8, q);
  const int s = dot32(q, y + offsetof(BlockQ8_0, qs));
  return (half_at(x) * half_at(y)) * static_cast<float>(s);
}
float block_q5_0(const uint8_t* x, const uint8_t* y) {
  int q[32];
  ints_q5(x + offsetof(BlockQ5_0, qh), x + offsetof(BlockQ5_0, qs), 16, q);
  const int s = dot32(q, y + offsetof(BlockQ8_0, qs));
  return (half_at(x) * half_at(y)) * static_cast<float>(s);
}
float block_q8_0(const uint8_t* x, const uint8_t* y) {
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(x[offsetof(BlockQ8_0, qs) + j]);
  const int s = dot32(q, y + offsetof(BlockQ8_0, qs));
  return (half_at(x) * half_at(y)) * static_cast<float>(s);
}

// Q8_1 activations.
float block_q4_1(const uint8_t* x, const uint8_t* y) {
  int q[32];
  ints_q4(x + offsetof(BlockQ4_1, qs), 0, q);
  const int s = dot32(q, y + offsetof(BlockQ8_1, qs));
  return (half_at(x) * half_at(y)) * static_cast<float>(s) +
         half_at(x + offsetof(BlockQ4_1, m)) * half_at(y + offsetof(BlockQ8_1, s));
}
float block_q5_1(const uint8_t* x, const uint8_t* y) {
  int q[32];
  ints_q5(x + offsetof(BlockQ5_1, qh), x + offsetof(BlockQ5_1, qs), 0, q);
  const int s = dot32(q, y + offsetof(BlockQ8_1, qs));
  return (half_at(x) * half_at(y)) * static_cast<float>(s) +
         half_at(x + offsetof(BlockQ5_1, m)) * half_at(y + offsetof(BlockQ8_1, s));
}

// Q8_K activations. Q4_K and Q5_K share everything but the fifth bit (qh == nullptr for Q4_K).
float block_q45_k(const uint8_t* x, const uint8_t* scales, const uint8_t* qh, const uint8_t* qs,
                  const uint8_t* y) {
  const auto* yq = reinterpret_cast<const int8_t*>(y + offsetof(BlockQ8_K, qs));
  const uint8_t* bsums = y + offsetof(BlockQ8_K, bsums);
  int64_t s = 0, m = 0;
  for (int sb = 0; sb < 8; ++sb) {
    int sc, mn;
    k_scale_min(scales, sb, &sc, &mn);
    const uint8_t* q = qs + 32 * (sb / 2);
    const int shift = 4 * (sb % 2);
    int sum = 0;
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 15;
      if (qh) v |= ((qh[l] >> sb) & 1) << 4;
      sum += v * yq[32 * sb + l];
    }
    s += sc * sum;
    m += mn * (static_cast<int16_t>(load_u16(bsums + 4 * sb)) +
               static_cast<int16_t>(load_u16(bsums + 4 * sb + 2)));
  }
  const float dy = float_at(y + offsetof(BlockQ8_K, d));
  const float d = half_at(x) * dy, dmin = half_at(x + 2) * dy;
  return d * static_cast<float>(s) - dmin * static_cast<float>(m);
}
float block_q4_k(const uint8_t* x, const uint8_t* y) {
  return block_q45_k(x, x + offsetof(BlockQ4_K, scales), nullptr, x + offsetof(BlockQ4_K, qs), y);
}
float block_q5_k(const uint8_t* x, const uint8_t* y) {
  return block_q45_k(x, x + offsetof(BlockQ5_K, scales), x + offsetof(BlockQ5_K, qh),
                     x + offsetof(BlockQ5_K, qs), y);
}

float block_q6_k(const uint8_t* x, const uint8_t* y) {
  const auto* yq = reinterpret_cast<const int8_t*>(y + offsetof(BlockQ8_K, qs));
  const auto* scales = reinterpret_cast<const int8_t*>(x + offsetof(BlockQ6_K, scales));
  int64_t s = 0;
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = x + offsetof(BlockQ6_K, ql) + 64 * h;
    const uint8_t* qh = x + offsetof(BlockQ6_K, qh) + 32 * h;
    int sums[8] = {};  // per 16-element sub-block of this half
    for (int l = 0; l < 32; ++l) {
      const int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4), (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                        (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | ((qh[l] >> 6) << 4)};
      for (int k = 0; k < 4; ++k) {
        const int e = l + 32 * k;  // element within the half
        sums[e / 16] += (q[k] - 32) * yq[128 * h + e];
      }
    }
    for (int k = 0; k < 8; ++k) s += scales[8 * h + k] * sums[k];
  }
  const float d = half_at(x + offsetof(BlockQ6_K, d)) * float_at(y + offsetof(BlockQ8_K, d));
  return d * static_cast<float>(s);
}

// ---- Row kernels ----

// Blocks accumulate in four partial sums (block b in sum b % 4): shorter rounding chains.
template <size_t kWBytes, size_t kABytes, float (*Block)(const uint8_t*, const uint8_t*)>
void dot_blocks(const uint8_t* row, int64_t n_blocks, const uint8_t* xq, size_t xq_stride, int n_vec,
                float* y, int64_t y_stride) {
  for (int j = 0; j < n_vec; ++j) {
    const uint8_t* a = xq + j * xq_stride;
    float acc[4] = {};
    for (int64_t b = 0; b < n_blocks; ++b) acc[b & 3] += Block(row + b * kWBytes, a + b * kABytes);
    y[j * y_stride] = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  }
}

// Plain float types: element i in partial sum i % 8, as in quants.cpp.
template <float (*W)(const uint8_t*), size_t kWBytes, float (*A)(const uint8_t*), size_t kABytes>
void dot_plain(const uint8_t* row, int64_t n, const uint8_t* xq, size_t xq_stride, int n_vec, float* y,
               int64_t y_stride) {
  for (int j = 0; j < n_vec; ++j) {
    const uint8_t* a = xq + j * xq_stride;
    float acc[8] = {};
    for (int64_t i = 0; i < n; ++i) acc[i & 7] += W(row + i * kWBytes) * A(a + i * kABytes);
    y[j * y_stride] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  }
}

inline float bf16_at(const uint8_t* p) {
  return bf16_to_fp32(load_u16(p));
}

const Q8KernelTable kScalar = {
    "scalar",
    {quantize_f32, quantize_f16, quantize_bf16, quantize_q8_01<false>, quantize_q8_01<true>, quantize_q8_k},
    {
        dot_plain<float_at, 4, float_at, 4>,
        dot_plain<half_at, 2, half_at, 2>,
        dot_plain<bf16_at, 2, bf16_at, 2>,
        dot_blocks<sizeof(BlockQ4_0), sizeof(BlockQ8_0), block_q4_0>,
        dot_blocks<sizeof(BlockQ4_1), sizeof(BlockQ8_1), block_q4_1>,
        dot_blocks<sizeof(BlockQ5_0), sizeof(BlockQ8_0), block_q5_0>,
        dot_blocks<sizeof(BlockQ5_1), sizeof(BlockQ8_1), block_q5_1>,
        dot_blocks<sizeof(BlockQ8_0), sizeof(BlockQ8_0), block_q8_0>,
        dot_blocks<sizeof(BlockQ4_K), sizeof(BlockQ8_K), block_q4_k>,
        dot_blocks<sizeof(BlockQ5_K), sizeof(BlockQ8_K), block_q5_k>,
        dot_blocks<sizeof(BlockQ6_K), sizeof(BlockQ8_K), block_q6_k>,
    },
};

}  // namespace

const Q8KernelTable& scalar_q8_kernels() {
  return kScalar;
}

}  // namespace q8_detail

namespace {

using q8_detail::Q8KernelTable;

// What the dispatcher needs to know of a weight type, without a table search on the hot path (dot_row_q runs
// once per output row).
struct WeightInfo {
  int slot;           // q8_detail::WeightSlot, -1 when unsupported
  int act_slot;       // q8_detail::ActSlot of its activation type
  GgmlType act_type;  // activation_type()
  int block_shift;    // log2 of the block size in elements (0 for plain types)
};

WeightInfo weight_info(GgmlType t) {
  using namespace q8_detail;
  switch (t) {
    case GgmlType::F32:
      return {kF32, kActF32, GgmlType::F32, 0};
    case GgmlType::F16:
      return {kF16, kActF16, GgmlType::F16, 0};
    case GgmlType::BF16:
      return {kBF16, kActBF16, GgmlType::BF16, 0};
    case GgmlType::Q4_0:
      return {kQ4_0, kActQ8_0, GgmlType::Q8_0, 5};
    case GgmlType::Q4_1:
      return {kQ4_1, kActQ8_1, GgmlType::Q8_1, 5};
    case GgmlType::Q5_0:
      return {kQ5_0, kActQ8_0, GgmlType::Q8_0, 5};
    case GgmlType::Q5_1:
      return {kQ5_1, kActQ8_1, GgmlType::Q8_1, 5};
    case GgmlType::Q8_0:
      return {kQ8_0, kActQ8_0, GgmlType::Q8_0, 5};
    case GgmlType::Q4_K:
      return {kQ4_K, kActQ8_K, GgmlType::Q8_K, 8};
    case GgmlType::Q5_K:
      return {kQ5_K, kActQ8_K, GgmlType::Q8_K, 8};
    case GgmlType::Q6_K:
      return {kQ6_K, kActQ8_K, GgmlType::Q8_K, 8};
    default:
      return {-1, -1, t, 0};
  }
}

// Activation slot and log2 block size of an activation type; slot -1 when t is not an activation format.
int act_slot_of(GgmlType t, int* block_shift) {
  using namespace q8_detail;
  *block_shift = 0;
  switch (t) {
    case GgmlType::F32:
      return kActF32;
    case GgmlType::F16:
      return kActF16;
    case GgmlType::BF16:
      return kActBF16;
    case GgmlType::Q8_0:
      *block_shift = 5;
      return kActQ8_0;
    case GgmlType::Q8_1:
      *block_shift = 5;
      return kActQ8_1;
    case GgmlType::Q8_K:
      *block_shift = 8;
      return kActQ8_K;
    default:
      return -1;
  }
}

// The table of the running ISA (base/cpu_isa.h).
const Q8KernelTable& active() {
  static const IsaTable<const Q8KernelTable*> tables = {
      {CpuIsa::Scalar, &q8_detail::scalar_q8_kernels()},
      {CpuIsa::Avx2, q8_detail::avx2_q8_kernels()},
      {CpuIsa::AvxVnni, q8_detail::avxvnni_q8_kernels()},
      {CpuIsa::Avx512Vnni, q8_detail::avx512vnni_q8_kernels()},
      {CpuIsa::Neon, q8_detail::neon_q8_kernels()},
      {CpuIsa::NeonDot, q8_detail::neondot_q8_kernels()}};
  return *tables.get();
}

// Name of a type id for messages, also for ids this engine does not know.
std::string type_label(GgmlType t) {
  const TypeTraits* tr = type_traits(static_cast<uint32_t>(t));
  return tr ? std::string(tr->name) : "type id " + std::to_string(static_cast<uint32_t>(t));
}

// Validates a weight type and row length; returns its info and sets the number of blocks.
WeightInfo checked_weight(GgmlType t, int64_t n, const char* op, int64_t* n_blocks) {
  const WeightInfo info = weight_info(t);
  if (info.slot < 0) fail("{}: weight type {} has no quantized-activation kernel", op, type_label(t));
  const int64_t block = int64_t{1} << info.block_shift;
  if (n < 0 || (n & (block - 1)) != 0) {
    fail("{}: row length {} is not a multiple of the {} block size {}", op, n, type_label(t), block);
  }
  *n_blocks = n >> info.block_shift;
  return info;
}

}  // namespace

GgmlType activation_type(GgmlType weight_type) {
  const WeightInfo info = weight_info(weight_type);
  if (info.slot < 0)
    fail("activation_type: weight type {} has no activation format", type_label(weight_type));
  return info.act_type;
}

size_t activation_row_size(GgmlType act_type, int64_t n) {
  int shift;
  if (act_slot_of(act_type, &shift) < 0) {
    fail("activation_row_size: {} is not an activation format (Q8_0, Q8_1, Q8_K, F16, BF16, F32)",
         type_label(act_type));
  }
  const int64_t block = int64_t{1} << shift;
  if (n < 0 || (n & (block - 1)) != 0) {
    fail("activation_row_size: row length {} is not a multiple of the {} block size {}", n,
         type_label(act_type), block);
  }
  return row_size(act_type, n);
}

void quantize_activations(GgmlType act_type, const float* x, void* out, int64_t n) {
  int shift;
  const int slot = act_slot_of(act_type, &shift);
  if (slot < 0) {
    fail("quantize_activations: {} is not an activation format (Q8_0, Q8_1, Q8_K, F16, BF16, F32)",
         type_label(act_type));
  }
  const int64_t block = int64_t{1} << shift;
  if (n < 0 || (n & (block - 1)) != 0) {
    fail("quantize_activations: row length {} is not a multiple of the {} block size {}", n,
         type_label(act_type), block);
  }
  active().quantize[slot](x, static_cast<uint8_t*>(out), n >> shift);
}

void dequantize_activations(GgmlType act_type, const void* xq, float* out, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(xq);
  const size_t bytes = activation_row_size(act_type, n);  // checks the format and the length
  switch (act_type) {
    case GgmlType::Q8_0:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::F32:
      return dequantize_row(act_type, p, out, n);  // the weight formats of the same bytes
    case GgmlType::Q8_1:
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ8_1 blk;
        std::memcpy(&blk, p + size_t(b) * sizeof blk, sizeof blk);
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = fp16_to_fp32(blk.d) * float(blk.qs[j]);
      }
      return;
    case GgmlType::Q8_K:
      for (int64_t b = 0; b < n / 256; ++b) {
        BlockQ8_K blk;
        std::memcpy(&blk, p + size_t(b) * sizeof blk, sizeof blk);
        for (int j = 0; j < 256; ++j) out[b * 256 + j] = blk.d * float(blk.qs[j]);
      }
      return;
    default:
      break;
  }
  (void)bytes;
  fail("internal: dequantize_activations of {}", type_label(act_type));
}

float dot_row_q(GgmlType weight_type, const void* row, const void* xq, int64_t n) {
  int64_t n_blocks;
  const WeightInfo info = checked_weight(weight_type, n, "dot_row_q", &n_blocks);
  float y;
  active().dot[info.slot](static_cast<const uint8_t*>(row), n_blocks, static_cast<const uint8_t*>(xq), 0, 1,
                          &y, 1);
  return y;
}

void dot_rows_q(GgmlType weight_type, const void* rows, size_t row_bytes, int64_t n_rows, int64_t n,
                const void* xq, float* y) {
  int64_t n_blocks;
  const WeightInfo info = checked_weight(weight_type, n, "dot_rows_q", &n_blocks);
  const auto dot = active().dot[info.slot];
  const uint8_t* r = static_cast<const uint8_t*>(rows);
  for (int64_t i = 0; i < n_rows; ++i)
    dot(r + size_t(i) * row_bytes, n_blocks, static_cast<const uint8_t*>(xq), 0, 1, y + i, 1);
}

void dot_row_q_multi(GgmlType weight_type, const void* row, int64_t n, const void* xq, size_t xq_stride,
                     int n_vec, float* y, int64_t y_stride) {
  int64_t n_blocks;
  const WeightInfo info = checked_weight(weight_type, n, "dot_row_q_multi", &n_blocks);
  if (n_vec <= 0) return;
  active().dot[info.slot](static_cast<const uint8_t*>(row), n_blocks, static_cast<const uint8_t*>(xq),
                          xq_stride, n_vec, y, y_stride);
}

const char* quant_q8_isa_name() {
  return active().isa;
}

}  // namespace tilellm
