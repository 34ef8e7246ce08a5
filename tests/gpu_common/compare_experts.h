// Models with experts on a device backend against the CPU backend's float path: the device runs the
// mixture through Backend::moe_ffn's default (backends/moe.cpp), composed of the ops it has, and must give
// the CPU's logits and greedy tokens. Tiny random models (tests/common/tiny_model.h): Mixtral-style llama
// (8 experts, 2 a token), qwen2moe (6 experts, 2 a token, a gated shared expert, q/k/v biases) and qwen3moe
// (16 experts, 8 a token, per-head q/k norms), an 8-token prompt then 6 greedy steps, f32 KV cache.
// Used by tests/opencl and tests/vulkan.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/tiny_model.h"
#include "compare_greedy.h"
#include "model/model.h"
#include "runtime/session.h"

namespace tilellm::test {

inline std::vector<TinySpec> expert_specs() {
  TinySpec mixtral;
  mixtral.n_expert = 8, mixtral.n_expert_used = 2, mixtral.seed = 21;
  TinySpec q2;
  q2.arch = "qwen2moe", q2.n_expert = 6, q2.n_expert_used = 2, q2.seed = 22;
  TinySpec q3;
  q3.arch = "qwen3moe", q3.n_expert = 16, q3.n_expert_used = 8, q3.head_dim = 10, q3.seed = 23;
  return {mixtral, q2, q3};
}

// rel_bound: the largest logit difference allowed, relative to the largest logit (f32 cache: float
// summation order only).
inline void compare_experts(const std::string& backend, int device, const std::string& tmp_dir,
                            double rel_bound = 1e-4) {
  for (const TinySpec& spec : expert_specs()) {
    const std::string path = tmp_dir + "/tiny_" + spec.arch + "_experts.gguf";
    tiny_model(spec).write(path);
    auto model = Model::load(path);
    SessionOptions so = float_options(GgmlType::F32);
    Session cpu(*model, so);
    so.backend = backend;
    so.device = device;
    Session dev(*model, so);
    const int64_t V = model->config().n_vocab;
    const std::vector<int32_t> prompt = {3, 17, 9, 40, 22, 5, 61, 12};
    cpu.eval(prompt.data(), int64_t(prompt.size()));
    dev.eval(prompt.data(), int64_t(prompt.size()));
    double worst = 0.0;
    for (int step = 0; step < kGenerate; ++step) {
      const float *lc = cpu.logits(), *ld = dev.logits();
      double max_diff = 0.0, max_abs = 0.0;
      for (int64_t i = 0; i < V; ++i) {
        max_diff = std::max(max_diff, std::abs(double(lc[i]) - ld[i]));
        max_abs = std::max(max_abs, std::abs(double(lc[i])));
      }
      worst = std::max(worst, max_diff / max_abs);
      ASSERT_LE(max_diff, rel_bound * max_abs) << spec.arch << " step " << step;
      const int32_t tc = argmax(lc, V), td = argmax(ld, V);
      ASSERT_EQ(tc, td) << spec.arch << " step " << step;
      cpu.eval(&tc, 1);
      dev.eval(&td, 1);
    }
    std::printf("%s with %u of %u experts on %s: worst relative logit difference %.3g\n", spec.arch.c_str(),
                spec.n_expert_used, spec.n_expert, backend.c_str(), worst);
  }
}

}  // namespace tilellm::test
