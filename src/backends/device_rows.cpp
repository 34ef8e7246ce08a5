// The GPU backends' device rows (device_rows.h): the layouts' writers and the conversion of a weight's rows.
#include "backends/device_rows.h"

#include <cstring>

#include "base/error.h"
#include "base/fp16.h"
#include "format/quants.h"

namespace tilellm {

// The Kq8 device row (kernels/quants.cl): [n_in] signed codes, then [n_in / 16] (float scale, float offset),
// padded to 16 bytes; written from the file's row by row_code_groups (exact).
size_t kq8_row_bytes(int64_t n_in) {
  return (size_t(n_in) + size_t(n_in / 16) * 8 + 15) / 16 * 16;
}

void kq8_row(GgmlType t, const uint8_t* src, int64_t n_in, uint8_t* dst, std::vector<float>& scale,
             std::vector<float>& offset) {
  scale.resize(size_t(n_in / 16));
  offset.resize(size_t(n_in / 16));
  std::memset(dst, 0, kq8_row_bytes(n_in));
  row_code_groups(t, src, n_in, reinterpret_cast<int8_t*>(dst), scale.data(), offset.data());
  for (int64_t g = 0; g < n_in / 16; ++g) {
    std::memcpy(dst + n_in + 8 * g, &scale[size_t(g)], 4);
    std::memcpy(dst + n_in + 8 * g + 4, &offset[size_t(g)], 4);
  }
}

// The Kq4 device row (kernels/quants.cl), Q4_K only: [n_in / 32][16] code bytes in Q4_0's nibble order, then
// [n_in / 32] (float scale, float offset), padded to 16 bytes; from row_code_groups, whose 16-weight groups
// come in pairs sharing Q4_K's per-32 (scale, min).
size_t kq4_row_bytes(int64_t n_in) {
  return (size_t(n_in / 2) + size_t(n_in / 32) * 8 + 15) / 16 * 16;
}

void kq4_row(const uint8_t* src, int64_t n_in, uint8_t* dst, std::vector<int8_t>& codes,
             std::vector<float>& scale, std::vector<float>& offset) {
  codes.resize(size_t(n_in));
  scale.resize(size_t(n_in / 16));
  offset.resize(size_t(n_in / 16));
  std::memset(dst, 0, kq4_row_bytes(n_in));
  row_code_groups(GgmlType::Q4_K, src, n_in, codes.data(), scale.data(), offset.data());
  const int64_t nb = n_in / 32;
  for (int64_t b = 0; b < nb; ++b) {
    const size_t g = size_t(2 * b);
    // The same bits by construction (a file's NaN scale included, which != would call different).
    if (std::memcmp(&scale[g], &scale[g + 1], 4) != 0 || std::memcmp(&offset[g], &offset[g + 1], 4) != 0)
      fail("internal: Q4_K's 16-weight groups {} and {} differ in scale or offset", g, g + 1);
    for (int j = 0; j < 16; ++j) {
      const int lo = codes[size_t(32 * b + j)], hi = codes[size_t(32 * b + 16 + j)];
      dst[16 * b + j] = uint8_t(lo | (hi << 4));
    }
    std::memcpy(dst + 16 * nb + 8 * b, &scale[g], 4);
    std::memcpy(dst + 16 * nb + 8 * b + 4, &offset[g], 4);
  }
}

// The Q4K device row (device_rows.h): Q4_K's codes regrouped by 32 in Q4_0's nibble order, and each
// super-block's d, dmin and unpacked 6-bit scales and mins (quants.h BlockQ4_K says how they are packed).
size_t q4k_row_bytes(int64_t n_in) {
  return (size_t(n_in / 2) + size_t(n_in / 256) * 20 + 15) / 16 * 16;
}

void q4k_row(const uint8_t* src, int64_t n_in, uint8_t* dst) {
  std::memset(dst, 0, q4k_row_bytes(n_in));
  const int64_t nb = n_in / 32;
  for (int64_t sb = 0; sb < n_in / 256; ++sb) {
    const uint8_t* blk = src + size_t(sb) * sizeof(BlockQ4_K);
    const uint8_t* scales = blk + offsetof(BlockQ4_K, scales);
    const uint8_t* qs = blk + offsetof(BlockQ4_K, qs);
    uint8_t* par = dst + 16 * nb + 20 * sb;
    std::memcpy(par, blk + offsetof(BlockQ4_K, d), 2);
    std::memcpy(par + 2, blk + offsetof(BlockQ4_K, dmin), 2);
    for (int s = 0; s < 8; ++s) {
      const int sc = s < 4 ? scales[s] & 63 : (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4;
      const int mn = s < 4 ? scales[s + 4] & 63 : (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
      par[4 + s] = uint8_t(sc);
      par[12 + s] = uint8_t(mn);
      // Sub-block s: the low (s even) or high (s odd) nibbles of qs[32 (s / 2) ..]; element l of it.
      const uint8_t* q = qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      uint8_t* codes = dst + 16 * (8 * sb + s);
      for (int j = 0; j < 16; ++j)
        codes[j] = uint8_t(((q[j] >> shift) & 15) | ((q[16 + j] >> shift) & 15) << 4);
    }
  }
}

// The Q6K device row (device_rows.h): Q6_K's 6-bit codes regrouped by 32, low 4 bits in Q4_0's nibble
// order and high 2 bits in two words a block, and each super-block's d and 16 scales. In the file, element
// 128 h + 32 k + l (h < 2, k < 4, l < 32) has its low bits in ql[64 h + l + 32 (k & 1)], nibble k / 2, and
// its high bits in qh[32 h + l] at bit 2 k; its scale is scales[8 h + 2 k + l / 16] (quants.h BlockQ6_K).
size_t q6k_row_bytes(int64_t n_in) {
  return (size_t(n_in / 32) * 24 + size_t(n_in / 256) * 20 + 15) / 16 * 16;
}

void q6k_row(const uint8_t* src, int64_t n_in, uint8_t* dst) {
  std::memset(dst, 0, q6k_row_bytes(n_in));
  const int64_t nb = n_in / 32;
  for (int64_t sb = 0; sb < n_in / 256; ++sb) {
    const uint8_t* blk = src + size_t(sb) * sizeof(BlockQ6_K);
    const uint8_t* ql = blk + offsetof(BlockQ6_K, ql);
    const uint8_t* qh = blk + offsetof(BlockQ6_K, qh);
    uint8_t* par = dst + 24 * nb + 20 * sb;
    std::memcpy(par, blk + offsetof(BlockQ6_K, d), 2);
    std::memcpy(par + 2, blk + offsetof(BlockQ6_K, scales), 16);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int lo = (ql[64 * h + l + 32 * (k & 1)] >> (4 * (k / 2))) & 15;
      const int hi = (qh[32 * h + l] >> (2 * k)) & 3;
      const int64_t b = 8 * sb + e / 32;
      const int j = e % 32, half = j / 16, t = (j % 16) / 4, i = j % 4;
      uint8_t* codes = dst + 16 * b;
      codes[j % 16] = uint8_t(codes[j % 16] | lo << (4 * half));
      uint8_t* hw = dst + 16 * nb + 8 * b + 4 * half;  // little-endian word: byte i, bits 2 t
      hw[i] = uint8_t(hw[i] | hi << (2 * t));
    }
  }
}

// Device row bytes of the converted formats (kernels/quants.cl): codes, then the (half d, half m) pairs
// (one per 64 weights for INT4B64, one per row for INT8B0), padded to 16 bytes.
size_t converted_row_bytes(AsymFormat kind, int64_t n_in) {
  const size_t code_bytes = kind == AsymFormat::Int4B64 ? size_t(n_in / 2) : size_t(n_in);
  return (code_bytes + size_t(asym_groups(kind, n_in)) * 4 + 15) / 16 * 16;
}

// Writes one row of exact float values converted (quantize_row_asym, the CPU's conversion) in the device
// layout of `kind` (dst: converted_row_bytes; the padding is zeroed).
void converted_row(AsymFormat kind, const float* v, int64_t n_in, uint8_t* dst, std::vector<uint8_t>& codes,
                   std::vector<uint16_t>& sc, std::vector<uint16_t>& off) {
  const int64_t ng = asym_groups(kind, n_in);
  codes.resize(size_t(n_in));
  sc.resize(size_t(ng));
  off.resize(size_t(ng));
  quantize_row_asym(kind, v, n_in, codes.data(), sc.data(), off.data());
  std::memset(dst, 0, converted_row_bytes(kind, n_in));
  size_t p = size_t(n_in);
  if (kind == AsymFormat::Int4B64) {
    // Block b's 16 bytes: element j < 16 in the low nibble of byte j, element 16 + j in its high nibble.
    for (int64_t b = 0; b < n_in / 32; ++b) {
      for (int j = 0; j < 16; ++j)
        dst[16 * b + j] = uint8_t(codes[size_t(32 * b + j)] | codes[size_t(32 * b + 16 + j)] << 4);
    }
    p = size_t(n_in / 2);
  } else {
    std::memcpy(dst, codes.data(), size_t(n_in));
  }
  for (int64_t g = 0; g < ng; ++g) {
    std::memcpy(dst + p + 4 * size_t(g), &sc[size_t(g)], 2);
    std::memcpy(dst + p + 4 * size_t(g) + 2, &off[size_t(g)], 2);
  }
}

// The device row of a block format (kernels/quants.cl): [nb][QB] codes, then [nb] parameters (half d, or
// half d and half m for Q4_1), padded to 16 bytes, so that every block's codes are one aligned vector load.
size_t split_row_bytes(GgmlType t, int64_t n_in) {
  const size_t nb = size_t(n_in / 32);
  const size_t per_block = t == GgmlType::Q8_0 ? 32 + 2 : t == GgmlType::Q4_1 ? 16 + 4 : 16 + 2;
  return (nb * per_block + 15) / 16 * 16;
}

// Writes one GGUF row of Q4_0, Q4_1 or Q8_0 blocks in the split layout (dst: split_row_bytes bytes; the
// padding is zeroed). The bytes are the file's, rearranged: lossless.
void split_row(GgmlType t, const uint8_t* src, int64_t n_in, uint8_t* dst) {
  const size_t nb = size_t(n_in / 32);
  const size_t qb = t == GgmlType::Q8_0 ? 32 : 16, pb = t == GgmlType::Q4_1 ? 4 : 2;
  const size_t block = pb + qb;  // GGUF: parameters first, then codes
  std::memset(dst, 0, split_row_bytes(t, n_in));
  for (size_t b = 0; b < nb; ++b) {
    std::memcpy(dst + qb * b, src + block * b + pb, qb);
    std::memcpy(dst + qb * nb + pb * b, src + block * b, pb);
  }
}

const char* device_format_name(DeviceFormat f) {
  static constexpr const char* kNames[kDeviceFormats] = {"f32",     "f16",    "q4_0", "q4_1", "q8_0",
                                                         "int4b64", "int8b0", "kq8",  "kq4"};
  return kNames[int(f)];
}

int native_device_format(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return int(DeviceFormat::F32);
    case GgmlType::F16:
      return int(DeviceFormat::F16);
    case GgmlType::Q4_0:
      return int(DeviceFormat::Q4_0);
    case GgmlType::Q4_1:
      return int(DeviceFormat::Q4_1);
    case GgmlType::Q8_0:
      return int(DeviceFormat::Q8_0);
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return int(DeviceFormat::Kq8);
    case GgmlType::Q4_K:
      return int(DeviceFormat::Kq4);
    default:
      return -1;
  }
}

DeviceFormat converted_device_format(WeightsMode m) {
  switch (m) {
    case WeightsMode::Int4B64:
      return DeviceFormat::Int4B64;
    case WeightsMode::Int8B0:
      return DeviceFormat::Int8B0;
    case WeightsMode::F16:
      return DeviceFormat::F16;
    case WeightsMode::F32:
      return DeviceFormat::F32;
    case WeightsMode::Int4B0:
      fail("--weights int4b0 has no device format (int4b64, int8b0, f16 and f32 do)");
    case WeightsMode::Native:
      break;
  }
  fail("internal: --weights native has no converted device format");
}

DeviceFormat device_format_for(const Weight& w, WeightsMode m) {
  if (m != WeightsMode::Native) return converted_device_format(m);
  const int f = native_device_format(w.type);
  return f < 0 ? DeviceFormat::F32 : DeviceFormat(f);
}

size_t device_row_bytes(DeviceFormat f, int64_t n_in) {
  switch (f) {
    case DeviceFormat::F32:
      return size_t(n_in) * 4;
    case DeviceFormat::F16:
      return size_t(n_in) * 2;
    case DeviceFormat::Q4_0:
      return split_row_bytes(GgmlType::Q4_0, n_in);
    case DeviceFormat::Q4_1:
      return split_row_bytes(GgmlType::Q4_1, n_in);
    case DeviceFormat::Q8_0:
      return split_row_bytes(GgmlType::Q8_0, n_in);
    case DeviceFormat::Int4B64:
      return converted_row_bytes(AsymFormat::Int4B64, n_in);
    case DeviceFormat::Int8B0:
      return converted_row_bytes(AsymFormat::Int8B0, n_in);
    case DeviceFormat::Kq8:
      return kq8_row_bytes(n_in);
    case DeviceFormat::Kq4:
      return kq4_row_bytes(n_in);
  }
  fail("internal: device format {}", int(f));
}

DeviceRowWriter::DeviceRowWriter(const Weight& w, DeviceFormat f)
    : w_(w), f_(f), native_(native_device_format(w.type) == int(f)), row_bytes_(device_row_bytes(f, w.n_in)) {
  if (native_ && w.row_bytes != row_size(w.type, w.n_in)) {
    fail("weight {} has rows of {} bytes, expected {} for {} x {}", w.name, w.row_bytes,
         row_size(w.type, w.n_in), type_name(w.type), w.n_in);
  }
  const bool blocks = f == DeviceFormat::Int4B64 || f == DeviceFormat::Int8B0;
  if (blocks && w.n_in % 32 != 0) {
    fail("weight {}: {} inputs is not a multiple of 32, which the {} device format needs", w.name, w.n_in,
         device_format_name(f));
  }
}

void DeviceRowWriter::write(int64_t r0, int64_t nr, uint8_t* dst) {
  const int64_t n = w_.n_in;
  for (int64_t i = 0; i < nr; ++i, dst += row_bytes_) {
    const uint8_t* src = w_.row(r0 + i);
    if (native_) {
      switch (f_) {
        case DeviceFormat::Q4_0:
        case DeviceFormat::Q4_1:
        case DeviceFormat::Q8_0:
          split_row(w_.type, src, n, dst);
          break;
        case DeviceFormat::Kq8:
          kq8_row(w_.type, src, n, dst, scale_, offset_);
          break;
        case DeviceFormat::Kq4:
          kq4_row(src, n, dst, codes_, scale_, offset_);
          break;
        default:
          std::memcpy(dst, src, row_bytes_);
      }
      continue;
    }
    v_.resize(size_t(n));
    dequantize_row(w_.type, src, v_.data(), n);
    switch (f_) {
      case DeviceFormat::F32:
        std::memcpy(dst, v_.data(), size_t(n) * 4);
        break;
      case DeviceFormat::F16:
        for (int64_t k = 0; k < n; ++k) {
          const uint16_t h = fp32_to_fp16(v_[size_t(k)]);
          std::memcpy(dst + 2 * k, &h, 2);
        }
        break;
      case DeviceFormat::Int4B64:
        converted_row(AsymFormat::Int4B64, v_.data(), n, dst, ucodes_, sc_, off_);
        break;
      case DeviceFormat::Int8B0:
        converted_row(AsymFormat::Int8B0, v_.data(), n, dst, ucodes_, sc_, off_);
        break;
      default:
        fail("internal: weight {} ({}) cannot be converted to device format {}", w_.name, type_name(w_.type),
             device_format_name(f_));
    }
  }
}

}  // namespace tilellm
