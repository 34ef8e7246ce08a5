// Hybrid prefill (--prefill cpu) against the device alone, for any device backend (tests/opencl,
// tests/vulkan, tests/cuda): the session runs prompts on the CPU's tiles, sends their KV rows up and decodes
// on the device; its logits must be the all-device session's. And --prefill auto: its two speeds measured
// once, kept for the next session, and its logits the device's whichever side it chose.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../common/paths.h"
#include "backends/registry.h"
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

// --prefill auto: the first session times a batch of n_batch (8) tokens on the device and on the CPU's
// tiles (both speeds positive; the device's may be the bound from its 8-token pass), writes them beside the
// program cache (one prefill-*.txt file in `cache_dir`) and a second session of the same options reuses them
// without timing; with n_batch 24 the device is timed at 8, 16 or 24 tokens (doubling while a pass is short);
// the logits after a 13-token prompt and two decode steps are the all-device session's (float path, bound
// 1e-4 as above). A context of 72 keeps the key apart from the other tests' sessions in the process.
// cache_flag: the backend's cache option ("--cl-cache"), set to cache_dir, and then to off, with which a
// session measures (another context: another key) and writes no file; empty: the backend has none (its
// files go to $TILELLM_CACHE_DIR). other: another value of one of the backend's options that may change
// its speed ({"--cl-gemm-split", "off"}): a session with it measures again and keeps a file of its own.
inline void expect_auto_prefill_measures_once(const std::string& backend, int device_index,
                                              const std::string& cache_dir, const std::string& cache_flag,
                                              const std::pair<std::string, std::string>& other) {
  const std::string path = model_path(kSmolLM2);
  ASSERT_MODEL(path);
  std::filesystem::remove_all(cache_dir);
  ASSERT_EQ(setenv("TILELLM_CACHE_DIR", cache_dir.c_str(), 1), 0);
  auto model = Model::load(path);
  SessionOptions so = float_options(GgmlType::F32);
  so.n_ctx = 72;
  so.n_batch = 8;
  so.backend = backend;
  so.device = device_index;
  std::map<std::string, std::string> given;
  if (!cache_flag.empty()) given[cache_flag] = cache_dir;
  so.backend_options = make_backend_options(require_backend(backend), given);
  Session device(*model, so);
  EXPECT_EQ(device.prefill_speeds(), nullptr) << "only --prefill auto measures";
  so.prefill = PrefillMode::Auto;
  Session first(*model, so);
  ASSERT_NE(first.prefill_speeds(), nullptr);
  const PrefillSpeeds a = *first.prefill_speeds();
  EXPECT_EQ(a.source.rfind("measured", 0), 0u) << a.source;
  EXPECT_EQ(a.tokens, 8);
  EXPECT_EQ(a.device_tokens, 8);
  EXPECT_GT(a.device_tps, 0.0);
  EXPECT_GT(a.host_tps, 0.0);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(cache_dir))
    files += e.path().filename().string().rfind("prefill-", 0) == 0;
  EXPECT_EQ(files, 1) << "the speeds' file in " << cache_dir;
  Session second(*model, so);
  const PrefillSpeeds b = *second.prefill_speeds();
  EXPECT_EQ(b.source, "kept in this process");
  EXPECT_EQ(b.device_tps, a.device_tps);
  EXPECT_EQ(b.host_tps, a.host_tps);
  {
    SessionOptions wide = so;
    wide.n_batch = 24;
    Session third(*model, wide);
    const PrefillSpeeds w = *third.prefill_speeds();
    EXPECT_EQ(w.source.rfind("measured", 0), 0u) << "another batch is another key: " << w.source;
    EXPECT_EQ(w.tokens, 24);
    EXPECT_TRUE(w.device_tokens == 8 || w.device_tokens == 16 || w.device_tokens == 24) << w.device_tokens;
    EXPECT_GT(w.device_tps, 0.0);
  }
  auto prefill_files = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(cache_dir))
      n += e.path().filename().string().rfind("prefill-", 0) == 0;
    return n;
  };
  EXPECT_EQ(prefill_files(), 2) << "the 8- and 24-token batches' files";
  {
    SessionOptions changed = so;
    std::map<std::string, std::string> with_other = given;
    with_other.insert(other);
    changed.backend_options = make_backend_options(require_backend(backend), with_other);
    Session fourth(*model, changed);
    EXPECT_EQ(fourth.prefill_speeds()->source.rfind("measured", 0), 0u)
        << other.first << " " << other.second << " is another key: " << fourth.prefill_speeds()->source;
  }
  EXPECT_EQ(prefill_files(), 3) << "and the other option's";
  if (!cache_flag.empty()) {
    SessionOptions off = so;
    off.n_ctx = 80;
    off.backend_options = make_backend_options(require_backend(backend), {{cache_flag, "off"}});
    Session uncached(*model, off);
    EXPECT_EQ(uncached.prefill_speeds()->source.rfind("measured", 0), 0u);
    EXPECT_EQ(prefill_files(), 3) << cache_flag << " off: the speeds are kept in the process only";
  }
  const int64_t V = model->config().n_vocab;
  const std::vector<int32_t> prompt = {1, 504, 3492, 282, 253, 1345, 30, 2600, 16, 57, 8, 4411, 42};
  device.eval(prompt.data(), 13);
  second.eval(prompt.data(), 13);
  EXPECT_LE(relative_difference(device.logits(), second.logits(), V), 1e-4)
      << "prompt on " << (b.host_faster() ? "the host" : "the device");
  for (int step = 0; step < 2; ++step) {
    const int32_t tok = argmax(device.logits(), V);
    device.eval(&tok, 1);
    second.eval(&tok, 1);
    EXPECT_LE(relative_difference(device.logits(), second.logits(), V), 1e-4) << "decode step " << step;
  }
  unsetenv("TILELLM_CACHE_DIR");
}

}  // namespace tilellm::test
