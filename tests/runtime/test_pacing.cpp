// The pacing policy (runtime/telemetry/pacing.h) and the sensors it reads, deterministically: simulated
// sensors (tests/common/sim_sensors.h) read through telemetry's real readers, stepped on the test's own
// clock, with a simple thermal model of a device whose steady temperature falls as the controller's level
// rises.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../common/sim_sensors.h"
#include "base/error.h"
#include "runtime/telemetry/pacing.h"
#include "runtime/telemetry/telemetry.h"

namespace tilellm::telemetry {
namespace {

TelemetryOptions sim_options(const test::SimSensors& sim) {
  TelemetryOptions o;
  o.sysfs_root = sim.root();
  o.nvml = false;
  return o;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PaceSpec, fixed_pace_parses_and_bad_parts_are_named) {
  const FixedPace p = parse_pace("sleep=1000,every=10");
  EXPECT_EQ(p.sleep_us, 1000);
  EXPECT_EQ(p.every, 10);
  EXPECT_EQ(parse_pace("sleep=250").every, 1);
  EXPECT_EQ(to_string(p), "sleep=1000,every=10");
  EXPECT_NE(error_of([] { parse_pace("sleep=abc"); }).find("sleep=abc is not a positive number"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_pace("every=3"); }).find("give the pause"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pace("sleep=10,every=0"); }).find("every=0"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pace("sleep=1.5"); }).find("whole microseconds"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pace("nap=3"); }).find("unknown key 'nap'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pace("sleep"); }).find("'sleep' is not KEY=VALUE"), std::string::npos);
}

TEST(PaceSpec, targets_parse_with_percent_and_errors_name_the_key) {
  const PaceLimits l = parse_pace_target("temp=80,power=250.5,bandwidth=70%,p99=25,hysteresis=0.1,hold=3");
  EXPECT_EQ(l.limit[int(Limit::Temp)], 80);
  EXPECT_EQ(l.limit[int(Limit::Power)], 250.5);
  EXPECT_EQ(l.limit[int(Limit::Bandwidth)], 70);
  EXPECT_EQ(l.limit[int(Limit::P99)], 25);
  EXPECT_DOUBLE_EQ(l.release(Limit::Temp), 72);
  EXPECT_EQ(l.hold_s, 3);
  EXPECT_EQ(to_string(l), "temp=80,power=250.5,bandwidth=70%,p99=25,hysteresis=0.1,hold=3");
  EXPECT_TRUE(parse_pace_target("bandwidth=55").has(Limit::Bandwidth));
  EXPECT_FALSE(parse_pace_target("p99=20").has(Limit::Temp));
  EXPECT_NE(error_of([] { parse_pace_target("bandwidth=150%"); }).find("more than 100%"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pace_target("hold=2"); }).find("no limit given"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pace_target("temp=-3"); }).find("temp=-3"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pace_target("tmp=80"); }).find("unknown key 'tmp'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pace_target("temp=80,hysteresis=0.7"); }).find("below 0.5"),
            std::string::npos);
  EXPECT_EQ(parse_degrade("tile-mask=0.3").tile_mask, 0.3);
  EXPECT_NE(error_of([] { parse_degrade("tile-mask=1.2"); }).find("below 1"), std::string::npos);
  EXPECT_NE(error_of([] { parse_degrade("mask=0.2"); }).find("unknown key 'mask'"), std::string::npos);
}

