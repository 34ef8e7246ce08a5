// The Q6K device row (backends/device_rows.h, the CUDA backend's Q6_K at its own size): read back from its
// documented layout by a reader written here, every element equals dequantize_row's bit for bit, on random
// super-blocks (codes, scales of both signs, scales d across magnitudes) in rows of one and of several.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/device_rows.h"
#include "base/fp16.h"
#include "format/quants.h"

namespace tilellm {
namespace {

// Element i of a Q6K row of n_in weights, from device_rows.h's description alone.
float q6k_element(const uint8_t* row, int64_t n_in, int64_t i) {
  const int64_t nb = n_in / 32, b = i / 32, sb = i / 256;
  const int j = int(i % 32), h = j / 16, t = (j % 16) / 4, e = j % 4;
  const int lo = (row[16 * b + j % 16] >> (4 * h)) & 15;
  uint32_t word = 0;
  std::memcpy(&word, row + 16 * nb + 8 * b + 4 * h, 4);
  const int hi = int(word >> (8 * e + 2 * t)) & 3;
  const uint8_t* par = row + 24 * nb + 20 * sb;
  uint16_t d = 0;
  std::memcpy(&d, par, 2);
  const int g = int(i % 256) / 16;
  return (fp16_to_fp32(d) * float(int8_t(par[2 + g]))) * float((lo | hi << 4) - 32);
}

TEST(DeviceRowsQ6K, every_element_reads_back_as_the_format_defines_it) {
  std::mt19937 rng(0x6c6b);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(-12.0f, 2.0f);
  for (int64_t n_in : {int64_t(256), int64_t(256 * 7)}) {
    std::vector<uint8_t> src(size_t(n_in / 256) * sizeof(BlockQ6_K));
    for (uint8_t& v : src) v = uint8_t(byte(rng));
    for (int64_t sb = 0; sb < n_in / 256; ++sb) {  // finite scales d, from tiny to large
      const uint16_t d = fp32_to_fp16(std::ldexp(1.0f, int(mag(rng))) * (byte(rng) % 2 ? 1.0f : -1.0f));
      std::memcpy(src.data() + size_t(sb) * sizeof(BlockQ6_K) + offsetof(BlockQ6_K, d), &d, 2);
    }
    std::vector<float> want(static_cast<size_t>(n_in));
    dequantize_row(GgmlType::Q6_K, src.data(), want.data(), n_in);
    const size_t bytes = q6k_row_bytes(n_in);
    EXPECT_EQ(bytes % 16, 0u);
    EXPECT_LE(bytes, size_t(n_in) * 7 / 8);  // 6.625 bits a weight, padded to 16 bytes (KQ8: 12)
    std::vector<uint8_t> row(bytes, 0xAB);
    q6k_row(src.data(), n_in, row.data());
    for (int64_t i = 0; i < n_in; ++i) {
      const float got = q6k_element(row.data(), n_in, i);
      ASSERT_EQ(std::memcmp(&got, &want[size_t(i)], 4), 0)
          << "element " << i << " of " << n_in << ": " << got << " vs " << want[size_t(i)];
    }
  }
}

}  // namespace
}  // namespace tilellm
