// Save/restore on a device backend (tests/opencl, tests/vulkan), where the KV cache lives in device memory:
// the rows come down to the file and go back up on restore. One device session (they are slow to make on
// the emulated devices of the tests) saves mid-generation and goes on: that is the uninterrupted run. Then
// its cache is overwritten by another conversation and the file is restored into it, directly and by way
// of a CPU session that loaded the file and saved it again: each time the session must go on exactly as it
// did uninterrupted (the same greedy tokens, the same logits bit for bit).
#pragma once

#include <gtest/gtest.h>

#include "../common/paths.h"
#include "../common/session_state.h"
#include "compare_greedy.h"

namespace tilellm::test {

// hybrid: with --prefill cpu, whose session keeps a host copy of the cache beside the device's; else the
// cache lives on the device alone. n_before greedy tokens are decoded before the save, n_after after it.
inline void expect_device_restore_equals_uninterrupted(const std::string& backend, int device_index,
                                                       bool hybrid, int n_before, int n_after,
                                                       KvMemory kv_memory = KvMemory::Buffer) {
  const std::string path = model_path(kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so = float_options(GgmlType::F16);
  so.backend = backend;
  so.device = device_index;
  so.kv_memory = kv_memory;
  if (hybrid) {
    so.prefill = PrefillMode::Cpu;
    so.n_batch = 8;
  }
  const std::vector<int32_t> prompt = {1, 504, 3492, 282, 253, 1345, 30, 2600, 16, 57, 8};
  const std::vector<int32_t> other = {1, 57, 8, 4411, 42, 16, 1345, 253, 282, 3492, 504, 30, 2600, 7, 9, 12};
  const std::string file = state_path(backend + (hybrid ? "_hybrid" : "_device") +
                                      (kv_memory == KvMemory::Image ? "_kvimage" : ""));
  const std::string again = file + ".again";

  Session dev(*model, so);
  if (!hybrid) {
    EXPECT_EQ(dev.host_kv_bytes(), 0u) << "the cache lives on the device alone";
  }
  dev.eval(prompt.data(), int64_t(prompt.size()));
  greedy_tokens(dev, n_before);
  dev.save_state(file);
  const std::vector<int32_t> saved = dev.tokens();
  const std::vector<int32_t> tail = greedy_tokens(dev, n_after);
  const std::vector<float> last(dev.logits(), dev.logits() + model->config().n_vocab);

  // The file through a CPU session of the same model, context and cache type, saved again from there.
  {
    Session host(*model, float_options(GgmlType::F16));
    host.load_state(file);
    EXPECT_EQ(host.tokens(), saved);
    host.save_state(again);
  }
  for (const std::string& f : {file, again}) {
    dev.reset();
    dev.eval(other.data(), int64_t(other.size()));  // every saved row overwritten on the device
    dev.load_state(f);
    EXPECT_EQ(dev.tokens(), saved);
    EXPECT_EQ(greedy_tokens(dev, n_after), tail) << "restored from " << f;
    EXPECT_EQ(std::vector<float>(dev.logits(), dev.logits() + model->config().n_vocab), last)
        << "logits after the last step, restored from " << f;
  }
  std::filesystem::remove(file);
  std::filesystem::remove(again);
}

}  // namespace tilellm::test
