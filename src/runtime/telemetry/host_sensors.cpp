#include "runtime/telemetry/host_sensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tilellm::telemetry {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// Opens a value file and checks that it reads as an integer now; -1 (and why, in `why`) otherwise.
int open_value(const fs::path& p, std::string* why = nullptr) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (why) *why = fmt::format("{}: {}", p.string(), std::strerror(errno));
    return -1;
  }
  long long v = 0;
  if (!read_int_file(fd, v)) {
    if (why) *why = fmt::format("{}: not readable as a number", p.string());
    ::close(fd);
    return -1;
  }
  return fd;
}

// Entries of a directory whose names start with `prefix`, sorted by the number after it (zone10 after
// zone9); empty when the directory is missing.
std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<long, fs::path>> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) != 0 || n.size() == prefix.size()) continue;
    char* end = nullptr;
    const long k = std::strtol(n.c_str() + prefix.size(), &end, 10);
    if (*end != '\0') continue;
    v.emplace_back(k, e.path());
  }
  std::sort(v.begin(), v.end());
  std::vector<fs::path> out;
  for (auto& [k, p] : v) out.push_back(p);
  return out;
}

// Whether a thermal zone type or hwmon chip/label names the CPU package.
bool is_cpu_sensor(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* k :
       {"x86_pkg_temp", "coretemp", "k10temp", "zenpower", "cpu", "package", "tctl", "tdie", "soc_thermal"}) {
    if (s.find(k) != std::string::npos) return true;
  }
  return false;
}

std::string join(const std::vector<std::string>& v, size_t most = 6) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < most; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > most) s += fmt::format(", ... ({} in all)", v.size());
  return s;
}

}  // namespace

bool read_int_file(int fd, long long& out) {
  char buf[64];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(buf, &end, 10);
  return end != buf && errno == 0;
}

