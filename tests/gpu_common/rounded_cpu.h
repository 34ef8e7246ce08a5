// A reference for the GPU backends' integer products (--activations q8): the host backend's float path with
// the input of each product a GPU backend rounds rounded as it rounds it (backends/q8_round.h) — what that
// path computes, up to float summation order. The CUDA backend rounds the input of every product of a block
// format; the Vulkan backend only one-token products (decode), its prompts staying on the float path:
// `decode_only` says which. `half_from` > 0: products over F16 weights of that many tokens or more round
// their input as the CUDA backend's fp16 GEMM does (backends/f16_round.h; --cuda-fp16-gemm f16); `half_all`:
// over every format but F32 (--cuda-fp16-gemm all, the default), whose block formats' weights that GEMM also
// reads rounded to fp16: the reference then multiplies by the exact weights rounded so (F16 weights are
// already).
// Registered by each test under its own name (rounded_cpu_entry).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../common/forwarding_backend.h"
#include "backends/device_rows.h"
#include "backends/f16_round.h"
#include "backends/q8_round.h"
#include "backends/registry.h"
#include "base/fp16.h"

namespace tilellm::test {

class RoundedCpu final : public ForwardingBackend {
 public:
  RoundedCpu(std::unique_ptr<Backend> cpu, WeightsMode weights, bool decode_only, int64_t half_from,
             bool half_all)
      : ForwardingBackend(std::move(cpu)),
        weights_(weights),
        decode_only_(decode_only),
        half_from_(half_from),
        half_all_(half_all) {}
  std::string_view name() const override { return "rounded-cpu"; }
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override {
    const DeviceFormat f = device_format_for(w, weights_);
    const bool half = half_from_ > 0 && n_tok >= half_from_ &&
                      (half_all_ ? f != DeviceFormat::F32 : f == DeviceFormat::F16) && w.n_in % 8 == 0;
    const bool rounds = half || (device_format_is_block(f) && (!decode_only_ || n_tok == 1));
    if (!rounds) return inner().matmul(w, x, n_tok, y);
    std::vector<float> xr(size_t(n_tok * w.n_in));
    if (half)
      round_activations_f16_scaled(x, n_tok * w.n_in, xr.data());
    else
      round_activations_q8(x, n_tok * w.n_in, xr.data());
    if (!half || !device_format_is_block(f)) return inner().matmul(w, xr.data(), n_tok, y);
    // y [n_tok][n_out] = xr [n_tok][n_in] . rows^T, summed in double.
    const std::vector<float>& rows = half_rows(w);
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t o = 0; o < w.n_out; ++o) {
        double acc = 0.0;
        for (int64_t i = 0; i < w.n_in; ++i)
          acc += double(xr[size_t(t * w.n_in + i)]) * rows[size_t(o * w.n_in + i)];
        y[t * w.n_out + o] = float(acc);
      }
    }
  }
  void add_rows(float* x, const float* v, int64_t rows, int64_t n) override {
    inner().add_rows(x, v, rows, n);
  }

 private:
  // w's rows [n_out][n_in] as the fp16 GEMM reads them: the host backend's exact weights (its product with
  // one-hot inputs adds only zeros to each) rounded to fp16. Kept per weight (its first byte and row count:
  // a fused tensor's first part starts where the tensor does).
  const std::vector<float>& half_rows(const Weight& w) {
    const std::pair<const uint8_t*, int64_t> key{w.data, w.n_out};
    auto it = half_rows_.find(key);
    if (it != half_rows_.end()) return it->second;
    constexpr int64_t kChunk = 8;  // one-hot tokens a product
    std::vector<float> eye(size_t(kChunk * w.n_in)), cols(size_t(kChunk * w.n_out));
    std::vector<float> rows(size_t(w.n_in * w.n_out));
    for (int64_t i0 = 0; i0 < w.n_in; i0 += kChunk) {
      const int64_t n = std::min(kChunk, w.n_in - i0);
      std::fill(eye.begin(), eye.end(), 0.0f);
      for (int64_t t = 0; t < n; ++t) eye[size_t(t * w.n_in + i0 + t)] = 1.0f;
      inner().matmul(w, eye.data(), n, cols.data());
      for (int64_t t = 0; t < n; ++t)
        for (int64_t o = 0; o < w.n_out; ++o)
          rows[size_t(o * w.n_in + i0 + t)] = fp16_to_fp32(fp32_to_fp16(cols[size_t(t * w.n_out + o)]));
    }
    return half_rows_.emplace(key, std::move(rows)).first->second;
  }

  WeightsMode weights_;
  bool decode_only_;
  int64_t half_from_;
  bool half_all_;
  std::map<std::pair<const uint8_t*, int64_t>, std::vector<float>> half_rows_;
};

// The registry entry of a RoundedCpu (test-only MNN number `mnn_type`).
inline BackendEntry rounded_cpu_entry(const std::string& name, int mnn_type, bool decode_only,
                                      int64_t half_from = 0, bool half_all = false) {
  BackendEntry e;
  e.name = name;
  e.mnn_type = mnn_type;
  e.summary =
      "the host backend's float path on activations rounded as a GPU backend rounds them (tests only)";
  e.devices = [](const std::string&) {
    return std::vector<DeviceInfo>{{"the host", "rounded", "  (none)\n"}};
  };
  e.make = [decode_only, half_from, half_all](const BackendParams& p) -> std::unique_ptr<Backend> {
    BackendParams hp = p;
    hp.activations = ActivationMode::F32;
    return std::make_unique<RoundedCpu>(host_backend().make(hp), p.weights, decode_only, half_from, half_all);
  };
  return e;
}

}  // namespace tilellm::test
