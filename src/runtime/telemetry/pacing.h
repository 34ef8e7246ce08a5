// Pacing: the seed's fixed pause (--pace sleep=US,every=N) and a controller that holds limits on what
// telemetry reads (--pace-target temp=C,power=W,bandwidth=P%,p99=MS) by stepping along a ladder of ever
// stronger measures, with hysteresis. This file is the policy alone, a pure function of the readings and
// the time it is given (the tests drive it with simulated sensors and their own clock); pacer.h applies it
// to a session.
//
// The ladder, from level 0 (nothing) up, each level keeping the measures of the levels below it:
//   1..10 a pause after every decode step of 1/16, 1/8, 3/16, 1/4, 3/8, 1/2, 3/4, 1, 3/2 and 2 times the
//         median step (the duty cycle falls from 94% to 33% in steps of at most a tenth, so that a limit
//         usually falls inside one level's band rather than between two levels);
//   then  one host thread fewer per level, down to one;
//   then  each lower GPU occupancy step the backend offers (Backend::occupancy_steps; none of today's);
//   then  the lossy row-tile masking, only when --degrade tile-mask=F asked for it.
// The controller steps up one level when any reading is above its limit, and down one level when every
// limited reading is below its release threshold (limit * (1 - hysteresis)); between the two it holds.
// Two changes are at least `hold` seconds apart, so the level cannot oscillate faster than that, and a
// reading that stays inside the band changes nothing. With no limit set it never acts.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/telemetry/sample.h"

namespace tilellm::telemetry {

// --pace sleep=US,every=N: a pause of US microseconds after every N-th decode step.
struct FixedPace {
  int64_t sleep_us = 0;
  int64_t every = 1;
  bool on() const { return sleep_us > 0; }
};
FixedPace parse_pace(std::string_view s);  // throws tilellm::Error naming the bad part

// --pace-target: one or more limits (NaN: not set), and the controller's band and hold time
// ("temp=80,power=250,bandwidth=70%,p99=30,hysteresis=0.05,hold=2").
struct PaceLimits {
  double limit[kLimits] = {NAN, NAN, NAN, NAN};
  double hysteresis = 0.05;  // release below limit * (1 - hysteresis)
  double hold_s = 2.0;       // least time between two level changes
  bool any() const;
  bool has(Limit l) const { return !std::isnan(limit[int(l)]); }
  double release(Limit l) const { return limit[int(l)] * (1.0 - hysteresis); }
};
PaceLimits parse_pace_target(std::string_view s);

// --degrade tile-mask=F: the fraction F (0 < F < 1) of each feed-forward gate/up matrix's row tiles that
// the top of the ladder masks (zero), weakest first; 0: off (the default).
struct Degrade {
  double tile_mask = 0;
};
Degrade parse_degrade(std::string_view s);

// The spec as written back (for reports and logs): "sleep=1000,every=10", "temp=80,p99=25", ...
std::string to_string(const FixedPace& p);
std::string to_string(const PaceLimits& l);

// What one level of the ladder does.
struct LadderStep {
  double pause_frac = 0;  // pause after each decode step, in median steps
  int threads = 0;        // host threads taking work
  int occupancy = 0;      // the backend's occupancy step (0: full)
  bool tile_mask = false;
};
// Level 0 first. n_threads: the session's threads; occupancy_steps: what the backend offers.
std::vector<LadderStep> make_ladder(int n_threads, int occupancy_steps, bool tile_mask);
// "pause 0.50x median, 2 threads, occupancy step 1, tile mask": one level, for logs.
std::string describe(const LadderStep& s);

// A reading of every limited quantity (NaN: not known yet, e.g. p99 before enough steps).
struct Reading {
  double v[kLimits] = {NAN, NAN, NAN, NAN};
  double& operator[](Limit l) { return v[int(l)]; }
  double operator[](Limit l) const { return v[int(l)]; }
};

// An exponential mean over time: each value x at time t moves the mean by (x - mean) * (1 - exp(-dt / tau)),
// dt the time since the previous value; the first value is taken as it is; NaN values are skipped. What the
// pacer smooths noisy readings with (pacer.h).
class ExpMean {
 public:
  explicit ExpMean(double tau_s) : tau_(tau_s > 0 ? tau_s : 1e-3) {}
  double add(double x, double t);  // the mean after x (NaN while there is none)
  double value() const { return mean_; }

 private:
  double tau_;
  double mean_ = NAN;
  double last_t_ = NAN;
};

class Controller {
 public:
  Controller(const PaceLimits& limits, int max_level);
  // One evaluation at time t (seconds, non-decreasing). Returns true when the level changed, with d filled.
  bool update(const Reading& r, double t, Decision& d);
  int level() const { return level_; }
  int max_level() const { return max_level_; }
  const PaceLimits& limits() const { return limits_; }

 private:
  PaceLimits limits_;
  int max_level_;
  int level_ = 0;
  double last_change_ = -INFINITY;
};

}  // namespace tilellm::telemetry