HostSensors::HostSensors(const std::string& root_str) {
  const fs::path root(root_str.empty() ? "/" : root_str);
  const fs::path cpu_dir = root / "sys/devices/system/cpu";
  const fs::path rel_thermal = "sys/class/thermal", rel_hwmon = "sys/class/hwmon",
                 rel_powercap = "sys/class/powercap";

  // cpufreq over the CPUs this process may run on (all of those found when none of them is in the tree).
  {
    cpu_set_t set;
    CPU_ZERO(&set);
    const bool have_set = sched_getaffinity(0, sizeof(set), &set) == 0;
    std::vector<fs::path> all = numbered(cpu_dir, "cpu"), mine;
    for (const fs::path& p : all) {
      const int k = std::atoi(p.filename().string().c_str() + 3);
      if (have_set && k < CPU_SETSIZE && CPU_ISSET(k, &set)) mine.push_back(p);
    }
    if (mine.empty()) mine = all;
    for (const fs::path& p : mine) {
      int fd = open_value(p / "cpufreq/scaling_cur_freq");
      if (fd < 0) fd = open_value(p / "cpufreq/cpuinfo_cur_freq");
      if (fd >= 0) freq_fds_.push_back(fd);
    }
    if (!freq_fds_.empty()) {
      status_.push_back(
          {"cpufreq", true,
           fmt::format("{} CPUs, {}/cpuN/cpufreq/scaling_cur_freq", freq_fds_.size(), cpu_dir.string())});
    } else {
      // /proc/cpuinfo's "cpu MHz": on x86 the kernel reports each CPU's recent average clock there.
      const fs::path ci = root / "proc/cpuinfo";
      std::ifstream in(ci);
      std::string line;
      int lines = 0;
      size_t bytes = 0;
      while (std::getline(in, line)) {
        bytes += line.size() + 1;
        lines += line.rfind("cpu MHz", 0) == 0;
      }
      if (lines > 0) {
        cpuinfo_fd_ = ::open(ci.c_str(), O_RDONLY | O_CLOEXEC);
        cpuinfo_buf_.resize(bytes * 2 + 4096);
      }
      status_.push_back({"cpufreq", cpuinfo_fd_ >= 0,
                         cpuinfo_fd_ >= 0 ? fmt::format("no cpufreq under {}; \"cpu MHz\" of {} ({} CPUs)",
                                                        cpu_dir.string(), ci.string(), lines)
                                          : fmt::format("no cpufreq under {} and no \"cpu MHz\" in {}",
                                                        cpu_dir.string(), ci.string())});
    }
  }

  // Temperatures: thermal zones and hwmon temp inputs; the CPU's own where any names itself so.
  {
    struct T {
      fs::path path;
      std::string name;
      bool cpu;
    };
    std::vector<T> found;
    std::vector<std::string> unreadable;
    for (const fs::path& z : numbered(root / rel_thermal, "thermal_zone")) {
      const std::string type = read_text(z / "type");
      found.push_back({z / "temp", z.filename().string() + " (" + type + ")", is_cpu_sensor(type)});
    }
    const size_t n_zones = found.size();
    for (const fs::path& h : numbered(root / rel_hwmon, "hwmon")) {
      const std::string chip = read_text(h / "name");
      for (int i = 1; i <= 32; ++i) {
        const fs::path in = h / fmt::format("temp{}_input", i);
        if (!fs::exists(in)) continue;
        const std::string label = read_text(h / fmt::format("temp{}_label", i));
        found.push_back({in, fmt::format("{} {}", chip, label.empty() ? fmt::format("temp{}", i) : label),
                         is_cpu_sensor(chip) || is_cpu_sensor(label)});
      }
    }
    const bool any_cpu = std::any_of(found.begin(), found.end(), [](const T& t) { return t.cpu; });
    std::vector<std::string> zones, chips;
    for (size_t i = 0; i < found.size(); ++i) {
      if (any_cpu && !found[i].cpu) continue;
      std::string why;
      const int fd = open_value(found[i].path, &why);
      if (fd < 0) {
        unreadable.push_back(why);
        continue;
      }
      temp_fds_.push_back(fd);
      (i < n_zones ? zones : chips).push_back(found[i].name);
    }
    status_.push_back({"thermal", !zones.empty(),
                       !zones.empty() ? join(zones)
                       : n_zones > 0  ? fmt::format("{} zones, none readable or of the CPU", n_zones)
                                      : fmt::format("no zone under {}", (root / rel_thermal).string())});
    status_.push_back({"hwmon temperature", !chips.empty(),
                       !chips.empty()
                           ? join(chips)
                           : fmt::format("no readable temp*_input under {}{}", (root / rel_hwmon).string(),
                                         unreadable.empty() ? "" : " (" + unreadable[0] + ")")});
  }

  // Package power: RAPL energy counters, else hwmon power.
  {
    std::vector<std::string> names, why_not;
    for (const fs::path& d : numbered(root / rel_powercap, "intel-rapl:")) {
      std::string why;
      const int fd = open_value(d / "energy_uj", &why);
      if (fd < 0) {
        why_not.push_back(errno == EACCES ? fmt::format("{}/energy_uj is readable by root only", d.string())
                                          : why);
        continue;
      }
      Counter c;
      c.fd = fd;
      long long range = 0;
      const int rfd = open_value(d / "max_energy_range_uj");
      if (rfd >= 0 && read_int_file(rfd, range)) c.max_range = double(range);
      if (rfd >= 0) ::close(rfd);
      energy_.push_back(c);
      names.push_back(d.filename().string() + " (" + read_text(d / "name") + ")");
    }
    status_.push_back({"rapl", !energy_.empty(),
                       !energy_.empty() ? join(names)
                       : !why_not.empty()
                           ? why_not[0]
                           : fmt::format("no intel-rapl:N under {}", (root / rel_powercap).string())});
    std::vector<std::string> chips;
    if (energy_.empty()) {
      for (const fs::path& h : numbered(root / rel_hwmon, "hwmon")) {
        for (int i = 1; i <= 8; ++i) {
          for (const char* kind : {"average", "input"}) {
            const int fd = open_value(h / fmt::format("power{}_{}", i, kind));
            if (fd < 0) continue;
            power_fds_.push_back(fd);
            chips.push_back(fmt::format("{} power{}_{}", read_text(h / "name"), i, kind));
            break;
          }
        }
      }
    }
    status_.push_back({"hwmon power", !power_fds_.empty(),
                       !power_fds_.empty() ? join(chips)
                       : !energy_.empty()
                           ? "not needed: RAPL is read"
                           : fmt::format("no readable power*_input under {}", (root / rel_hwmon).string())});
  }
}

