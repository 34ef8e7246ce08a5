// NVIDIA GPUs' sensors through NVML, loaded at run time: the binary does not link libnvidia-ml, it opens
// libnvidia-ml.so.1 (the file the NVIDIA driver installs) when telemetry starts and resolves the few entry
// points it reads, so one binary runs everywhere and says why NVML is absent where it is. The environment
// variable TILELLM_NVML_LIBRARY names another file instead (a debugging switch, as the OpenCL and Vulkan
// loaders have: the tests point it at a fake library, or at a path that does not exist).
//
// Read per sample, each only where the device answers it (NVML_ERROR_NOT_SUPPORTED leaves the channel out):
// power (mW), total energy (mJ, Volta and later; else the power is integrated), GPU temperature, SM and
// memory clocks, utilization (kernel time and memory time shares), and the clock event ("throttle")
// reasons bit mask.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/telemetry/host_sensors.h"
#include "runtime/telemetry/sample.h"

namespace tilellm::telemetry {

class NvmlSensors {
 public:
  // Loads NVML and opens device `index` (NVML's numbering, as nvidia-smi's).
  explicit NvmlSensors(int index = 0);
  ~NvmlSensors();
  NvmlSensors(const NvmlSensors&) = delete;
  NvmlSensors& operator=(const NvmlSensors&) = delete;

  const SourceStatus& status() const { return status_; }
  bool present() const { return status_.present; }
  bool has(Channel c) const;
  // Fills the GPU channels of s (s.t set). Allocates nothing.
  void read(Sample& s);
  // The device's enforced power limit in watts (NaN: unknown), for the report.
  double power_limit_w() const { return power_limit_w_; }

 private:
  struct Api;
  Api* api_ = nullptr;
  void* lib_ = nullptr;
  void* device_ = nullptr;
  bool has_[kChannels] = {};
  bool has_throttle_ = false;
  double energy0_mj_ = -1;  // the total energy counter at the first read
  double energy_j_ = 0;     // integrated power, where there is no energy counter
  double last_t_ = -1;
  double power_limit_w_ = NAN;
  SourceStatus status_;
};

// The names of the clock event reasons set in `bits` ("sw power cap, hw thermal slowdown"), "none" for 0.
std::string throttle_reason_names(uint64_t bits);

}  // namespace tilellm::telemetry
