// What telemetry records (runtime/telemetry/telemetry.h): the sensor channels sampled at a fixed rate, one
// record per forward pass, and the pacing controller's decisions. All three are plain structs copied into
// storage made before decoding starts, so recording them allocates nothing.
#pragma once

#include <cmath>
#include <cstdint>

namespace tilellm::telemetry {

// The quantities a sample holds, one float each; NaN where this machine has no source for it (or a read
// failed). Host values come from sysfs (host_sensors.h), GPU values from NVML (nvml.h).
enum class Channel : int {
  CpuMhz,         // mean current frequency of the CPUs this process may run on (cpufreq, or /proc/cpuinfo)
  CpuTempC,       // hottest CPU temperature (thermal zones, hwmon)
  CpuPowerW,      // package power: RAPL energy counters differentiated, or hwmon power
  CpuEnergyJ,     // package energy since telemetry started
  GpuPowerW,      // NVML power usage
  GpuEnergyJ,     // NVML total energy since telemetry started (or its power integrated)
  GpuTempC,       // NVML GPU temperature
  GpuSmMhz,       // NVML SM clock
  GpuMemMhz,      // NVML memory clock
  GpuUtilPct,     // NVML utilization: share of time a kernel ran
  GpuMemUtilPct,  // NVML utilization: share of time device memory was read or written
  Count
};
inline constexpr int kChannels = int(Channel::Count);

struct ChannelInfo {
  const char* key;    // column name in the raw files ("cpu_temp_c")
  const char* label;  // for people ("CPU temperature")
  const char* unit;   // "°C"
};
const ChannelInfo& channel_info(Channel c);

struct Sample {
  double t = 0;  // seconds since telemetry started
  float v[kChannels];
  uint64_t gpu_throttle = 0;  // NVML's clock event ("throttle") reasons, a bit mask; 0: none or no NVML
  Sample() {
    for (float& x : v) x = NAN;
  }
  float get(Channel c) const { return v[int(c)]; }
  void set(Channel c, double x) { v[int(c)] = float(x); }
};

// One forward pass: a prompt batch (n_tok tokens) or one decode step.
struct TokenRecord {
  double t = 0;          // its start, seconds since telemetry started
  float compute_ms = 0;  // the pass (for a decode step: sampling the token and evaluating it)
  float pause_ms = 0;    // the pacing pause that followed it
  int32_t n_tok = 1;
  uint8_t decode = 1;   // 1: a decode step, 0: a prompt batch
  uint8_t level = 0;    // the pacing controller's level while it ran (pacing.h)
  uint8_t threads = 0;  // host threads taking work
  uint8_t masked = 0;   // 1: lossy tile masking was on
};

// The limits the controller enforces (--pace-target), in the order their readings are given.
enum class Limit : uint8_t { Temp, Power, Bandwidth, P99, Count };
inline constexpr int kLimits = int(Limit::Count);
const char* limit_key(Limit l);   // "temp", "power", "bandwidth", "p99" (--pace-target's words)
const char* limit_unit(Limit l);  // "°C", "W", "%", "ms"

// One change of the controller's level, with the reading that caused it: for a step up, the limit
// exceeded the most (reading / limit); for a step down, the reading closest to its limit, now below its
// release threshold.
struct Decision {
  double t = 0;  // seconds since telemetry started
  int from = 0, to = 0;
  Limit cause = Limit::Temp;
  double reading = 0, limit = 0, release = 0;  // release: the reading the level may step down below
};

}  // namespace tilellm::telemetry
