// BatchSession (runtime/batch_session.h, model/forward.h forward_spans): several sequences in one forward
// pass give each sequence the logits a Session of its own gives it — prompts split into chunks of odd sizes
// and mixed with other sequences' decode tokens in the same pass, a subset of the sequences per pass, a
// sequence truncated and continued — on tiny random models (dense llama, gemma3 with its sliding window,
// llama with experts); a decode pass over every sequence allocates nothing; a device backend is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../common/alloc_counter.h"
#include "../common/session_state.h"
#include "../common/tiny_model.h"
#include "base/error.h"
#include "runtime/batch_session.h"
#include "runtime/session.h"

namespace tilellm {
namespace {

std::unique_ptr<Model> tiny(const test::TinySpec& spec, const std::string& name) {
  const std::string p = test::state_path("batch_" + name + ".gguf");
  test::tiny_model(spec).write(p);
  auto m = Model::load(p);
  std::filesystem::remove(p);  // the mapping stays valid
  return m;
}

SessionOptions options() {
  SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  so.n_batch = 32;
  so.kv_type = GgmlType::F32;
  so.activations = ActivationMode::F32;  // the exact float path: batched and single rows agree to rounding
  return so;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int n_vocab) {
  std::uniform_int_distribution<int> d(0, n_vocab - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = d(rng);
  return v;
}

int32_t argmax(const float* x, int64_t n) {
  return int32_t(std::max_element(x, x + n) - x);
}

// Largest |a - b| over n values, relative to the largest |b|.
double rel_diff(const float* a, const float* b, int64_t n) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < n; ++i) {
    d = std::max(d, double(std::fabs(a[i] - b[i])));
    m = std::max(m, double(std::fabs(b[i])));
  }
  return d / m;
}

void check_against_sessions(const Model& model) {
  const int64_t V = model.config().n_vocab;
  const SessionOptions so = options();
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
    EXPECT_LT(rel_diff(batch.logits(entry), ref[size_t(seq)]->logits(), V), 2e-5)
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
      next[seq] = argmax(ref[size_t(seq)]->logits(), V);
      e[n++] = {seq, &next[seq], 1};
      ref[size_t(seq)]->eval(&next[seq], 1);
    }
    batch.eval(e, n);
    for (int i = 0; i < n; ++i) compare(i, e[i].seq, "a decode step");
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

  // The hidden states of an entry are its rows of the pass: the last one gives the logits.
  int64_t rows = 0;
  batch.hidden_states(0, &rows);
  EXPECT_EQ(rows, 6);
}

TEST(BatchSession, matches_one_session_per_sequence_llama) {
  test::TinySpec s;
  check_against_sessions(*tiny(s, "llama"));
}

TEST(BatchSession, matches_one_session_per_sequence_gemma3_sliding_window) {
  test::TinySpec s;
  s.arch = "gemma3";
  s.n_layer = 7;  // local and global layers
  check_against_sessions(*tiny(s, "gemma3"));
}

TEST(BatchSession, matches_one_session_per_sequence_llama_experts) {
  test::TinySpec s;
  s.n_expert = 4;
  s.n_expert_used = 2;
  check_against_sessions(*tiny(s, "moe"));
}

TEST(BatchSession, decode_pass_over_every_sequence_allocates_nothing) {
  test::TinySpec s;
  auto model = tiny(s, "alloc");
  BatchSession batch(*model, options(), 4);
  int32_t toks[4] = {1, 2, 3, 4};
  BatchSession::Entry e[4];
  for (int i = 0; i < 4; ++i) e[i] = {i, &toks[i], 1};
  batch.eval(e, 4);
  const long before = test::allocation_count();
  for (int step = 0; step < 16; ++step) {
    for (int i = 0; i < 4; ++i) toks[i] = argmax(batch.logits(i), model->config().n_vocab);
    batch.eval(e, 4);
  }
  EXPECT_EQ(test::allocation_count() - before, 0);
}

TEST(BatchSession, refuses_bad_entries_and_leaves_sequences_unchanged) {
  test::TinySpec s;
  auto model = tiny(s, "bad");
  BatchSession batch(*model, options(), 2);
  std::vector<int32_t> long_prompt(65, 3);
  const BatchSession::Entry too_long{0, long_prompt.data(), 65};
  EXPECT_THROW(batch.eval(&too_long, 1), Error);
  const int32_t bad = 1000;
  const BatchSession::Entry bad_id{1, &bad, 1};
  EXPECT_THROW(batch.eval(&bad_id, 1), Error);
  const int32_t ok = 5;
  const BatchSession::Entry twice[2] = {{0, &ok, 1}, {0, &ok, 1}};
  EXPECT_THROW(batch.eval(twice, 2), Error);
  EXPECT_TRUE(batch.tokens(0).empty());
  EXPECT_TRUE(batch.tokens(1).empty());
}

TEST(BatchSession, refuses_a_device_backend) {
  test::TinySpec s;
  auto model = tiny(s, "device");
  SessionOptions so = options();
  so.backend = "opencl";
  EXPECT_THROW(BatchSession(*model, so, 2), Error);
}

}  // namespace
}  // namespace tilellm
