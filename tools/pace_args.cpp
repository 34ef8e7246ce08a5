#include "pace_args.h"

#include <fmt/format.h>

#include <algorithm>

#include "backends/registry.h"
#include "base/error.h"
#include "base/thread_pool.h"

namespace tilellm::cli {

void add_pace_args(CLI::App* app, PaceArgs& a, bool with_degrade) {
  app->add_option("--pace", a.pace, "a fixed pause after every N-th decode step: sleep=US,every=N");
  app->add_option(
      "--pace-target", a.pace_target,
      "limits a controller holds by pausing, then fewer threads, ...: temp=C,power=W,bandwidth=P%,"
      "p99=MS (one or more; hysteresis=F, hold=S tune it)");
  if (with_degrade)
    app->add_option(
        "--degrade", a.degrade,
        "allow lossy degradation as the controller's last measure: tile-mask=F (mask the fraction F of "
        "the feed-forward row tiles; its perplexity cost is printed)");
  app->add_option("--sample-hz", a.sample_hz, "telemetry samples per second")->capture_default_str();
  app->add_option(
         "--sensors-root", a.sensors_root,
         "read the host's sensors under this directory instead of / (a tree laid out as sysfs: simulated "
         "sensors)")
      ->capture_default_str();
  app->add_option("--nvml-device", a.nvml_device, "NVML's index of the GPU whose sensors are read")
      ->capture_default_str();
  app->add_option("--peak-gbs", a.peak_gbs, "the memory bandwidth peak in GB/s (default: measured)");
  app->add_option("--peak-mib", a.peak_mib,
                  "buffer size of the peak measurement in MiB (default: 4x the cache)");
}

double measure_peak_gbs(const SessionOptions& so, int peak_mib, std::string& source) {
  const BackendEntry& entry = require_backend(so.backend);
  if (!entry.make_probe)
    fail("the {} backend has no memory probe to measure the bandwidth peak: give --peak-gbs", entry.name);
  ThreadPool pool(so.n_threads > 0 ? so.n_threads : ThreadPool::default_threads(), so.cpus);
  BackendParams p = backend_params(so);
  p.pool = &pool;
  const std::unique_ptr<MemoryProbe> probe = entry.make_probe(p);
  size_t bytes =
      peak_mib > 0 ? size_t(peak_mib) << 20 : std::max<size_t>(probe->cache_bytes() * 4, size_t(256) << 20);
  bytes = std::min(bytes, probe->max_buffer_bytes()) / 64 * 64;
  double best = 0;
  for (int i = 0; i < 5; ++i) best = std::max(best, probe->read_gbs(bytes));
  source = fmt::format("measured: the {} backend's read probe, best of 5 over {} MiB{}", entry.name,
                       bytes >> 20, entry.host ? fmt::format(", {} threads", pool.size()) : "");
  return best;
}

Pacing make_pacing(const PaceArgs& a, const SessionOptions& so, double weight_bytes, bool always_telemetry,
                   bool need_peak, double capacity_s) {
  Pacing p;
  if (!a.pace.empty()) p.options.fixed = telemetry::parse_pace(a.pace);
  if (!a.pace_target.empty()) p.options.limits = telemetry::parse_pace_target(a.pace_target);
  if (!a.degrade.empty()) p.degrade = telemetry::parse_degrade(a.degrade);
  p.options.tile_mask = p.degrade.tile_mask > 0;
  if (p.options.tile_mask && !p.options.limits.any())
    fail("--degrade is the controller's last measure: give --pace-target limits for it to act on");
  p.options.weight_bytes_per_token = weight_bytes;
  if (a.peak_gbs < 0) fail("--peak-gbs must be positive (got {})", a.peak_gbs);
  if (a.peak_mib < 0) fail("--peak-mib must be positive (got {})", a.peak_mib);
  if (a.peak_gbs > 0) {
    p.options.peak_gbs = a.peak_gbs;
    p.peak_source = "given (--peak-gbs)";
  } else if (need_peak || p.options.limits.has(telemetry::Limit::Bandwidth)) {
    p.options.peak_gbs = measure_peak_gbs(so, a.peak_mib, p.peak_source);
  }
  if (always_telemetry || p.options.limits.any()) {
    telemetry::TelemetryOptions to;
    to.sample_hz = a.sample_hz;
    to.sysfs_root = a.sensors_root;
    to.nvml_device = a.nvml_device;
    to.capacity_hint_s = capacity_s;
    p.telemetry = std::make_unique<telemetry::Telemetry>(to);
  }
  return p;
}

std::string decision_line(const telemetry::Decision& d, const std::vector<telemetry::LadderStep>& ladder) {
  const bool up = d.to > d.from;
  return fmt::format("pace: {:.2f} s: level {} -> {} ({}): {} {:.4g} {} {} {:g} {}", d.t, d.from, d.to,
                     size_t(d.to) < ladder.size() ? telemetry::describe(ladder[size_t(d.to)]) : "?",
                     telemetry::limit_key(d.cause), d.reading, telemetry::limit_unit(d.cause),
                     up ? "above its limit" : "below its release", up ? d.limit : d.release,
                     telemetry::limit_unit(d.cause));
}

}  // namespace tilellm::cli
