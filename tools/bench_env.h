// What every benchmark row records about where it ran: CPU model, the threads' effective CPU set (from
// sched_getaffinity, so taskset/cgroup limits show) and a small statistics helper.
// Header-only: used by the gemm-speed and gemv-bw subcommands.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/cpu_set.h"

namespace tilellm::bench {

inline std::string cpu_model() {
  const std::string& m = cpu_features().model;
  return m.empty() ? "unknown CPU" : m;
}

// "0-1,4" and the number of CPUs in it.
inline std::string cpu_set(int* count = nullptr) {
  if (count) {
    cpu_set_t set;
    CPU_ZERO(&set);
    *count = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  }
  return affinity_list();
}

struct Stats {
  double mean = 0, median = 0, min = 0, max = 0, stddev = 0;
};

inline Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / double(n);
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stddev = n > 1 ? std::sqrt(ss / double(n - 1)) : 0.0;
  return s;
}

}  // namespace tilellm::bench
