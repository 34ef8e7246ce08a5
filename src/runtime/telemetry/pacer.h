// The pacing policy (pacing.h) applied to a session, on the thread that runs it: after each forward pass
// the generation loop calls after_pass(), which records the pass with telemetry, runs the controller when
// telemetry has a new sample, takes the level's measures (threads, occupancy, tile mask) and sleeps the
// pause. Allocates nothing (tests/runtime/test_decode_alloc.cpp); a level change parks or wakes threads.
//
// The readings the controller compares with the limits:
//   temp       the device's temperature when the session runs on a device backend and NVML reads one, else
//              the hottest CPU sensor;
//   power      likewise: NVML's power for a device backend, else the CPU package power; smoothed;
//   bandwidth  weight bytes of the decode steps since the last evaluation / the wall time since then (pauses
//              included: they are what lowers it), as a percentage of the peak measured by the caller;
//              smoothed;
//   p99        the 99th percentile of the last 256 decode steps' compute time (pauses excluded: a pause does
//              not make a step slower, and counting it would make every pause look like a worse p99).
// Smoothed: an exponential mean with a time constant of half the hold time. One sample period's energy
// difference or decode bytes swing with every request's prompt and every scheduling hiccup, while the
// controller acts on the scale of its hold time; unsmoothed, it chased that noise from level to level.
#pragma once

#include <array>
#include <chrono>
#include <vector>

#include "runtime/session.h"
#include "runtime/telemetry/pacing.h"
#include "runtime/telemetry/telemetry.h"

namespace tilellm::telemetry {

struct PacerOptions {
  FixedPace fixed;
  PaceLimits limits;
  bool tile_mask = false;             // --degrade: the ladder ends with the session's tile mask
  double weight_bytes_per_token = 0;  // the bandwidth reading (bench::weight_bytes_per_token)
  double peak_gbs = 0;                // the peak it is a share of (measured by the caller)
};

class Pacer {
 public:
  using Clock = std::chrono::steady_clock;

  // telemetry may be null when no limit is set (a fixed pace alone). Throws tilellm::Error naming what is
  // missing when a limit has nothing to read it from (temp without a temperature source, bandwidth without
  // a peak), or when tile masking was asked for and the backend offers none.
  Pacer(Session& s, Telemetry* tel, const PacerOptions& o);
  ~Pacer();  // back to level 0: every thread, full occupancy, no mask
  Pacer(const Pacer&) = delete;
  Pacer& operator=(const Pacer&) = delete;

  // A forward pass of n_tok tokens ran from t0 to t1 (decode: one generated token).
  void after_pass(Clock::time_point t0, Clock::time_point t1, int64_t n_tok, bool decode);

  int level() const { return controller_.level(); }
  const std::vector<LadderStep>& ladder() const { return ladder_; }
  const LadderStep& state() const { return ladder_[size_t(level())]; }
  // Where each reading comes from ("cpu_temp_c", "gpu_power_w", "decode steps"), for the log.
  const char* source(Limit l) const;
  double paused_s() const { return paused_s_; }

 private:
  void evaluate(double now_s);
  void apply(const LadderStep& s);
  double median_ms();

  Session& session_;
  Telemetry* tel_;
  PacerOptions opts_;
  std::vector<LadderStep> ladder_;
  Controller controller_;
  Channel temp_ch_ = Channel::CpuTempC, power_ch_ = Channel::CpuPowerW;
  uint64_t seen_seq_ = 0;
  int64_t decode_steps_ = 0;
  // The last kWindow decode steps' compute times (ms), a ring, and a scratch copy for selections.
  static constexpr int kWindow = 256;
  std::array<float, kWindow> window_{}, scratch_{};
  int64_t window_n_ = 0;
  double median_cache_ = 0;
  int64_t median_at_ = -1;
  // Since the last evaluation: decode steps and the time it began.
  int64_t interval_steps_ = 0;
  double interval_start_ = -1;
  Reading reading_;
  ExpMean power_mean_, bw_mean_;  // the smoothed readings
  double paused_s_ = 0;
  Sample sample_;
};

}  // namespace tilellm::telemetry
