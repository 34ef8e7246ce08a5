// The host's sensors as Linux exposes them, found once and then read without allocating:
//   cpufreq      /sys/devices/system/cpu/cpuN/cpufreq/scaling_cur_freq (kHz) of the CPUs this process may
//                run on; where there is no cpufreq (many VMs), the "cpu MHz" lines of /proc/cpuinfo;
//   temperature  /sys/class/thermal/thermal_zone*/temp and /sys/class/hwmon/hwmon*/temp*_input
//                (millidegrees); the CPU's own where a zone or chip names itself so (x86_pkg_temp,
//                coretemp, k10temp, cpu...), else every one; the hottest is the reading;
//   power        /sys/class/powercap/intel-rapl:N/energy_uj (package energy, µJ, wrapping at
//                max_energy_range_uj; AMD's RAPL uses the same names), differentiated over time; else
//                hwmon power*_average / power*_input (µW) summed.
// Every path is taken under a root directory: "/" normally, a test's tree of files otherwise (the simulated
// sensors: the same code reads a fake thermal zone, power counter and clock).
#pragma once

#include <string>
#include <vector>

#include "runtime/telemetry/sample.h"

namespace tilellm::telemetry {

// One telemetry source as detected at start: present or absent, and what it is or why it is absent.
struct SourceStatus {
  std::string name;  // "cpufreq", "thermal", "hwmon temperature", "rapl", "hwmon power", "nvml", ...
  bool present = false;
  std::string detail;
};

class HostSensors {
 public:
  // Finds the sources under `root` and keeps their files open.
  explicit HostSensors(const std::string& root = "/");
  ~HostSensors();
  HostSensors(const HostSensors&) = delete;
  HostSensors& operator=(const HostSensors&) = delete;

  // One status per kind of source, present or not.
  const std::vector<SourceStatus>& status() const { return status_; }
  bool has(Channel c) const;
  // Fills the host channels of s (s.t must be set: power is energy over the time since the last read).
  // Allocates nothing.
  void read(Sample& s);

 private:
  struct Counter {
    int fd = -1;
    double max_range = 0;  // the value at which the counter wraps (0: unknown)
    double last = -1;      // the previous raw value (-1: none yet)
  };
  std::vector<int> freq_fds_;  // kHz
  int cpuinfo_fd_ = -1;        // /proc/cpuinfo, when there is no cpufreq
  std::vector<char> cpuinfo_buf_;
  std::vector<int> temp_fds_;    // millidegrees Celsius
  std::vector<Counter> energy_;  // RAPL packages, µJ
  std::vector<int> power_fds_;   // hwmon, µW
  double last_t_ = -1;
  double energy_j_ = 0;  // package energy since the first read
  std::vector<SourceStatus> status_;
};

// Reads a small sysfs value from an open file from its start: the integer it holds, or false when the
// read fails or the text is no integer. Allocates nothing.
bool read_int_file(int fd, long long& out);

}  // namespace tilellm::telemetry