TEST(PaceLadder, pauses_then_threads_then_occupancy_then_mask_each_level_stronger) {
  const std::vector<LadderStep> v = make_ladder(4, 2, true);
  // 0, ten pauses, threads 3 2 1, occupancy 1 2, the mask.
  ASSERT_EQ(v.size(), 17u);
  EXPECT_EQ(v[0].pause_frac, 0);
  EXPECT_EQ(v[0].threads, 4);
  EXPECT_EQ(v[1].pause_frac, 0.0625);
  EXPECT_EQ(v[10].pause_frac, 2.0);
  EXPECT_EQ(v[10].threads, 4);
  EXPECT_EQ(v[13].threads, 1);
  EXPECT_EQ(v[13].occupancy, 0);
  EXPECT_EQ(v[15].occupancy, 2);
  EXPECT_FALSE(v[15].tile_mask);
  EXPECT_TRUE(v[16].tile_mask);
  // Neighbouring pause levels differ by at most a tenth of duty cycle (1 / (1 + pause)).
  for (size_t i = 1; i <= 10; ++i) EXPECT_LE(1 / (1 + v[i - 1].pause_frac) - 1 / (1 + v[i].pause_frac), 0.1);
  for (size_t i = 1; i < v.size(); ++i) {
    EXPECT_GE(v[i].pause_frac, v[i - 1].pause_frac);
    EXPECT_LE(v[i].threads, v[i - 1].threads);
    EXPECT_GE(v[i].occupancy, v[i - 1].occupancy);
    const bool stronger = v[i].pause_frac > v[i - 1].pause_frac || v[i].threads < v[i - 1].threads ||
                          v[i].occupancy > v[i - 1].occupancy || v[i].tile_mask != v[i - 1].tile_mask;
    EXPECT_TRUE(stronger) << "level " << i;
  }
  // Without --degrade the mask is never on the ladder; one thread has no thread steps.
  EXPECT_EQ(make_ladder(1, 0, false).size(), 11u);
  EXPECT_FALSE(make_ladder(2, 0, false).back().tile_mask);
}

