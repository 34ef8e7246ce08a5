// Hybrid prefill (--prefill cpu) against the device alone, for any device backend (tests/opencl,
// tests/vulkan): the session runs prompts on the CPU's tiles, sends their KV rows up and decodes on the
// device; its logits must be the all-device session's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/paths.h"
#include "compare_greedy.h"
#include "model/model.h"
#include "runtime/session.h"

namespace tilellm::test {

// Largest |a - b| over the largest |a|.
inline double relative_difference(const float* a, const float* b, int64_t n) {
  double diff = 0.0, mag = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - b[i]));
    mag = std::max(mag, std::abs(double(a[i])));
  }
  return diff / mag;
}

// Hybrid prefill (--prefill cpu): prompt batches of more than one token run on the CPU backend over the host
// cache and their KV rows go up; decode runs on the device. Against the all-device session, with the float
// path on both (--activations f32, f32 cache: only float rounding separates them, bound 1e-4): a
// 13-token prompt in batches of 8 and 5, three decode steps, then a second 5-token prompt — whose CPU batch
// needs the three rows the device decoded brought down first — and two more steps. In a converted --weights
// mode the CPU side converts the same way (its float path then holds the same exact weights as F32 rows).
inline void expect_hybrid_prefill_equals_the_device_path(const std::string& backend, int device_index,
                                                         WeightsMode weights) {
  const std::string path = model_path(kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so = float_options(GgmlType::F32);
  so.n_batch = 8;
  so.weights = weights;
  so.backend = backend;
  so.device = device_index;
  Session device(*model, so);
  so.prefill = PrefillMode::Cpu;
  Session hybrid(*model, so);
  const int64_t V = model->config().n_vocab;
  auto compare = [&](const char* what) {
    EXPECT_LE(relative_difference(device.logits(), hybrid.logits(), V), 1e-4) << what;
    return argmax(device.logits(), V);
  };
  const std::vector<int32_t> prompt = {1, 504, 3492, 282, 253, 1345, 30, 2600, 16, 57, 8, 4411, 42};
  device.eval(prompt.data(), 13);
  hybrid.eval(prompt.data(), 13);
  int32_t tok = compare("prompt");
  for (int step = 0; step < 3; ++step) {
    device.eval(&tok, 1);
    hybrid.eval(&tok, 1);
    tok = compare("decode");
  }
  const std::vector<int32_t> more = {tok, 2600, 16, 57, 8};
  device.eval(more.data(), 5);
  hybrid.eval(more.data(), 5);
  tok = compare("second prompt");
  for (int step = 0; step < 2; ++step) {
    device.eval(&tok, 1);
    hybrid.eval(&tok, 1);
    tok = compare("decode after the second prompt");
  }
  EXPECT_EQ(device.n_past(), hybrid.n_past());
}

}  // namespace tilellm::test