HostSensors::~HostSensors() {
  for (int fd : freq_fds_) ::close(fd);
  for (int fd : temp_fds_) ::close(fd);
  for (int fd : power_fds_) ::close(fd);
  for (const Counter& c : energy_) ::close(c.fd);
  if (cpuinfo_fd_ >= 0) ::close(cpuinfo_fd_);
}

bool HostSensors::has(Channel c) const {
  switch (c) {
    case Channel::CpuMhz:
      return !freq_fds_.empty() || cpuinfo_fd_ >= 0;
    case Channel::CpuTempC:
      return !temp_fds_.empty();
    case Channel::CpuPowerW:
    case Channel::CpuEnergyJ:
      return !energy_.empty() || !power_fds_.empty();
    default:
      return false;
  }
}

void HostSensors::read(Sample& s) {
  long long v = 0;
  // Clock: the mean over the CPUs read.
  if (!freq_fds_.empty()) {
    double sum = 0;
    int n = 0;
    for (int fd : freq_fds_) {
      if (read_int_file(fd, v)) sum += double(v) / 1000.0, ++n;
    }
    if (n) s.set(Channel::CpuMhz, sum / n);
  } else if (cpuinfo_fd_ >= 0) {
    size_t len = 0;
    for (ssize_t r;
         len + 1 < cpuinfo_buf_.size() && (r = ::pread(cpuinfo_fd_, cpuinfo_buf_.data() + len,
                                                       cpuinfo_buf_.size() - 1 - len, off_t(len))) > 0;)
      len += size_t(r);
    cpuinfo_buf_[len] = '\0';
    double sum = 0;
    int n = 0;
    for (const char* p = cpuinfo_buf_.data(); (p = std::strstr(p, "cpu MHz")) != nullptr; ++p) {
      const char* colon = std::strchr(p, ':');
      if (!colon) break;
      sum += std::strtod(colon + 1, nullptr);
      ++n;
      p = colon;
    }
    if (n) s.set(Channel::CpuMhz, sum / n);
  }
  // Temperature: the hottest.
  double hottest = -1e9;
  for (int fd : temp_fds_) {
    if (read_int_file(fd, v)) hottest = std::max(hottest, double(v) / 1000.0);
  }
  if (hottest > -1e9) s.set(Channel::CpuTempC, hottest);
  // Power: energy counters differentiated (a wrap adds the range back), or hwmon power summed and
  // integrated for the energy.
  if (!energy_.empty()) {
    double joules = 0;
    bool all = true;
    for (Counter& c : energy_) {
      if (!read_int_file(c.fd, v)) {
        all = false;
        continue;
      }
      if (c.last >= 0) {
        double d = double(v) - c.last;
        if (d < 0 && c.max_range > 0) d += c.max_range;
        if (d >= 0) joules += d * 1e-6;
      }
      c.last = double(v);
    }
    if (last_t_ >= 0 && s.t > last_t_ && all) {
      energy_j_ += joules;
      s.set(Channel::CpuPowerW, joules / (s.t - last_t_));
    }
    s.set(Channel::CpuEnergyJ, energy_j_);
  } else if (!power_fds_.empty()) {
    double watts = 0;
    int n = 0;
    for (int fd : power_fds_) {
      if (read_int_file(fd, v)) watts += double(v) * 1e-6, ++n;
    }
    if (n) {
      if (last_t_ >= 0 && s.t > last_t_) energy_j_ += watts * (s.t - last_t_);
      s.set(Channel::CpuPowerW, watts);
      s.set(Channel::CpuEnergyJ, energy_j_);
    }
  }
  last_t_ = s.t;
}

}  // namespace tilellm::telemetry
