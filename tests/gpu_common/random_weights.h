// Random test data for the GPU backends' tests (tests/opencl, tests/vulkan): floats without zeros, and weight
// matrices of a GGML type with random codes and half scales of sane magnitudes. One definition for every
// test folder that includes it ("../gpu_common/random_weights.h"); the folder has no test program itself.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/modes.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/asym_quant.h"
#include "format/quants.h"

namespace tilellm::test {

inline std::vector<float> rand_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = d(rng);
    while (x == 0.0f);  // never zeros: a zero would hide a missing write or a wrong index
  }
  return v;
}

struct OwnedWeight {
  std::vector<uint8_t> bytes;
  Weight w;
};

inline void put_half(uint8_t* p, float f) {
  const uint16_t h = fp32_to_fp16(f);
  std::memcpy(p, &h, 2);
}

// Random rows of a type: every quantized field random, the half scales set to sane magnitudes (random bits
// there would give infinities and NaNs, which no real model holds).
inline OwnedWeight make_weight(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed,
                               const char* name = nullptr) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.004f, 0.05f), sym(-1.0f, 1.0f);
  OwnedWeight o;
  o.w.name = name ? name : fmt::format("random.{}", type_name(type));
  o.w.type = type;
  o.w.n_in = n_in;
  o.w.n_out = n_out;
  o.w.row_bytes = row_size(type, n_in);
  o.bytes.resize(o.w.row_bytes * size_t(n_out));
  for (auto& b : o.bytes) b = uint8_t(byte(rng));
  const TypeTraits& tr = type_traits(type);
  const size_t nblocks = o.bytes.size() / tr.type_size;
  for (size_t b = 0; b < nblocks; ++b) {
    uint8_t* blk = o.bytes.data() + b * tr.type_size;
    switch (type) {
      case GgmlType::F32: {
        const float f = sym(rng);
        std::memcpy(blk, &f, 4);
        break;
      }
      case GgmlType::F16:
        put_half(blk, sym(rng));
        break;
      case GgmlType::BF16: {
        const float f = sym(rng);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        const uint16_t h = uint16_t(bits >> 16);
        std::memcpy(blk, &h, 2);
        break;
      }
      case GgmlType::Q4_0:
      case GgmlType::Q8_0:
      case GgmlType::Q5_0:
        put_half(blk, scale(rng));
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
        put_half(blk, scale(rng));
        put_half(blk + 2, 0.1f * sym(rng));
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put_half(blk, scale(rng));
        put_half(blk + 2, scale(rng));
        break;
      case GgmlType::Q6_K:
        put_half(blk + 208, 0.1f * scale(rng));
        break;
      default:
        ADD_FAILURE() << "no random generator for " << type_name(type);
    }
  }
  o.w.data = o.bytes.data();
  return o;
}

// A float matrix of random values that --weights `mode` converts at upload (w, F32 rows), with the
// conversion's exact values beside it (we, `exact`: what the CPU's float path multiplies by).
struct ConvertedWeight {
  std::vector<float> src, exact;
  Weight w, we;
  ConvertedWeight(WeightsMode mode, int64_t n_in, int64_t n_out, uint32_t seed)
      : src(rand_floats(size_t(n_in * n_out), seed)), exact(src.size()) {
    for (int64_t r = 0; r < n_out; ++r) {
      const float* s = src.data() + r * n_in;
      float* e = exact.data() + r * n_in;
      if (mode == WeightsMode::Int4B64 || mode == WeightsMode::Int8B0) {
        dequantize_row_asym(mode == WeightsMode::Int4B64 ? AsymFormat::Int4B64 : AsymFormat::Int8B0, s, n_in,
                            e);
      } else {
        for (int64_t j = 0; j < n_in; ++j)
          e[j] = mode == WeightsMode::F16 ? fp16_to_fp32(fp32_to_fp16(s[j])) : s[j];
      }
    }
    w.name = std::string("converted ") + weights_mode_name(mode);
    w.type = GgmlType::F32;
    w.data = reinterpret_cast<const uint8_t*>(src.data());
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_bytes = size_t(n_in) * 4;
    we = w;
    we.data = reinterpret_cast<const uint8_t*>(exact.data());
  }
  ConvertedWeight(const ConvertedWeight&) = delete;  // w and we point into src and exact
  ConvertedWeight& operator=(const ConvertedWeight&) = delete;
};

}  // namespace tilellm::test
