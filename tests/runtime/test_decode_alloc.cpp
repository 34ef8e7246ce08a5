// FB-KV contract: once a session exists, decoding allocates nothing. Every C++ allocation of this test
// program goes through the counting operator new below; 32 decode steps (forward pass, sampling, acceptance)
// must add none.
#include <gtest/gtest.h>

#include "../common/alloc_counter.h"
#include "../common/paths.h"
#include "base/error.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace tilellm {
namespace {

void check_no_decode_allocations(const std::string& file, WeightsMode weights = WeightsMode::Native) {
  const std::string path = test::model_path(file);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so;
  so.n_ctx = 96;
  so.n_threads = 2;
  so.weights = weights;
  Session session(*model, so);
  SamplerParams sp;
  sp.seed = 7;
  sp.repeat_penalty = 1.1f;
  Sampler sampler(sp, int32_t(model->config().n_vocab));
  const std::vector<int32_t> prompt = model->tokenizer().encode("The quick brown fox", true, false);
  session.eval(prompt.data(), int64_t(prompt.size()));
  for (int32_t t : prompt) sampler.accept(t);

  const long before = test::allocation_count();
  for (int step = 0; step < 32; ++step) {
    const int32_t id = sampler.sample(session.logits());
    sampler.accept(id);
    session.eval(&id, 1);
  }
  const long after = test::allocation_count();
  EXPECT_EQ(after - before, 0) << "allocations during 32 decode steps";
  EXPECT_EQ(session.n_past(), int64_t(prompt.size()) + 32);

  // The counter itself works: an allocation outside decode is seen.
  auto* probe = new std::vector<int>(3);
  EXPECT_GT(test::allocation_count(), after);
  delete probe;
}

TEST(DecodeAllocations, none_across_32_steps_smollm2) {
  check_no_decode_allocations(test::kSmolLM2);
}
TEST(DecodeAllocations, none_across_32_steps_gemma3) {
  check_no_decode_allocations(test::kGemma3);
}
TEST(DecodeAllocations, none_across_32_steps_smollm2_converted_to_int4b64) {
  check_no_decode_allocations(test::kSmolLM2, WeightsMode::Int4B64);
}

// --weights f32: the fp32 GEMM's packed activations live in scratch sized at load.
TEST(DecodeAllocations, none_across_32_steps_smollm2_converted_to_f32) {
  check_no_decode_allocations(test::kSmolLM2, WeightsMode::F32);
}

TEST(Session, hybrid_prefill_is_refused_for_the_cpu_backend) {
  // --prefill cpu|auto splits work between the CPU and a device: with the CPU backend alone it is a named
  // error, not a silent no-op.
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so;
  so.n_ctx = 16;
  so.n_threads = 1;
  for (PrefillMode mode : {PrefillMode::Cpu, PrefillMode::Auto}) {
    so.prefill = mode;
    try {
      Session session(*model, so);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--prefill"), std::string::npos) << e.what();
    }
  }
}

TEST(Session, prompt_longer_than_context_is_a_clear_error_and_leaves_state) {
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so;
  so.n_ctx = 16;
  so.n_threads = 1;
  Session session(*model, so);
  std::vector<int32_t> ids(17, 42);
  try {
    session.eval(ids.data(), int64_t(ids.size()));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context size is 16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(session.n_past(), 0);
  session.eval(ids.data(), 16);  // exactly the context fits
  EXPECT_EQ(session.n_past(), 16);
  EXPECT_THROW(session.eval(ids.data(), 1), Error);
}

}  // namespace
}  // namespace tilellm
