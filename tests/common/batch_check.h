// BatchSession against one Session per sequence (runtime/batch_session.h): prompts split into chunks of odd
// sizes and mixed with other sequences' decode tokens in the same pass, a subset of the sequences per pass, a
// sequence truncated and continued; every pass's logits within `bound` of the sessions'. For the host
// backend (tests/runtime) and the device backends that hold a cache per sequence (tests/opencl,
// tests/vulkan, tests/cuda), with the options the caller gives both sides.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "backends/registry.h"
#include "base/error.h"
#include "model/model.h"
#include "runtime/batch_session.h"
#include "runtime/session.h"

namespace tilellm::test {

inline std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int n_vocab) {
  std::uniform_int_distribution<int> d(0, n_vocab - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = d(rng);
  return v;
}

inline int32_t argmax_of(const float* x, int64_t n) {
  return int32_t(std::max_element(x, x + n) - x);
}

// Largest |a - b| over n values, relative to the largest |b|.
inline double rel_diff(const float* a, const float* b, int64_t n) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < n; ++i) {
    d = std::max(d, double(std::fabs(a[i] - b[i])));
    m = std::max(m, double(std::fabs(b[i])));
  }
  return d / m;
}

inline void check_batch_against_sessions(const Model& model, const SessionOptions& so, double bound) {
  const int64_t V = model.config().n_vocab;
  BatchSession batch(model, so, 3);
  std::vector<std::unique_ptr<Session>> ref;
  for (int i = 0; i < 3; ++i) ref.push_back(std::make_unique<Session>(model, so));
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts = {random_tokens(rng, 7, int(V)), random_tokens(rng, 13, int(V)),
                                               random_tokens(rng, 5, int(V))};
  // Each reference session reads its whole prompt at once; the batch reads them in chunks across passes.
  for (int i = 0; i < 3; ++i)
    ref[size_t(i)]->eval(prompts[size_t(i)].data(), int64_t(prompts[size_t(i)].size()));

  auto compare = [&](int entry, int seq, const char* what) {
    EXPECT_LT(rel_diff(batch.logits(entry), ref[size_t(seq)]->logits(), V), bound)
        << what << ", sequence " << seq;
  };
  {
    const BatchSession::Entry e[3] = {
        {1, prompts[1].data(), 9}, {0, prompts[0].data(), 4}, {2, prompts[2].data(), 5}};
    batch.eval(e, 3);
    compare(2, 2, "a whole prompt beside two partial ones");
  }
  {
    const BatchSession::Entry e[2] = {{0, prompts[0].data() + 4, 3}, {1, prompts[1].data() + 9, 4}};
    batch.eval(e, 2);
    compare(0, 0, "the rest of a prompt");
    compare(1, 1, "the rest of another prompt");
  }
  // Greedy decode: every sequence each pass, but sequence 1 sits out every third pass.
  for (int step = 0; step < 8; ++step) {
    BatchSession::Entry e[3];
    int32_t next[3];
    int n = 0;
    for (int seq = 0; seq < 3; ++seq) {
      if (seq == 1 && step % 3 == 2) continue;
      next[seq] = argmax_of(ref[size_t(seq)]->logits(), V);
      e[n++] = {seq, &next[seq], 1};
      ref[size_t(seq)]->eval(&next[seq], 1);
    }
    batch.eval(e, n);
    for (int i = 0; i < n; ++i) compare(i, e[i].seq, "a decode step");
  }
  // serve's order: the decoding sequences' tokens first, then a chunk of another's prompt.
  {
    const std::vector<int32_t> chunk = random_tokens(rng, 4, int(V));
    BatchSession::Entry e[3];
    int32_t next[2];
    for (int seq = 0; seq < 2; ++seq) {
      next[seq] = argmax_of(ref[size_t(seq)]->logits(), V);
      e[seq] = {seq, &next[seq], 1};
      ref[size_t(seq)]->eval(&next[seq], 1);
    }
    e[2] = {2, chunk.data(), 4};
    ref[2]->eval(chunk.data(), 4);
    batch.eval(e, 3);
    for (int i = 0; i < 3; ++i) compare(i, e[i].seq, "decode tokens beside a prompt chunk");
  }
  for (int seq = 0; seq < 3; ++seq) EXPECT_EQ(batch.tokens(seq), ref[size_t(seq)]->tokens()) << seq;

  // Truncated and continued: as a session truncated the same way.
  batch.truncate(2, 3);
  ref[2]->truncate(3);
  const std::vector<int32_t> more = random_tokens(rng, 6, int(V));
  const BatchSession::Entry e{2, more.data(), 6};
  batch.eval(&e, 1);
  ref[2]->eval(more.data(), 6);
  compare(0, 2, "after truncate");

  // The hidden states of an entry are its rows of the pass (the last one gives the logits), read on the host
  // backend; a device backend refuses (its residual stream is in its own memory).
  int64_t rows = 0;
  if (require_backend(so.backend).host) {
    batch.hidden_states(0, &rows);
    EXPECT_EQ(rows, 6);
  } else {
    EXPECT_THROW(batch.hidden_states(0, &rows), Error);
  }
}

}  // namespace tilellm::test
