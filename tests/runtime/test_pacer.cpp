// The pacing policy applied to a real session (runtime/telemetry/pacer.h): a tiny random model on the
// test-only "occupancy-test" backend (every pacing measure offered), simulated sensors read by the sampling
// thread, and the decode loop handing each step to the pacer.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "../common/sim_sensors.h"
#include "../common/tiny_model.h"
#include "base/error.h"
#include "model/model.h"
#include "occupancy_backend.h"
#include "runtime/session.h"
#include "runtime/telemetry/pacer.h"

namespace tilellm::telemetry {
namespace {

using Clock = std::chrono::steady_clock;

class PacerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ =
        (std::filesystem::temp_directory_path() / ("tilellm-pacer-" + std::to_string(::getpid()) + ".gguf"))
            .string();
    test::tiny_model(test::TinySpec{}).write(path_);
    model_ = Model::load(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::unique_ptr<Session> session(const std::string& backend, int threads, double tile_mask = 0) {
    SessionOptions so;
    so.backend = backend;
    so.n_threads = threads;
    so.n_ctx = 128;
    so.tile_mask = tile_mask;
    return std::make_unique<Session>(*model_, so);
  }

  // One decode step handed to the pacer; the cache starts over before it fills.
  void step(Session& s, Pacer& p) {
    if (s.n_past() + 1 >= s.n_ctx()) s.reset();
    const int32_t id = int32_t(2 + s.n_past() % 40);
    const Clock::time_point t0 = Clock::now();
    s.eval(&id, 1);
    p.after_pass(t0, Clock::now(), 1, true);
  }

  // Steps until cond() holds or `seconds` pass; whether it held.
  template <class F>
  bool steps_until(Session& s, Pacer& p, F&& cond, double seconds = 20) {
    const auto end =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (!cond()) {
      if (Clock::now() > end) return false;
      step(s, p);
    }
    return true;
  }

  std::string path_;
  std::unique_ptr<Model> model_;
};

TEST_F(PacerTest, climbs_the_whole_ladder_under_a_hot_reading_and_comes_back_down) {
  test::SimSensors sim;
  sim.temp_c(95);
  TelemetryOptions to;
  to.sysfs_root = sim.root();
  to.nvml = false;
  to.sample_hz = 200;
  Telemetry tel(to);
  auto s = session("occupancy-test", 2, 0.25);
  PacerOptions po;
  po.limits = parse_pace_target("temp=80,hold=0.02");
  po.tile_mask = true;
  tel.start();
  {
    Pacer p(*s, &tel, po);
    // 0, ten pauses, 2 -> 1 thread, two occupancy steps, the mask.
    ASSERT_EQ(p.ladder().size(), 15u);
    EXPECT_EQ(test::occupancy_log().mask_fraction, 0.25);
    const int top = int(p.ladder().size()) - 1;
    ASSERT_TRUE(steps_until(*s, p, [&] { return p.level() == top; })) << "stuck at level " << p.level();
    EXPECT_EQ(s->active_threads(), 1);
    EXPECT_EQ(test::occupancy_log().occupancy, 2);
    EXPECT_TRUE(test::occupancy_log().mask);
    for (int i = 0; i < 20; ++i) step(*s, p);
    EXPECT_EQ(p.level(), top) << "held at the top while the reading stays over";
    EXPECT_GT(p.paused_s(), 0);

    sim.temp_c(30);
    ASSERT_TRUE(steps_until(*s, p, [&] { return p.level() == 0; })) << "stuck at level " << p.level();
    EXPECT_EQ(s->active_threads(), 2);
    EXPECT_EQ(test::occupancy_log().occupancy, 0);
    EXPECT_FALSE(test::occupancy_log().mask);
  }
  tel.stop();
  // Every decision went up then down one level at a time, each with the reading that caused it.
  const std::vector<Decision> ds = tel.decisions();
  ASSERT_EQ(ds.size(), 2u * 14u);
  for (size_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(std::abs(ds[i].to - ds[i].from), 1);
    EXPECT_EQ(ds[i].cause, Limit::Temp);
    EXPECT_NEAR(ds[i].reading, i < 14 ? 95 : 30, 0.01);
    if (i > 0) {
      EXPECT_GE(ds[i].t - ds[i - 1].t, 0.02 - 1e-9);
    }
  }
  // The passes carry the level and threads they ran with; paused ones follow a decode step.
  const std::vector<TokenRecord> passes = tel.passes();
  ASSERT_FALSE(passes.empty());
  bool paused = false, one_thread = false, masked = false;
  for (size_t i = 0; i < passes.size(); ++i) {
    const TokenRecord& r = passes[i];
    paused = paused || (r.pause_ms > 0 && r.level > 0);
    one_thread = one_thread || r.threads == 1;
    masked = masked || r.masked;
    // The pause after a step is the level's decided on it: none where it and the next step ran at 0.
    if (r.level == 0 && (i + 1 == passes.size() || passes[i + 1].level == 0)) {
      EXPECT_EQ(r.pause_ms, 0.0f) << "pass " << i;
    }
  }
  EXPECT_TRUE(paused && one_thread && masked);
}

TEST_F(PacerTest, does_nothing_without_a_limit) {
  test::SimSensors sim;
  sim.temp_c(150);
  TelemetryOptions to;
  to.sysfs_root = sim.root();
  to.nvml = false;
  to.sample_hz = 200;
  Telemetry tel(to);
  auto s = session("cpu", 2);
  tel.start();
  {
    Pacer p(*s, &tel, PacerOptions{});
    for (int i = 0; i < 200; ++i) step(*s, p);
    EXPECT_EQ(p.level(), 0);
    EXPECT_EQ(s->active_threads(), 2);
    EXPECT_EQ(p.paused_s(), 0.0);
  }
  tel.stop();
  EXPECT_TRUE(tel.decisions().empty());
  const std::vector<TokenRecord> passes = tel.passes();
  ASSERT_EQ(passes.size(), 200u);
  for (const TokenRecord& r : passes) {
    EXPECT_EQ(r.pause_ms, 0.0f);
    EXPECT_EQ(r.level, 0);
    EXPECT_EQ(r.threads, 2);
    EXPECT_GT(r.compute_ms, 0.0f);
  }
}

TEST_F(PacerTest, a_fixed_pace_sleeps_after_every_nth_step) {
  Telemetry tel(TelemetryOptions{.sample_hz = 10, .sysfs_root = "/nonexistent-root", .nvml = false});
  auto s = session("cpu", 1);
  {
    PacerOptions po;
    po.fixed = parse_pace("sleep=3000,every=4");
    Pacer p(*s, &tel, po);
    for (int i = 0; i < 16; ++i) step(*s, p);
    EXPECT_GE(p.paused_s(), 4 * 0.003);
  }
  const std::vector<TokenRecord> passes = tel.passes();
  ASSERT_EQ(passes.size(), 16u);
  for (size_t i = 0; i < passes.size(); ++i) {
    if ((i + 1) % 4 == 0) {
      EXPECT_GE(passes[i].pause_ms, 3.0f) << "step " << i + 1;
    } else {
      EXPECT_EQ(passes[i].pause_ms, 0.0f) << "step " << i + 1;
    }
  }
}

TEST_F(PacerTest, a_limit_with_nothing_to_read_it_is_a_clear_error) {
  Telemetry tel(TelemetryOptions{.sample_hz = 10, .sysfs_root = "/nonexistent-root", .nvml = false});
  auto s = session("cpu", 1);
  auto err = [&](const char* target, bool mask = false) -> std::string {
    PacerOptions po;
    po.limits = parse_pace_target(target);
    po.tile_mask = mask;
    try {
      Pacer p(*s, &tel, po);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(err("temp=80").find("no temperature source"), std::string::npos) << err("temp=80");
  EXPECT_NE(err("power=50").find("no power source"), std::string::npos) << err("power=50");
  EXPECT_NE(err("bandwidth=60").find("no peak bandwidth"), std::string::npos) << err("bandwidth=60");
  EXPECT_NE(err("p99=30", true).find("no tile mask"), std::string::npos) << err("p99=30", true);
  EXPECT_EQ(err("p99=30"), "(no error)");  // the decode steps' own time is always there
}

}  // namespace
}  // namespace tilellm::telemetry
