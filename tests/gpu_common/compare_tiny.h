// Tiny random models for the GPU backends' whole-model tests, and the comparison of a device session with a
// reference session on them: hidden size 64, 4 heads over 2 KV heads of 16, feed-forward 96, 3 layers, 67
// tokens (whole blocks of 32 and 64, so that every block format can hold every matrix), written once into
// the temporary folder (../common/tiny_model.h), so the tests need no model file.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../common/tiny_model.h"
#include "compare_greedy.h"
#include "model/model.h"
#include "runtime/session.h"

namespace tilellm::test {

// The file's path; arch "llama" or "gemma3".
inline std::string gpu_tiny_model(const std::string& arch) {
  TinySpec s;
  s.arch = arch;
  s.n_embd = 64;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_layer = 3;
  s.seed = arch == "llama" ? 7 : 8;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tilellm_gpu_tiny_" + arch + ".gguf")).string();
  tiny_model(s).write(path);
  return path;
}

struct TinyCase {
  std::string arch = "llama";
  std::string backend;  // the device backend
  int device = 0;
  std::string reference = "cpu";  // the reference session's backend (rounded_cpu.h for the quantized path)
  ActivationMode activations = ActivationMode::F32;  // the device session's
  WeightsMode weights = WeightsMode::Native;
  GgmlType kv_type = GgmlType::F32;
  double bound = 1e-4;         // largest logit difference allowed, relative to the largest reference logit
  double decode_bound = -1.0;  // the same for the decode steps after the prompt; negative: `bound`
  int prompt_len = 9;          // the prompt's tokens (past 9: more of the vocabulary, in a fixed order)
  std::shared_ptr<const BackendOptions> backend_options;  // the device backend's own; null: its defaults
};

// The same tokens through the reference session and the device session: a prompt (prompt_len tokens), then 8
// greedy decode steps (the reference's choice fed to both); every step's logits within the bound (the decode
// steps' own where decode_bound is set). Returns the worst relative difference seen; each step's in `steps`
// when given.
inline double compare_tiny(const TinyCase& c, std::vector<double>* steps = nullptr) {
  auto model = Model::load(gpu_tiny_model(c.arch));
  SessionOptions so = float_options(c.kv_type);
  so.weights = c.weights;
  so.backend = c.reference;
  Session ref(*model, so);
  so.backend = c.backend;
  so.device = c.device;
  so.activations = c.activations;
  so.backend_options = c.backend_options;
  Session gpu(*model, so);
  const int64_t V = model->config().n_vocab;
  std::vector<int32_t> prompt = {0, 12, 5, 44, 66, 3, 19, 27, 8};
  for (int i = int(prompt.size()); i < c.prompt_len; ++i) prompt.push_back(int32_t((7 * i + 3) % V));
  ref.eval(prompt.data(), int64_t(prompt.size()));
  gpu.eval(prompt.data(), int64_t(prompt.size()));
  double worst = 0.0;
  for (int step = 0; step <= 8; ++step) {
    const float* lc = ref.logits();
    const float* lg = gpu.logits();
    const auto [diff, mag] = logit_diff(lc, lg, V);
    worst = std::max(worst, diff / mag);
    if (steps) steps->push_back(diff / mag);
    const double bound = step > 0 && c.decode_bound >= 0.0 ? c.decode_bound : c.bound;
    EXPECT_LE(diff, bound * mag) << c.arch << " step " << step;
    if (step == 8) break;
    const int32_t tok = argmax(lc, V);
    ref.eval(&tok, 1);
    gpu.eval(&tok, 1);
  }
  return worst;
}

}  // namespace tilellm::test
