// FB-KV contract: once a session exists, decoding allocates nothing. Every C++ allocation of this test
// program goes through the counting operator new below; 32 decode steps (forward pass, sampling, acceptance)
// must add none.
#include <gtest/gtest.h>

#include <chrono>

#include "../common/alloc_counter.h"
#include "../common/paths.h"
#include "../common/sim_sensors.h"
#include "base/error.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/telemetry/pacer.h"

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

// Telemetry sampling on its own thread at 1 kHz (simulated sensors, hot enough that the pacing controller
// acts: pauses, then fewer threads) while the decode loop hands every step to the pacer: nothing on any
// thread allocates during the 32 steps.
TEST(DecodeAllocations, none_with_telemetry_sampling_and_the_pacer_acting_smollm2) {
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so;
  so.n_ctx = 96;
  so.n_threads = 2;
  Session session(*model, so);
  test::SimSensors sim;
  sim.temp_c(99);
  telemetry::TelemetryOptions to;
  to.sysfs_root = sim.root();
  to.nvml = false;
  to.sample_hz = 1000;
  to.capacity_hint_s = 30;
  telemetry::Telemetry tel(to);
  telemetry::PacerOptions po;
  po.limits = telemetry::parse_pace_target("temp=80,p99=1000,hold=0.001");
  po.fixed = telemetry::parse_pace("sleep=50,every=3");
  telemetry::Pacer pacer(session, &tel, po);
  SamplerParams sp;
  sp.seed = 7;
  Sampler sampler(sp, int32_t(model->config().n_vocab));
  const std::vector<int32_t> prompt = model->tokenizer().encode("The quick brown fox", true, false);
  tel.start();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point p0 = Clock::now();
  session.eval(prompt.data(), int64_t(prompt.size()));
  for (int32_t t : prompt) sampler.accept(t);
  pacer.after_pass(p0, Clock::now(), int64_t(prompt.size()), false);

  const long before = test::allocation_count();
  for (int step = 0; step < 32; ++step) {
    const Clock::time_point t0 = Clock::now();
    const int32_t id = sampler.sample(session.logits());
    sampler.accept(id);
    session.eval(&id, 1);
    pacer.after_pass(t0, Clock::now(), 1, true);
  }
  const long after = test::allocation_count();
  tel.stop();
  EXPECT_EQ(after - before, 0) << "allocations during 32 paced, sampled decode steps";
  EXPECT_GT(tel.samples().size(), 5u) << "the sampling thread ran meanwhile";
  EXPECT_EQ(tel.passes().size(), 33u);
  EXPECT_FALSE(tel.decisions().empty()) << "the controller acted meanwhile";
  EXPECT_GT(pacer.level(), 0);
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
