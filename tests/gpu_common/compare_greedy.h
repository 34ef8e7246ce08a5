// The whole model on a device backend against the CPU backend's float path (--activations f32, the same KV
// cache type): greedy continuations of a model for the first golden prompts (tests/data/goldens/) must be
// equal token for token, or differ only at a near-tie that the logits show. Used by tests/opencl and
// tests/vulkan.
//
// At every step the two logit vectors must agree within a bound relative to their largest magnitude (each
// caller justifies its bound); a different greedy token is accepted only when the CPU's margin between the
// two candidates is within twice the largest logit difference of that step, i.e. the numerical
// disagreement alone can flip it. The comparison of that prompt stops there.
//
// Cost: prompts are cut to 8 tokens (GreedyCase::prompt_tokens; a longer prompt continues the golden prompt
// with the greedy tokens llama.cpp generated after it) and 6 tokens are generated.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/paths.h"
#include "model/model.h"
#include "runtime/session.h"

namespace tilellm::test {

constexpr int kGreedyPrompts = 3;
constexpr size_t kPromptTokens = 8;
constexpr int kGenerate = 6;

inline int32_t argmax(const float* v, int64_t n) {
  return int32_t(std::max_element(v, v + n) - v);
}

// The largest |ref - got| over n logits, and the largest |ref|.
struct LogitDiff {
  double max_diff = 0.0, max_abs = 0.0;
};
inline LogitDiff logit_diff(const float* ref, const float* got, int64_t n) {
  LogitDiff d;
  for (int64_t i = 0; i < n; ++i) {
    d.max_diff = std::max(d.max_diff, std::abs(double(ref[i]) - got[i]));
    d.max_abs = std::max(d.max_abs, std::abs(double(ref[i])));
  }
  return d;
}

// The CPU float path's session (--activations f32) at this file's size: 64 positions, 2 threads.
inline SessionOptions float_options(GgmlType kv_type) {
  SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  so.activations = ActivationMode::F32;
  so.kv_type = kv_type;
  return so;
}

// One comparison: a device backend's session against the CPU float path's, same options otherwise.
struct GreedyCase {
  std::string backend;
  int device = 0;
  std::string profile = "none";
  GgmlType kv_type = GgmlType::F16;
  double rel_bound = 1e-3;  // largest logit difference allowed, relative to the largest logit
  const char* model_file = kSmolLM2;
  const char* golden = "smollm2.json";
  int n_prompts = kGreedyPrompts;
  WeightsMode weights = WeightsMode::Native;
  GpuMemory gpu_memory = GpuMemory::Buffer;  // the device session's
  KvMemory kv_memory = KvMemory::Buffer;     // the device session's
  size_t prompt_tokens = kPromptTokens;
  ActivationMode activations = ActivationMode::F32;       // the device session's; the CPU's is f32
  std::shared_ptr<const BackendOptions> backend_options;  // the device backend's own; null: its defaults
  std::string label;                                      // what the printed line names; empty: the profile
};

// What a comparison saw: the largest logit difference relative to the largest logit after the prompts
// (their last position) and over every step, and the near-ties that ended a prompt's comparison.
struct GreedyResult {
  double worst_prompt = 0.0, worst = 0.0;
  int ties = 0;
};

// The golden case's prompt tokens cut or continued (by its generated tokens) to n.
inline std::vector<int32_t> golden_prompt(const nlohmann::json& c, size_t n) {
  std::vector<int32_t> prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
  const std::vector<int32_t> generated = c["generated"].get<std::vector<int32_t>>();
  for (size_t i = 0; prompt.size() < n && i < generated.size(); ++i) prompt.push_back(generated[i]);
  prompt.resize(std::min(prompt.size(), n));
  return prompt;
}

inline GreedyResult compare_greedy(const GreedyCase& g) {
  GreedyResult r;
  const std::string& profile = g.profile;
  const GgmlType kv_type = g.kv_type;
  const double rel_bound = g.rel_bound;
  const char* model_file = g.model_file;
  const char* golden = g.golden;
  const int n_prompts = g.n_prompts;
  const WeightsMode weights = g.weights;
  const std::string path = model_path(model_file);
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "model " << path << " is missing: run scripts/fetch_models.sh first";
    return r;
  }
  auto model = Model::load(path);
  std::ifstream f(source_path(std::string("tests/data/goldens/") + golden));
  if (!f) {
    ADD_FAILURE() << "missing tests/data/goldens/" << golden;
    return r;
  }
  const nlohmann::json goldens = nlohmann::json::parse(f);

  SessionOptions so = float_options(kv_type);
  so.n_ctx = std::max<int64_t>(so.n_ctx, int64_t(g.prompt_tokens) + kGenerate + 8);
  so.weights = weights;
  Session cpu(*model, so);
  so.backend = g.backend;
  so.device = g.device;
  so.device_profile = profile;
  so.gpu_memory = g.gpu_memory;
  so.kv_memory = g.kv_memory;
  so.activations = g.activations;
  so.backend_options = g.backend_options;
  Session gpu(*model, so);
  const int64_t V = model->config().n_vocab;

  int& ties = r.ties;
  double& worst = r.worst;
  for (int c = 0; c < n_prompts; ++c) {
    const std::vector<int32_t> prompt = golden_prompt(goldens["cases"][size_t(c)], g.prompt_tokens);
    cpu.reset();
    gpu.reset();
    cpu.eval(prompt.data(), int64_t(prompt.size()));
    gpu.eval(prompt.data(), int64_t(prompt.size()));
    for (int step = 0; step < kGenerate; ++step) {
      const float* lc = cpu.logits();
      const float* lg = gpu.logits();
      const auto [max_diff, max_abs] = logit_diff(lc, lg, V);
      worst = std::max(worst, max_diff / max_abs);
      if (step == 0) r.worst_prompt = std::max(r.worst_prompt, max_diff / max_abs);
      if (max_diff > rel_bound * max_abs) {
        ADD_FAILURE() << "prompt " << c << " step " << step << ": largest logit difference " << max_diff
                      << " over " << rel_bound << " of the largest logit " << max_abs;
        return r;
      }
      const int32_t tc = argmax(lc, V), tg = argmax(lg, V);
      if (tc != tg) {
        const double margin = double(lc[tc]) - lc[tg];
        EXPECT_LE(margin, 2.0 * max_diff)
            << "prompt " << c << " step " << step << ": cpu picks " << tc << ", " << g.backend << " " << tg
            << " (cpu margin " << margin << ", largest logit difference " << max_diff << ")";
        ++ties;
        break;
      }
      cpu.eval(&tc, 1);
      gpu.eval(&tg, 1);
    }
  }
  ::testing::Test::RecordProperty("near_ties", ties);
  ::testing::Test::RecordProperty("worst_relative_logit_difference", std::to_string(worst));
  std::printf("%s: worst relative logit difference %.3g (after the prompt %.3g), near-ties %d\n",
              (g.label.empty() ? profile : g.label).c_str(), worst, r.worst_prompt, ties);
  return r;
}

}  // namespace tilellm::test