TEST(ExpMean, smooths_a_swinging_reading_to_its_mean_and_follows_a_step) {
  ExpMean m(1.0);
  EXPECT_TRUE(std::isnan(m.value()));
  EXPECT_TRUE(std::isnan(m.add(NAN, 0.0)));  // skipped: still no mean
  EXPECT_EQ(m.add(10, 0.0), 10);             // the first value as it is
  // 10 W and 50 W in turn every 0.1 s (a RAPL difference over one sample period): the mean stays near 30,
  // where a limit of 40 W is never crossed.
  double lo = 1e9, hi = -1e9;
  for (int i = 1; i < 200; ++i) {
    const double v = m.add(i % 2 ? 50 : 10, 0.1 * i);
    if (i > 50) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  EXPECT_GT(lo, 27);
  EXPECT_LT(hi, 33);
  // A step to 60: 1 - 1/e of the way after one time constant.
  ExpMean s(2.0);
  s.add(0, 0);
  EXPECT_NEAR(s.add(60, 2.0), 60 * (1 - std::exp(-1.0)), 1e-9);
}

TEST(SimulatedSensors, are_read_through_the_real_readers) {
  test::SimSensors sim;
  Telemetry tel(sim_options(sim));
  EXPECT_TRUE(tel.has(Channel::CpuTempC));
  EXPECT_TRUE(tel.has(Channel::CpuPowerW));
  EXPECT_TRUE(tel.has(Channel::CpuMhz));
  EXPECT_FALSE(tel.has(Channel::GpuPowerW));
  bool thermal = false, rapl = false, nvml_absent = false;
  for (const SourceStatus& s : tel.sources()) {
    thermal =
        thermal || (s.name == "thermal" && s.present && s.detail.find("x86_pkg_temp") != std::string::npos);
    rapl = rapl || (s.name == "rapl" && s.present);
    nvml_absent = nvml_absent || (s.name == "nvml" && !s.present);
  }
  EXPECT_TRUE(thermal && rapl && nvml_absent);

  sim.temp_c(45.5);
  sim.mhz(2345);
  sim.energy_uj(1'000'000);
  const Sample a = tel.read(10.0);
  EXPECT_FLOAT_EQ(a.get(Channel::CpuTempC), 45.5f);
  EXPECT_FLOAT_EQ(a.get(Channel::CpuMhz), 2345.0f);
  EXPECT_TRUE(std::isnan(a.get(Channel::CpuPowerW))) << "no power before a second energy reading";
  EXPECT_EQ(a.get(Channel::CpuEnergyJ), 0.0f);
  sim.energy_uj(4'000'000);  // 3 J over 1.5 s
  const Sample b = tel.read(11.5);
  EXPECT_NEAR(b.get(Channel::CpuPowerW), 2.0, 1e-5);
  EXPECT_NEAR(b.get(Channel::CpuEnergyJ), 3.0, 1e-5);
  // The counter wraps at max_energy_range_uj: 9 J -> wrap -> 1 J is 2 J more (over 0.5 s: 4 W).
  sim.energy_range_uj(10'000'000);
  Telemetry wrap(sim_options(sim));
  sim.energy_uj(9'000'000);
  wrap.read(0.0);
  sim.energy_uj(1'000'000);
  EXPECT_NEAR(wrap.read(0.5).get(Channel::CpuPowerW), 4.0, 1e-5);
  // A value that is not a number leaves the channel absent in that sample, and nothing breaks.
  sim.put("sys/class/thermal/thermal_zone0/temp", "garbage");
  EXPECT_TRUE(std::isnan(tel.read(12.0).get(Channel::CpuTempC)));
}

TEST(SimulatedSensors, a_machine_without_sensors_reports_each_absent_with_why) {
  char tmpl[] = "/tmp/tilellm-empty-root-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  TelemetryOptions o;
  o.sysfs_root = root;
  o.nvml = true;
  setenv("TILELLM_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  Telemetry tel(o);
  unsetenv("TILELLM_NVML_LIBRARY");
  for (int c = 0; c < kChannels; ++c) EXPECT_FALSE(tel.has(Channel(c))) << channel_info(Channel(c)).key;
  const std::vector<SourceStatus> s = tel.sources();
  ASSERT_GE(s.size(), 6u);
  for (const SourceStatus& x : s) {
    EXPECT_FALSE(x.present) << x.name;
    EXPECT_FALSE(x.detail.empty()) << x.name << " says nothing about why it is absent";
  }
  EXPECT_NE(s.back().detail.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << s.back().detail;
  std::filesystem::remove_all(root);
}

// A device under a thermal model: at level L the temperature relaxes (time constant 5 s: a device heats
// more slowly than the controller's hold time) toward hot - per_level * L + shift. One controller
// evaluation per 0.1 s sample, as telemetry at 10 Hz.
struct Plant {
  double temp = 40, hot = 95, per_level = 4, shift = 0;
  void step(int level, double dt) {
    const double target = hot - per_level * level + shift;
    temp += (target - temp) * (1.0 - std::exp(-dt / 5.0));
  }
};

struct Trace {
  std::vector<double> t, temp;
  std::vector<int> level;
  std::vector<Decision> decisions;
};

Trace run(Controller& c, Plant& p, test::SimSensors& sim, Telemetry& tel, double t0, double t1) {
  Trace tr;
  for (double t = t0; t < t1 - 1e-9; t += 0.1) {
    p.step(c.level(), 0.1);
    sim.temp_c(p.temp);
    const Sample s = tel.read(t);
    Reading r;
    r[Limit::Temp] = s.get(Channel::CpuTempC);
    Decision d;
    if (c.update(r, t, d)) tr.decisions.push_back(d);
    tr.t.push_back(t);
    tr.temp.push_back(r[Limit::Temp]);
    tr.level.push_back(c.level());
  }
  return tr;
}

TEST(Controller, holds_a_temperature_cap) {
  test::SimSensors sim;
  Telemetry tel(sim_options(sim));
  const PaceLimits lim = parse_pace_target("temp=80,hold=1");
  Controller c(lim, int(make_ladder(4, 0, false).size()) - 1);  // 13 levels above 0
  Plant p;
  const Trace tr = run(c, p, sim, tel, 0, 120);
  ASSERT_FALSE(tr.decisions.empty());
  double worst_settled = 0, worst = 0;
  for (size_t i = 0; i < tr.t.size(); ++i) {
    worst = std::max(worst, tr.temp[i]);
    if (tr.t[i] >= 30) worst_settled = std::max(worst_settled, tr.temp[i]);
  }
  // Unpaced the device would sit at 95 °C. It is held under the cap once settled; while it heats the
  // controller steps up once per hold time, so the overshoot is what the device heats meanwhile.
  EXPECT_LE(worst_settled, 80.0);
  EXPECT_LE(worst, 85.0);
  EXPECT_GE(tr.level.back(), 4) << "level 4 (79 °C) is the least that holds 80 °C";
  // Every step up was caused by a reading above the cap, and named it.
  for (const Decision& d : tr.decisions) {
    EXPECT_EQ(d.cause, Limit::Temp);
    EXPECT_EQ(d.limit, 80);
    if (d.to > d.from) {
      EXPECT_GT(d.reading, 80);
    } else {
      EXPECT_LT(d.reading, 76);
    }
  }
}

TEST(Controller, releases_when_the_reading_falls) {
  test::SimSensors sim;
  Telemetry tel(sim_options(sim));
  Controller c(parse_pace_target("temp=80,hold=1"), 8);
  Plant p;
  run(c, p, sim, tel, 0, 60);
  const int held = c.level();
  ASSERT_GE(held, 4);
  p.shift = -40;  // the room cools: every level now settles 40 °C lower
  const Trace tr = run(c, p, sim, tel, 60, 60 + held * 1.0 + 5);
  EXPECT_EQ(c.level(), 0) << "back to unpaced within one hold time per level";
  ASSERT_EQ(int(tr.decisions.size()), held);
  for (const Decision& d : tr.decisions) {
    EXPECT_EQ(d.to, d.from - 1);
    EXPECT_LT(d.reading, d.release);
  }
}

TEST(Controller, never_oscillates_faster_than_its_hysteresis_allows) {
  test::SimSensors sim;
  Telemetry tel(sim_options(sim));
  Controller c(parse_pace_target("temp=80,hold=2,hysteresis=0.05"), 8);
  // A reading flipping every sample across the limit but never below the release (76): the level only
  // rises, at most once per hold time.
  std::vector<Decision> ds;
  double t = 0;
  for (int i = 0; i < 600; ++i, t += 0.1) {
    sim.temp_c(i % 2 ? 81.0 : 78.0);
    Reading r;
    r[Limit::Temp] = tel.read(t).get(Channel::CpuTempC);
    Decision d;
    if (c.update(r, t, d)) ds.push_back(d);
  }
  ASSERT_FALSE(ds.empty());
  for (const Decision& d : ds) EXPECT_GT(d.to, d.from) << "stepped down inside the band at t=" << d.t;
  // Now across the whole band every sample: changes both ways, never two within the hold time.
  for (int i = 0; i < 600; ++i, t += 0.1) {
    sim.temp_c(i % 2 ? 81.0 : 70.0);
    Reading r;
    r[Limit::Temp] = tel.read(t).get(Channel::CpuTempC);
    Decision d;
    if (c.update(r, t, d)) ds.push_back(d);
  }
  bool down = false;
  for (size_t i = 1; i < ds.size(); ++i) {
    EXPECT_GE(ds[i].t - ds[i - 1].t, 2.0 - 1e-9) << "two changes within the hold time";
    down = down || ds[i].to < ds[i].from;
  }
  EXPECT_TRUE(down);
  EXPECT_LE(ds.size(), size_t(120 / 2) + 1);
}

TEST(Controller, does_nothing_with_no_limit_set) {
  test::SimSensors sim;
  Telemetry tel(sim_options(sim));
  Controller c(PaceLimits{}, 8);
  sim.temp_c(150);
  for (double t = 0; t < 60; t += 0.1) {
    Reading r;
    r[Limit::Temp] = tel.read(t).get(Channel::CpuTempC);
    r[Limit::P99] = 1e6;
    Decision d;
    EXPECT_FALSE(c.update(r, t, d));
  }
  EXPECT_EQ(c.level(), 0);
}

TEST(Controller, a_limit_without_a_reading_holds_and_the_worst_excess_is_the_cause) {
  Controller c(parse_pace_target("temp=80,p99=20,hold=1"), 8);
  Reading r;
  r[Limit::Temp] = 70;  // under its release, but p99 is not known yet: no step down, no step up
  Decision d;
  EXPECT_FALSE(c.update(r, 0, d));
  r[Limit::Temp] = 84;  // 5% over
  r[Limit::P99] = 30;   // 50% over: the cause
  ASSERT_TRUE(c.update(r, 1, d));
  EXPECT_EQ(d.cause, Limit::P99);
  EXPECT_EQ(d.reading, 30);
  EXPECT_EQ(d.to, 1);
  // Down only once both are under their releases; the reading nearest its limit is named.
  r[Limit::Temp] = 75, r[Limit::P99] = 18.9;
  ASSERT_TRUE(c.update(r, 2, d));
  EXPECT_EQ(d.to, 0);
  EXPECT_EQ(d.cause, Limit::P99);  // 18.9 / 20 > 75 / 80
}

}  // namespace
}  // namespace tilellm::telemetry
