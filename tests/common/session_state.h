// The save/restore check every backend's tests share: a session saved to a file and restored into a fresh
// session must go on exactly as the uninterrupted session does (the same greedy tokens, the same logits bit
// for bit).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace tilellm::test {

inline std::string state_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tilellm_state_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// n greedy tokens from a session holding logits; each is evaluated, so the session ends holding logits.
inline std::vector<int32_t> greedy_tokens(Session& s, int n) {
  SamplerParams p;
  p.temperature = 0.0f;
  Sampler sampler(p, int32_t(s.model().config().n_vocab));
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t id = sampler.sample(s.logits());
    out.push_back(id);
    s.eval(&id, 1);
  }
  return out;
}

inline bool same_logits(const Session& a, const Session& b) {
  const size_t n = size_t(a.model().config().n_vocab);
  return std::memcmp(a.logits(), b.logits(), n * sizeof(float)) == 0;
}

// Uninterrupted: prompt, n_before greedy tokens, n_after more. Interrupted: the same up to n_before, saved,
// restored into a fresh session with the same options, then n_after tokens there.
inline void expect_restore_equals_uninterrupted(const Model& m, const SessionOptions& so,
                                                const std::vector<int32_t>& prompt, int n_before, int n_after,
                                                const std::string& name) {
  Session whole(m, so);
  whole.eval(prompt.data(), int64_t(prompt.size()));
  const std::vector<int32_t> head = greedy_tokens(whole, n_before);
  const std::vector<int32_t> tail = greedy_tokens(whole, n_after);

  const std::string file = state_path(name);
  std::vector<int32_t> saved_tokens;
  {
    Session first(m, so);
    first.eval(prompt.data(), int64_t(prompt.size()));
    EXPECT_EQ(greedy_tokens(first, n_before), head);
    first.save_state(file);
    saved_tokens = first.tokens();
  }
  Session second(m, so);
  second.load_state(file);
  EXPECT_EQ(second.n_past(), int64_t(prompt.size()) + n_before);
  EXPECT_EQ(second.tokens(), saved_tokens);
  EXPECT_TRUE(second.has_logits());
  const std::vector<int32_t> resumed = greedy_tokens(second, n_after);
  EXPECT_EQ(resumed, tail) << "restored session diverged from the uninterrupted one";
  EXPECT_TRUE(same_logits(second, whole)) << "logits after the last step differ";
  std::filesystem::remove(file);
}

}  // namespace tilellm::test
