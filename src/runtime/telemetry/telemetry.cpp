#include "runtime/telemetry/telemetry.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tilellm::telemetry {

const ChannelInfo& channel_info(Channel c) {
  static const ChannelInfo kInfo[kChannels] = {
      {"cpu_mhz", "CPU clock", "MHz"},
      {"cpu_temp_c", "CPU temperature", "°C"},
      {"cpu_power_w", "CPU package power", "W"},
      {"cpu_energy_j", "CPU package energy", "J"},
      {"gpu_power_w", "GPU power", "W"},
      {"gpu_energy_j", "GPU energy", "J"},
      {"gpu_temp_c", "GPU temperature", "°C"},
      {"gpu_sm_mhz", "GPU SM clock", "MHz"},
      {"gpu_mem_mhz", "GPU memory clock", "MHz"},
      {"gpu_util_pct", "GPU utilization", "%"},
      {"gpu_mem_util_pct", "GPU memory utilization", "%"},
  };
  return kInfo[int(c)];
}

const char* limit_key(Limit l) {
  static const char* kKeys[kLimits] = {"temp", "power", "bandwidth", "p99"};
  return kKeys[int(l)];
}

const char* limit_unit(Limit l) {
  static const char* kUnits[kLimits] = {"°C", "W", "%", "ms"};
  return kUnits[int(l)];
}

Telemetry::Telemetry(const TelemetryOptions& opts)
    : opts_(opts),
      epoch_(Clock::now()),
      samples_(size_t(std::clamp(opts.sample_hz, 0.5, 1000.0) * std::max(opts.capacity_hint_s, 1.0)) + 64),
      passes_(size_t(1) << 16),
      decisions_(256) {
  if (!(opts.sample_hz >= 0.5 && opts.sample_hz <= 1000))
    fail("telemetry sampling rate {} Hz is out of range (0.5 to 1000)", opts.sample_hz);
  host_ = std::make_unique<HostSensors>(opts.sysfs_root);
  if (opts.nvml) nvml_ = std::make_unique<NvmlSensors>(opts.nvml_device);
}

Telemetry::~Telemetry() {
  stop();
}

std::vector<SourceStatus> Telemetry::sources() const {
  std::vector<SourceStatus> v = host_->status();
  if (nvml_) {
    v.push_back(nvml_->status());
  } else {
    v.push_back({"nvml", false, "not loaded (disabled)"});
  }
  return v;
}

bool Telemetry::has(Channel c) const {
  return host_->has(c) || (nvml_ && nvml_->has(c));
}

Sample Telemetry::read(double t) {
  Sample s;
  s.t = t;
  host_->read(s);
  if (nvml_) nvml_->read(s);
  return s;
}

void Telemetry::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(stop_mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { loop(); });
}

void Telemetry::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
  drain();
}

void Telemetry::loop() {
  const auto period =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / opts_.sample_hz));
  Clock::time_point next = Clock::now();
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now - next > period) {
      // Behind by more than a period: count it and keep the schedule from here rather than reading in a
      // burst.
      ++late_;
      next = now;
    }
    const Sample s = read(seconds(now));
    samples_.push(s);
    {
      std::lock_guard<std::mutex> lk(latest_mu_);
      latest_ = s;
      ++seq_;
    }
    drain();
    next += period;
    std::unique_lock<std::mutex> lk(stop_mu_);
    if (stop_cv_.wait_until(lk, next, [&] { return stop_; })) return;
  }
}

void Telemetry::drain() {
  pass_ring_.drain([&](const TokenRecord& r) { passes_.push(r); });
  decision_ring_.drain([&](const Decision& d) {
    decisions_.push(d);
    if (on_decision_) on_decision_(d);
  });
}

uint64_t Telemetry::latest(Sample& s) const {
  std::lock_guard<std::mutex> lk(latest_mu_);
  if (seq_ > 0) s = latest_;
  return seq_;
}

void Telemetry::record_pass(const TokenRecord& r) {
  if (!pass_ring_.push(r)) dropped_.fetch_add(1, std::memory_order_relaxed);
  // Without the sampling thread (a test stepping read() by hand) the rings are drained here.
  if (!thread_.joinable()) drain();
}

void Telemetry::record_decision(const Decision& d) {
  if (!decision_ring_.push(d)) dropped_.fetch_add(1, std::memory_order_relaxed);
  if (!thread_.joinable()) drain();
}

}  // namespace tilellm::telemetry
