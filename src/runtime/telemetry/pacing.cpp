#include "runtime/telemetry/pacing.h"

#include <fmt/format.h>

#include <cstdlib>

#include "base/error.h"

namespace tilellm::telemetry {
namespace {

// "a=1,b=2" -> {(a, 1), (b, 2)}; each part must have one '=' and a non-empty key and value.
std::vector<std::pair<std::string, std::string>> key_values(std::string_view s, const char* flag) {
  std::vector<std::pair<std::string, std::string>> out;
  if (s.empty()) fail("{}: empty (expected KEY=VALUE[,KEY=VALUE...])", flag);
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string_view::npos) j = s.size();
    const std::string_view part = s.substr(i, j - i);
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == part.size())
      fail("{}: '{}' is not KEY=VALUE", flag, part);
    out.emplace_back(std::string(part.substr(0, eq)), std::string(part.substr(eq + 1)));
    i = j + 1;
  }
  return out;
}

// A positive finite number (a trailing '%' allowed where percent is true).
double number(const std::string& v, const char* flag, const std::string& key, bool percent = false) {
  std::string t = v;
  if (percent && !t.empty() && t.back() == '%') t.pop_back();
  char* end = nullptr;
  const double x = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !std::isfinite(x) || x <= 0)
    fail("{}: {}={} is not a positive number", flag, key, v);
  return x;
}

std::string num(double x) {
  return fmt::format("{:g}", x);
}

}  // namespace

FixedPace parse_pace(std::string_view s) {
  FixedPace p;
  bool have_sleep = false;
  for (const auto& [k, v] : key_values(s, "--pace")) {
    if (k == "sleep") {
      const double x = number(v, "--pace", k);
      if (x != std::floor(x) || x > 10e6)
        fail("--pace: sleep={} must be whole microseconds, at most 10 s", v);
      p.sleep_us = int64_t(x);
      have_sleep = true;
    } else if (k == "every") {
      const double x = number(v, "--pace", k);
      if (x != std::floor(x) || x > 1e9) fail("--pace: every={} must be a whole number of tokens", v);
      p.every = int64_t(x);
    } else {
      fail("--pace: unknown key '{}' (sleep=US,every=N)", k);
    }
  }
  if (!have_sleep) fail("--pace: give the pause, sleep=US (and every=N, default 1)");
  return p;
}

bool PaceLimits::any() const {
  for (double x : limit) {
    if (!std::isnan(x)) return true;
  }
  return false;
}

PaceLimits parse_pace_target(std::string_view s) {
  PaceLimits l;
  for (const auto& [k, v] : key_values(s, "--pace-target")) {
    if (k == "temp") {
      l.limit[int(Limit::Temp)] = number(v, "--pace-target", k);
    } else if (k == "power") {
      l.limit[int(Limit::Power)] = number(v, "--pace-target", k);
    } else if (k == "bandwidth") {
      const double x = number(v, "--pace-target", k, true);
      if (x > 100) fail("--pace-target: bandwidth={} is more than 100% of the peak", v);
      l.limit[int(Limit::Bandwidth)] = x;
    } else if (k == "p99") {
      l.limit[int(Limit::P99)] = number(v, "--pace-target", k);
    } else if (k == "hysteresis") {
      const double x = number(v, "--pace-target", k);
      if (x >= 0.5) fail("--pace-target: hysteresis={} must be below 0.5 (a fraction of each limit)", v);
      l.hysteresis = x;
    } else if (k == "hold") {
      l.hold_s = number(v, "--pace-target", k);
    } else {
      fail("--pace-target: unknown key '{}' (temp=C, power=W, bandwidth=P%, p99=MS, hysteresis=F, hold=S)",
           k);
    }
  }
  if (!l.any()) fail("--pace-target: no limit given (temp=C, power=W, bandwidth=P%, p99=MS)");
  return l;
}

Degrade parse_degrade(std::string_view s) {
  Degrade d;
  for (const auto& [k, v] : key_values(s, "--degrade")) {
    if (k != "tile-mask") fail("--degrade: unknown key '{}' (tile-mask=F)", k);
    const double x = number(v, "--degrade", k);
    if (x >= 1) fail("--degrade: tile-mask={} must be a fraction below 1", v);
    d.tile_mask = x;
  }
  return d;
}

