#include "runtime/telemetry/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

namespace tilellm::telemetry {
namespace {

// NVML's C interface, the part read here (nvml.h: nvmlReturn_t is an enum, NVML_SUCCESS 0; a device handle
// is an opaque pointer; clock types NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2; NVML_TEMPERATURE_GPU 0).
using Ret = int;
using Dev = void*;
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
constexpr Ret kSuccess = 0;
constexpr int kClockSm = 1, kClockMem = 2, kTemperatureGpu = 0;

}  // namespace

struct NvmlSensors::Api {
  Ret (*init)();
  Ret (*shutdown)();
  const char* (*error_string)(Ret);
  Ret (*count)(unsigned int*);
  Ret (*handle)(unsigned int, Dev*);
  Ret (*name)(Dev, char*, unsigned int);
  Ret (*power)(Dev, unsigned int*);
  Ret (*energy)(Dev, unsigned long long*);
  Ret (*temperature)(Dev, int, unsigned int*);
  Ret (*clock)(Dev, int, unsigned int*);
  Ret (*utilization)(Dev, Utilization*);
  Ret (*throttle)(Dev, unsigned long long*);
  Ret (*power_limit)(Dev, unsigned int*);
};

NvmlSensors::NvmlSensors(int index) {
  status_.name = "nvml";
  const char* env = std::getenv("TILELLM_NVML_LIBRARY");
  const std::string file = env && *env ? env : "libnvidia-ml.so.1";
  lib_ = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    const char* e = dlerror();
    status_.detail = fmt::format("{} not loaded ({})", file, e ? e : "unknown error");
    return;
  }
  auto sym = [&](const char* n) { return dlsym(lib_, n); };
  api_ = new Api{};
  bool ok = true;
  auto need = [&](auto& fn, const char* n) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym(n));
    ok = ok && fn != nullptr;
  };
  auto want = [&](auto& fn, const char* n) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym(n));
  };
  need(api_->init, "nvmlInit_v2");
  need(api_->shutdown, "nvmlShutdown");
  need(api_->count, "nvmlDeviceGetCount_v2");
  need(api_->handle, "nvmlDeviceGetHandleByIndex_v2");
  want(api_->error_string, "nvmlErrorString");
  want(api_->name, "nvmlDeviceGetName");
  want(api_->power, "nvmlDeviceGetPowerUsage");
  want(api_->energy, "nvmlDeviceGetTotalEnergyConsumption");
  want(api_->temperature, "nvmlDeviceGetTemperature");
  want(api_->clock, "nvmlDeviceGetClockInfo");
  want(api_->utilization, "nvmlDeviceGetUtilizationRates");
  want(api_->throttle, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!api_->throttle) want(api_->throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
  want(api_->power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  auto err = [&](Ret r) {
    return api_->error_string ? fmt::format("{}", api_->error_string(r)) : fmt::format("error {}", r);
  };
  if (!ok) {
    status_.detail = fmt::format("{} lacks nvmlInit_v2 / nvmlDeviceGetHandleByIndex_v2", file);
    delete api_;
    api_ = nullptr;
    return;
  }
  if (Ret r = api_->init(); r != kSuccess) {
    status_.detail = fmt::format("nvmlInit failed: {}", err(r));
    delete api_;
    api_ = nullptr;
    return;
  }
  unsigned int n = 0;
  Dev dev = nullptr;
  if (Ret r = api_->count(&n); r != kSuccess || index < 0 || unsigned(index) >= n) {
    status_.detail = r != kSuccess ? fmt::format("nvmlDeviceGetCount failed: {}", err(r))
                                   : fmt::format("no NVML device {} ({} devices)", index, n);
  } else if (Ret r2 = api_->handle(unsigned(index), &dev); r2 != kSuccess) {
    status_.detail = fmt::format("NVML device {}: {}", index, err(r2));
  }
  if (!dev) {
    api_->shutdown();
    delete api_;
    api_ = nullptr;
    return;
  }
  device_ = dev;
  // What this device answers.
  unsigned int u = 0;
  unsigned long long ull = 0;
  Utilization ut{};
  has_[int(Channel::GpuPowerW)] = api_->power && api_->power(dev, &u) == kSuccess;
  has_[int(Channel::GpuEnergyJ)] =
      (api_->energy && api_->energy(dev, &ull) == kSuccess) || has_[int(Channel::GpuPowerW)];
  has_[int(Channel::GpuTempC)] = api_->temperature && api_->temperature(dev, kTemperatureGpu, &u) == kSuccess;
  has_[int(Channel::GpuSmMhz)] = api_->clock && api_->clock(dev, kClockSm, &u) == kSuccess;
  has_[int(Channel::GpuMemMhz)] = api_->clock && api_->clock(dev, kClockMem, &u) == kSuccess;
  has_[int(Channel::GpuUtilPct)] = has_[int(Channel::GpuMemUtilPct)] =
      api_->utilization && api_->utilization(dev, &ut) == kSuccess;
  has_throttle_ = api_->throttle && api_->throttle(dev, &ull) == kSuccess;
  if (api_->power_limit && api_->power_limit(dev, &u) == kSuccess) power_limit_w_ = double(u) / 1000.0;
  char name[96] = "?";
  if (api_->name) api_->name(dev, name, sizeof(name));
  std::string what;
  const char* names[] = {"power", "energy", "temperature", "SM clock", "memory clock", "utilization"};
  const Channel chans[] = {Channel::GpuPowerW, Channel::GpuEnergyJ, Channel::GpuTempC,
                           Channel::GpuSmMhz,  Channel::GpuMemMhz,  Channel::GpuUtilPct};
  for (int i = 0; i < 6; ++i) {
    if (has_[int(chans[i])]) what += (what.empty() ? "" : ", ") + std::string(names[i]);
  }
  if (has_throttle_) what += (what.empty() ? "" : ", ") + std::string("throttle reasons");
  status_.present = true;
  status_.detail =
      fmt::format("device {}: {} ({}; power limit {})", index, name, what.empty() ? "nothing" : what,
                  std::isnan(power_limit_w_) ? "unknown" : fmt::format("{:.0f} W", power_limit_w_));
}

NvmlSensors::~NvmlSensors() {
  if (api_) {
    api_->shutdown();
    delete api_;
  }
  if (lib_) dlclose(lib_);
}

bool NvmlSensors::has(Channel c) const {
  return device_ && has_[int(c)];
}

void NvmlSensors::read(Sample& s) {
  if (!device_) return;
  unsigned int u = 0;
  unsigned long long ull = 0;
  Dev d = device_;
  double watts = NAN;
  if (has_[int(Channel::GpuPowerW)] && api_->power(d, &u) == kSuccess) {
    watts = double(u) / 1000.0;
    s.set(Channel::GpuPowerW, watts);
  }
  if (api_->energy && api_->energy(d, &ull) == kSuccess) {
    if (energy0_mj_ < 0) energy0_mj_ = double(ull);
    s.set(Channel::GpuEnergyJ, (double(ull) - energy0_mj_) / 1000.0);
  } else if (!std::isnan(watts)) {
    if (last_t_ >= 0 && s.t > last_t_) energy_j_ += watts * (s.t - last_t_);
    s.set(Channel::GpuEnergyJ, energy_j_);
  }
  if (has_[int(Channel::GpuTempC)] && api_->temperature(d, kTemperatureGpu, &u) == kSuccess)
    s.set(Channel::GpuTempC, u);
  if (has_[int(Channel::GpuSmMhz)] && api_->clock(d, kClockSm, &u) == kSuccess) s.set(Channel::GpuSmMhz, u);
  if (has_[int(Channel::GpuMemMhz)] && api_->clock(d, kClockMem, &u) == kSuccess)
    s.set(Channel::GpuMemMhz, u);
  Utilization ut{};
  if (has_[int(Channel::GpuUtilPct)] && api_->utilization(d, &ut) == kSuccess) {
    s.set(Channel::GpuUtilPct, ut.gpu);
    s.set(Channel::GpuMemUtilPct, ut.memory);
  }
  if (has_throttle_ && api_->throttle(d, &ull) == kSuccess) s.gpu_throttle = ull;
  last_t_ = s.t;
}

std::string throttle_reason_names(uint64_t bits) {
  if (bits == 0) return "none";
  // nvml.h's nvmlClocksEventReason* bits.
  static const struct {
    uint64_t bit;
    const char* name;
  } kReasons[] = {{0x1, "gpu idle"},
                  {0x2, "applications clocks"},
                  {0x4, "sw power cap"},
                  {0x8, "hw slowdown"},
                  {0x10, "sync boost"},
                  {0x20, "sw thermal slowdown"},
                  {0x40, "hw thermal slowdown"},
                  {0x80, "hw power brake"},
                  {0x100, "display clocks"}};
  std::string s;
  uint64_t known = 0;
  for (const auto& r : kReasons) {
    known |= r.bit;
    if (bits & r.bit) s += (s.empty() ? "" : ", ") + std::string(r.name);
  }
  if (bits & ~known) s += fmt::format("{}0x{:x}", s.empty() ? "" : ", ", bits & ~known);
  return s;
}

}  // namespace tilellm::telemetry
