#include "base/cpu_set.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

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

int cpus_of_quota(long long quota, long long period) {
  if (quota < 0 || period <= 0) return 0;
  return int(std::max<long long>(1, quota / period));
}

namespace {

// A cgroup file's first line's numbers ("max" reads as -1); false if it cannot be read.
bool read_numbers(const std::string& path, long long* a, long long* b) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return false;
  std::istringstream in(line);
  auto next = [&](long long* v) {
    std::string w;
    if (!(in >> w)) return false;
    if (w == "max") {
      *v = -1;
      return true;
    }
    char* end = nullptr;
    *v = std::strtoll(w.c_str(), &end, 10);
    return end && *end == '\0' && end != w.c_str();
  };
  return next(a) && (b == nullptr || next(b));
}

// The smallest CPU limit along a cgroup path (its directory and those above it under root); 0: none.
int cgroup_limit(const std::string& root, std::string path, bool v2) {
  int best = 0;
  for (;;) {
    const std::string dir = root + path;
    long long quota = -1, period = 0;
    bool ok = false;
    if (v2) {
      ok = read_numbers(dir + "/cpu.max", &quota, &period);
    } else {
      ok = read_numbers(dir + "/cpu.cfs_quota_us", &quota, nullptr) &&
           read_numbers(dir + "/cpu.cfs_period_us", &period, nullptr);
    }
    const int n = ok ? cpus_of_quota(quota, period) : 0;
    if (n > 0) best = best == 0 ? n : std::min(best, n);
    if (path.empty() || path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == std::string::npos ? std::string() : path.substr(0, slash);
  }
  return best;
}

// The cgroup CPU limit of this process (cgroup v2, else v1's cpu controller); 0: none found.
int cgroup_cpu_limit() {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  int best = 0;
  while (std::getline(f, line)) {
    // "hierarchy-id:controllers:path"; v2's line is "0::path".
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    int n = 0;
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      n = cgroup_limit("/sys/fs/cgroup", path, true);
    } else {
      std::istringstream list(controllers);
      for (std::string c; std::getline(list, c, ',');) {
        if (c != "cpu") continue;
        for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
          n = cgroup_limit(mount, path, false);
          if (n > 0) break;
        }
      }
    }
    if (n > 0) best = best == 0 ? n : std::min(best, n);
  }
  return best;
}

}  // namespace

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = int(std::thread::hardware_concurrency());
  const int limit = cgroup_cpu_limit();
  if (limit > 0) n = n > 0 ? std::min(n, limit) : limit;
  return std::max(n, 1);
}

}  // namespace tilellm
