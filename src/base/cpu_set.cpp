#include "base/cpu_set.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace tilellm {

std::vector<int> parse_cpu_mask(std::string_view hex) {
  std::string_view s = hex;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) fail("CPU mask '{}' is empty", hex);
  std::vector<int> cpus;
  // The last digit holds CPUs 0-3, the one before it 4-7, and so on.
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[s.size() - 1 - i];
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      fail("CPU mask '{}' is not hexadecimal (e.g. 0x3 for CPUs 0 and 1)", hex);
    }
    for (int b = 0; b < 4; ++b) {
      if (v & (1 << b)) cpus.push_back(int(i) * 4 + b);
    }
  }
  std::sort(cpus.begin(), cpus.end());
  if (cpus.empty()) fail("CPU mask '{}' selects no CPU", hex);
  if (cpus.back() >= CPU_SETSIZE)
    fail("CPU mask '{}' names CPU {}, beyond {}", hex, cpus.back(), CPU_SETSIZE - 1);
  return cpus;
}

std::string affinity_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "unknown";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE;) {
    if (!CPU_ISSET(c, &set)) {
      ++c;
      continue;
    }
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set)) ++e;
    if (!out.empty()) out += ',';
    out += e == c ? std::to_string(c) : std::to_string(c) + "-" + std::to_string(e);
    c = e + 1;
  }
  return out.empty() ? "unknown" : out;
}

void pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0) fail("cannot pin a thread to CPU {}: {}", cpu, std::strerror(rc));
}

}  // namespace tilellm
