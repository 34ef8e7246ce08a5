// A reference for the GPU backends' integer products (--activations q8): the host backend's float path with
// the input of each product a GPU backend rounds rounded as it rounds it (backends/q8_round.h) — what that
// path computes, up to float summation order. The CUDA backend rounds the input of every product of a block
// format; the Vulkan backend only one-token products (decode), its prompts staying on the float path:
// `decode_only` says which. `half_from` > 0: products over F16 weights of that many tokens or more round
// their input as the CUDA backend's fp16 GEMM does by default (backends/f16_round.h; --cuda-fp16-gemm f16).
// Registered by each test under its own name (rounded_cpu_entry).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../common/forwarding_backend.h"
#include "backends/device_rows.h"
#include "backends/f16_round.h"
#include "backends/q8_round.h"
#include "backends/registry.h"

namespace tilellm::test {

class RoundedCpu final : public ForwardingBackend {
 public:
  RoundedCpu(std::unique_ptr<Backend> cpu, WeightsMode weights, bool decode_only, int64_t half_from)
      : ForwardingBackend(std::move(cpu)),
        weights_(weights),
        decode_only_(decode_only),
        half_from_(half_from) {}
  std::string_view name() const override { return "rounded-cpu"; }
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override {
    const DeviceFormat f = device_format_for(w, weights_);
    const bool half = half_from_ > 0 && n_tok >= half_from_ && f == DeviceFormat::F16 && w.n_in % 8 == 0;
    const bool rounds = half || (device_format_is_block(f) && (!decode_only_ || n_tok == 1));
    if (!rounds) return inner().matmul(w, x, n_tok, y);
    std::vector<float> xr(size_t(n_tok * w.n_in));
    if (half)
      round_activations_f16_scaled(x, n_tok * w.n_in, xr.data());
    else
      round_activations_q8(x, n_tok * w.n_in, xr.data());
    inner().matmul(w, xr.data(), n_tok, y);
  }
  void add_rows(float* x, const float* v, int64_t rows, int64_t n) override {
    inner().add_rows(x, v, rows, n);
  }

 private:
  WeightsMode weights_;
  bool decode_only_;
  int64_t half_from_;
};

// The registry entry of a RoundedCpu (test-only MNN number `mnn_type`).
inline BackendEntry rounded_cpu_entry(const std::string& name, int mnn_type, bool decode_only,
                                      int64_t half_from = 0) {
  BackendEntry e;
  e.name = name;
  e.mnn_type = mnn_type;
  e.summary =
      "the host backend's float path on activations rounded as a GPU backend rounds them (tests only)";
  e.devices = [](const std::string&) {
    return std::vector<DeviceInfo>{{"the host", "rounded", "  (none)\n"}};
  };
  e.make = [decode_only, half_from](const BackendParams& p) -> std::unique_ptr<Backend> {
    BackendParams hp = p;
    hp.activations = ActivationMode::F32;
    return std::make_unique<RoundedCpu>(host_backend().make(hp), p.weights, decode_only, half_from);
  };
  return e;
}

}  // namespace tilellm::test
