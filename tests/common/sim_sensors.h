// Simulated host sensors for tests: a directory tree laid out as Linux's sysfs (a thermal zone of the CPU
// package, a RAPL package energy counter, one CPU's cpufreq clock) whose values the test writes, read
// through telemetry's real readers by giving it the tree as its root (TelemetryOptions::sysfs_root).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace tilellm::test {

class SimSensors {
 public:
  SimSensors() {
    char tmpl[] = "/tmp/tilellm-sim-sensors-XXXXXX";
    root_ = mkdtemp(tmpl);
    namespace fs = std::filesystem;
    fs::create_directories(root_ / "sys/class/thermal/thermal_zone0");
    fs::create_directories(root_ / "sys/class/powercap/intel-rapl:0");
    fs::create_directories(root_ / "sys/devices/system/cpu/cpu0/cpufreq");
    put("sys/class/thermal/thermal_zone0/type", "x86_pkg_temp");
    put("sys/class/powercap/intel-rapl:0/name", "package-0");
    put("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850");
    temp_c(40.0);
    energy_uj(0);
    mhz(2400);
  }
  ~SimSensors() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  SimSensors(const SimSensors&) = delete;
  SimSensors& operator=(const SimSensors&) = delete;

  std::string root() const { return root_.string(); }
  void temp_c(double c) { put("sys/class/thermal/thermal_zone0/temp", std::to_string(long(c * 1000.0))); }
  void energy_uj(long long uj) { put("sys/class/powercap/intel-rapl:0/energy_uj", std::to_string(uj)); }
  void energy_range_uj(long long uj) {
    put("sys/class/powercap/intel-rapl:0/max_energy_range_uj", std::to_string(uj));
  }
  void mhz(double m) {
    put("sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", std::to_string(long(m * 1000.0)));
  }
  // Writes a file of the tree in place (as sysfs values change under an open file), relative to the root.
  void put(const std::string& rel, const std::string& value) {
    std::ofstream out(root_ / rel, std::ios::trunc);
    out << value << "\n";
  }

 private:
  std::filesystem::path root_;
};

}  // namespace tilellm::test