std::string to_string(const FixedPace& p) {
  return p.on() ? fmt::format("sleep={},every={}", p.sleep_us, p.every) : "off";
}

std::string to_string(const PaceLimits& l) {
  std::string s;
  for (int i = 0; i < kLimits; ++i) {
    if (std::isnan(l.limit[i])) continue;
    s += fmt::format("{}{}={}{}", s.empty() ? "" : ",", limit_key(Limit(i)), num(l.limit[i]),
                     Limit(i) == Limit::Bandwidth ? "%" : "");
  }
  if (s.empty()) return "off";
  return s + fmt::format(",hysteresis={},hold={}", num(l.hysteresis), num(l.hold_s));
}

std::vector<LadderStep> make_ladder(int n_threads, int occupancy_steps, bool tile_mask) {
  std::vector<LadderStep> v;
  LadderStep s;
  s.threads = std::max(1, n_threads);
  v.push_back(s);
  for (double f : {0.0625, 0.125, 0.1875, 0.25, 0.375, 0.5, 0.75, 1.0, 1.5, 2.0}) {
    s.pause_frac = f;
    v.push_back(s);
  }
  while (s.threads > 1) {
    --s.threads;
    v.push_back(s);
  }
  for (int k = 1; k <= occupancy_steps; ++k) {
    s.occupancy = k;
    v.push_back(s);
  }
  if (tile_mask) {
    s.tile_mask = true;
    v.push_back(s);
  }
  return v;
}

std::string describe(const LadderStep& s) {
  std::string d = s.pause_frac > 0 ? fmt::format("pause {}x median step", num(s.pause_frac)) : "no pause";
  d += fmt::format(", {} thread{}", s.threads, s.threads == 1 ? "" : "s");
  if (s.occupancy > 0) d += fmt::format(", occupancy step {}", s.occupancy);
  if (s.tile_mask) d += ", tile mask on";
  return d;
}

double ExpMean::add(double x, double t) {
  if (std::isnan(x)) return mean_;
  if (std::isnan(mean_) || std::isnan(last_t_)) {
    mean_ = x;
  } else {
    mean_ += (x - mean_) * (1.0 - std::exp(-std::max(0.0, t - last_t_) / tau_));
  }
  last_t_ = t;
  return mean_;
}

Controller::Controller(const PaceLimits& limits, int max_level)
    : limits_(limits), max_level_(std::max(0, max_level)) {}

bool Controller::update(const Reading& r, double t, Decision& d) {
  if (!limits_.any() || t - last_change_ < limits_.hold_s) return false;
  // Over: the limit exceeded the most. Under: every limited reading known and below its release; the one
  // nearest its limit is the reading that allowed the step down.
  int over = -1, nearest = -1;
  double over_ratio = 1.0, nearest_ratio = -INFINITY;
  bool all_under = true;
  for (int i = 0; i < kLimits; ++i) {
    const Limit l = Limit(i);
    if (!limits_.has(l)) continue;
    const double x = r[l], lim = limits_.limit[i];
    if (std::isnan(x)) {
      all_under = false;
      continue;
    }
    if (x / lim > over_ratio) over = i, over_ratio = x / lim;
    if (x >= limits_.release(l)) all_under = false;
    if (x / lim > nearest_ratio) nearest = i, nearest_ratio = x / lim;
  }
  int to = level_, cause = -1;
  if (over >= 0 && level_ < max_level_) {
    to = level_ + 1, cause = over;
  } else if (over < 0 && all_under && nearest >= 0 && level_ > 0) {
    to = level_ - 1, cause = nearest;
  }
  if (cause < 0) return false;
  d.t = t;
  d.from = level_;
  d.to = to;
  d.cause = Limit(cause);
  d.reading = r[Limit(cause)];
  d.limit = limits_.limit[cause];
  d.release = limits_.release(Limit(cause));
  level_ = to;
  last_change_ = t;
  return true;
}

}  // namespace tilellm::telemetry
