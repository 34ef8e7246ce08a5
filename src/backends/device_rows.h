// Weight rows as the GPU backends hold them: the device formats their kernels read, and the host-side
// conversion of a model's rows into them, written once for every GPU backend (OpenCL, Vulkan) so that each
// reads the same bytes. The layouts (the OpenCL kernels' quants.cl and the Vulkan shaders' quants.glsl
// describe the same bytes):
//   Split rows (Q4_0, Q4_1, Q8_0): [nb][QB] codes, then [nb] parameters (half d; half d, half m for Q4_1),
//     padded to 16 bytes, nb = n_in / 32, QB = 16 (4-bit) or 32 (Q8_0): every block's codes one aligned
//     16-byte load. The file's bytes, rearranged: lossless.
//   KQ8 (Q5_K, Q6_K, Q5_0, Q5_1): [n_in] signed codes, then [n_in / 16] (float scale, float offset), padded
//     to 16 bytes; scale * code + offset is the format's exact weight (format/quants.h row_code_groups).
//   KQ4 (Q4_K): [nb][16] code bytes in Q4_0's nibble order, then [nb] (float scale, float offset), padded.
//   INT4B64 / INT8B0 (--weights): format/asym_quant.h's codes, Q4_0's nibble order for INT4B64, then the
//     (half d, half m) pairs (one per 64 weights; one per row), padded to 16 bytes.
//   F16, F32: one element each, rows as in the file (or converted / dequantized exactly to them).
//   Q4K (Q4_K kept at its own size, 4.625 bits a weight; the CUDA backend's, not one of DeviceFormat's):
//     [nb][16] code bytes in Q4_0's nibble order, then per super-block of 256 (half d, half dmin,
//     uint8 sc[8], uint8 mn[8]: the 6-bit scales and mins unpacked), padded to 16 bytes; the weights of
//     block b are (d * sc[b % 8]) * q - dmin * mn[b % 8], as the format defines them.
//   Q6K (Q6_K kept at its own size, 6.625 bits a weight; the CUDA backend's, where KQ8 takes 12): [nb][16]
//     bytes of the codes' low 4 bits in Q4_0's nibble order; [nb][2] 32-bit words of their high 2 bits,
//     word h of block b holding element 16 h + 4 t + i's at bits 8 i + 2 t (so (word >> 2 t) & 0x03030303,
//     shifted up by 4, completes the bytes of code word t's nibbles); then per super-block of 256 (half d,
//     int8 sc[16], 2 bytes of padding); padded to 16 bytes. Element 16 g + e of a super-block (g < 16) is
//     d sc[g] (q - 32) for its 6-bit code q, as the format defines it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/modes.h"
#include "backends/weight.h"
#include "format/asym_quant.h"
#include "format/ggml_types.h"

namespace tilellm {

// The formats device kernels read; the order is the GPU backends' kernel-table index.
enum class DeviceFormat : int { F32, F16, Q4_0, Q4_1, Q8_0, Int4B64, Int8B0, Kq8, Kq4 };
constexpr int kDeviceFormats = 9;
const char* device_format_name(DeviceFormat f);  // "f32", "f16", "q4_0", ..., "kq4"
// Whether rows of f are whole blocks of 32 weights (every format but F32 and F16), and whether a block's
// codes are nibbles (Q4_0, Q4_1, Int4B64, Kq4: 16 bytes) rather than bytes (32).
constexpr bool device_format_is_block(DeviceFormat f) {
  return f != DeviceFormat::F32 && f != DeviceFormat::F16;
}
constexpr bool device_format_nibbles(DeviceFormat f) {
  return f == DeviceFormat::Q4_0 || f == DeviceFormat::Q4_1 || f == DeviceFormat::Int4B64 ||
         f == DeviceFormat::Kq4;
}

// The device format a GGUF type keeps in native mode, or -1 when the rows go up dequantized to F32 (BF16,
// the 2- and 3-bit K-quants, IQ types).
int native_device_format(GgmlType t);
// The format every matrix is converted to under --weights m (int4b64, int8b0, f16, f32); throws naming the
// mode for int4b0 (no device format) and for native.
DeviceFormat converted_device_format(WeightsMode m);
// The format weight w is held in under mode m.
DeviceFormat device_format_for(const Weight& w, WeightsMode m);
// Bytes of one device row of n_in weights in format f.
size_t device_row_bytes(DeviceFormat f, int64_t n_in);

// Writes rows [r0, r0 + nr) of w in format f at dst (nr * device_row_bytes(f, w.n_in) bytes, padding
// zeroed): the file's bytes rearranged when f is w's native format, else converted from the exact float
// values (dequantize_row), as every backend converts. The scratch vectors are reused between calls.
class DeviceRowWriter {
 public:
  DeviceRowWriter(const Weight& w, DeviceFormat f);
  size_t row_bytes() const { return row_bytes_; }
  void write(int64_t r0, int64_t nr, uint8_t* dst);

 private:
  const Weight& w_;
  DeviceFormat f_;
  bool native_;
  size_t row_bytes_;
  std::vector<float> v_, scale_, offset_;
  std::vector<int8_t> codes_;
  std::vector<uint8_t> ucodes_;
  std::vector<uint16_t> sc_, off_;
};

// The row writers themselves (dst: the row's device bytes; the padding is zeroed).
size_t split_row_bytes(GgmlType t, int64_t n_in);
void split_row(GgmlType t, const uint8_t* src, int64_t n_in, uint8_t* dst);
size_t kq8_row_bytes(int64_t n_in);
void kq8_row(GgmlType t, const uint8_t* src, int64_t n_in, uint8_t* dst, std::vector<float>& scale,
             std::vector<float>& offset);
size_t kq4_row_bytes(int64_t n_in);
void kq4_row(const uint8_t* src, int64_t n_in, uint8_t* dst, std::vector<int8_t>& codes,
             std::vector<float>& scale, std::vector<float>& offset);
size_t q4k_row_bytes(int64_t n_in);
void q4k_row(const uint8_t* src, int64_t n_in, uint8_t* dst);
size_t q6k_row_bytes(int64_t n_in);
void q6k_row(const uint8_t* src, int64_t n_in, uint8_t* dst);
size_t converted_row_bytes(AsymFormat kind, int64_t n_in);
void converted_row(AsymFormat kind, const float* v, int64_t n_in, uint8_t* dst, std::vector<uint8_t>& codes,
                   std::vector<uint16_t>& sc, std::vector<uint16_t>& off);

}  // namespace tilellm
