#include "runtime/telemetry/pacer.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "base/error.h"

namespace tilellm::telemetry {

Pacer::Pacer(Session& s, Telemetry* tel, const PacerOptions& o)
    : session_(s),
      tel_(tel),
      opts_(o),
      ladder_(make_ladder(s.n_threads(), s.occupancy_steps(), o.tile_mask)),
      controller_(o.limits, int(ladder_.size()) - 1),
      power_mean_(o.limits.hold_s / 2),
      bw_mean_(o.limits.hold_s / 2) {
  if (o.tile_mask && !s.has_tile_mask())
    fail("--degrade tile-mask: the {} backend has no tile mask for this model's matrices", s.backend_name());
  if (!o.limits.any()) return;
  if (!tel) fail("internal: --pace-target needs telemetry");
  // A device backend's own sensors where NVML reads them, else the host's.
  const bool device = !s.on_host();
  temp_ch_ = device && tel->has(Channel::GpuTempC) ? Channel::GpuTempC : Channel::CpuTempC;
  power_ch_ = device && tel->has(Channel::GpuPowerW) ? Channel::GpuPowerW : Channel::CpuPowerW;
  if (o.limits.has(Limit::Temp) && !tel->has(temp_ch_))
    fail(
        "--pace-target temp: no temperature source on this machine (no readable /sys/class/thermal zone or "
        "hwmon temp*_input, no NVML device)");
  if (o.limits.has(Limit::Power) && !tel->has(power_ch_))
    fail(
        "--pace-target power: no power source on this machine (no readable RAPL energy_uj or hwmon power, "
        "no NVML device)");
  if (o.limits.has(Limit::Bandwidth) && !(o.peak_gbs > 0 && o.weight_bytes_per_token > 0))
    fail("--pace-target bandwidth: no peak bandwidth to take a share of");
}

Pacer::~Pacer() {
  apply(ladder_[0]);
}

const char* Pacer::source(Limit l) const {
  switch (l) {
    case Limit::Temp:
      return channel_info(temp_ch_).key;
    case Limit::Power:
      return channel_info(power_ch_).key;
    case Limit::Bandwidth:
      return "decode steps' weight bytes / wall time";
    default:
      return "decode steps' compute time";
  }
}

double Pacer::median_ms() {
  if (median_at_ == decode_steps_) return median_cache_;
  const int n = int(std::min<int64_t>(window_n_, kWindow));
  if (n == 0) return 0;
  std::copy(window_.begin(), window_.begin() + n, scratch_.begin());
  std::nth_element(scratch_.begin(), scratch_.begin() + n / 2, scratch_.begin() + n);
  median_cache_ = scratch_[size_t(n / 2)];
  median_at_ = decode_steps_;
  return median_cache_;
}

void Pacer::apply(const LadderStep& s) {
  if (s.threads > 0 && s.threads != session_.active_threads()) session_.set_active_threads(s.threads);
  if (session_.occupancy_steps() > 0) session_.set_occupancy_step(s.occupancy);
  if (opts_.tile_mask) session_.set_tile_mask(s.tile_mask);
}

void Pacer::evaluate(double now_s) {
  // Readings: the newest sample's sensors, and the decode steps' own numbers.
  reading_[Limit::Temp] = sample_.get(temp_ch_);
  reading_[Limit::Power] = power_mean_.add(sample_.get(power_ch_), now_s);
  if (interval_start_ >= 0 && now_s > interval_start_ && opts_.peak_gbs > 0) {
    const double gbs =
        double(interval_steps_) * opts_.weight_bytes_per_token / (now_s - interval_start_) / 1e9;
    reading_[Limit::Bandwidth] = bw_mean_.add(100.0 * gbs / opts_.peak_gbs, now_s);
  }
  const int n = int(std::min<int64_t>(window_n_, kWindow));
  if (n >= 16) {
    std::copy(window_.begin(), window_.begin() + n, scratch_.begin());
    const int k = std::min(n - 1, int(std::ceil(0.99 * n)) - 1);
    std::nth_element(scratch_.begin(), scratch_.begin() + k, scratch_.begin() + n);
    reading_[Limit::P99] = scratch_[size_t(k)];
  }
  interval_steps_ = 0;
  interval_start_ = now_s;
  Decision d;
  if (controller_.update(reading_, now_s, d)) {
    apply(ladder_[size_t(d.to)]);
    tel_->record_decision(d);
  }
}

void Pacer::after_pass(Clock::time_point t0, Clock::time_point t1, int64_t n_tok, bool decode) {
  const float ms = float(std::chrono::duration<double, std::milli>(t1 - t0).count());
  const int ran_level = level(), ran_threads = session_.active_threads();
  const bool ran_masked = state().tile_mask;
  if (decode) {
    window_[size_t(window_n_ % kWindow)] = ms;
    ++window_n_;
    ++decode_steps_;
    ++interval_steps_;
  }
  if (tel_ && opts_.limits.any()) {
    const uint64_t seq = tel_->latest(sample_);
    if (seq != seen_seq_) {
      seen_seq_ = seq;
      evaluate(tel_->seconds(t1));
    }
  }
  // The pause: the fixed one every N-th decode step, and the ladder's share of the median step.
  double pause_us = 0;
  if (decode) {
    if (opts_.fixed.on() && decode_steps_ % opts_.fixed.every == 0) pause_us += double(opts_.fixed.sleep_us);
    const double f = state().pause_frac;
    if (f > 0) pause_us += f * median_ms() * 1000.0;
  }
  Clock::time_point end = t1;
  if (pause_us > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(pause_us));
    end = Clock::now();
  }
  const double paused = std::chrono::duration<double>(end - t1).count();
  paused_s_ += paused;
  if (tel_) {
    TokenRecord r;
    r.t = tel_->seconds(t0);
    r.compute_ms = ms;
    r.pause_ms = float(paused * 1000.0);
    r.n_tok = int32_t(n_tok);
    r.decode = decode ? 1 : 0;
    r.level = uint8_t(std::min(255, ran_level));
    r.threads = uint8_t(std::min(255, ran_threads));
    r.masked = ran_masked ? 1 : 0;
    tel_->record_pass(r);
  }
}

}  // namespace tilellm::telemetry
