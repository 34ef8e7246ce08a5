// BatchSession (runtime/batch_session.h, model/forward.h forward_spans): several sequences in one forward
// pass give each sequence the logits a Session of its own gives it — prompts split into chunks of odd sizes
// and mixed with other sequences' decode tokens in the same pass, a subset of the sequences per pass, a
// sequence truncated and continued — on tiny random models (dense llama, gemma3 with its sliding window,
// llama with experts); a decode pass over every sequence allocates nothing; a backend that holds one KV cache
// is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../common/alloc_counter.h"
#include "../common/batch_check.h"
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

TEST(BatchSession, matches_one_session_per_sequence_llama) {
  test::TinySpec s;
  test::check_batch_against_sessions(*tiny(s, "llama"), options(), 2e-5);
}

TEST(BatchSession, matches_one_session_per_sequence_gemma3_sliding_window) {
  test::TinySpec s;
  s.arch = "gemma3";
  s.n_layer = 7;  // local and global layers
  test::check_batch_against_sessions(*tiny(s, "gemma3"), options(), 2e-5);
}

TEST(BatchSession, matches_one_session_per_sequence_llama_experts) {
  test::TinySpec s;
  s.n_expert = 4;
  s.n_expert_used = 2;
  test::check_batch_against_sessions(*tiny(s, "moe"), options(), 2e-5);
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
    for (int i = 0; i < 4; ++i) toks[i] = test::argmax_of(batch.logits(i), model->config().n_vocab);
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

TEST(BatchSession, refuses_a_backend_with_one_cache) {
  test::TinySpec s;
  auto model = tiny(s, "device");
  SessionOptions so = options();
  so.backend = "occupancy-test";  // not the host backend, and holds no cache per sequence
  try {
    BatchSession b(*model, so, 2);
    ADD_FAILURE() << "a backend with one cache was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache per sequence"), std::string::npos) << e.what();
  }
}

TEST(BatchSession, refuses_a_host_prefill_it_would_not_run) {
  test::TinySpec s;
  auto model = tiny(s, "prefill");
  for (PrefillMode m : {PrefillMode::Cpu, PrefillMode::Auto}) {
    SessionOptions so = options();
    so.prefill = m;
    try {
      BatchSession b(*model, so, 2);
      ADD_FAILURE() << "--prefill " << int(m) << " was taken and ignored";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("leave --prefill at gpu"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tilellm
