// The pacing options of the commands that decode (bench, monitor): --pace, --pace-target, --degrade and
// the telemetry they read (--sample-hz, --sensors-root, --nvml-device, --peak-gbs / --peak-mib), and what
// they make for a session: the telemetry (when a limit needs readings, or always for monitor) and the
// pacer's options, the bandwidth peak measured with the backend's own memory probe when a bandwidth limit
// or a report needs it.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "runtime/session.h"
#include "runtime/telemetry/pacer.h"
#include "runtime/telemetry/telemetry.h"

namespace tilellm::cli {

struct PaceArgs {
  std::string pace;         // --pace sleep=US,every=N
  std::string pace_target;  // --pace-target temp=C,power=W,bandwidth=P%,p99=MS
  std::string degrade;      // --degrade tile-mask=F
  double sample_hz = 10;
  std::string sensors_root = "/";
  int nvml_device = 0;
  double peak_gbs = 0;  // 0: measured when needed
  int peak_mib = 0;     // the measurement's buffer; 0: max(4x the last-level cache, 256 MiB)
};

// with_degrade: --degrade too (monitor, which measures and prints its perplexity cost).
void add_pace_args(CLI::App* app, PaceArgs& a, bool with_degrade);

// What the options make for one session.
struct Pacing {
  std::unique_ptr<telemetry::Telemetry> telemetry;  // null when nothing needs it
  telemetry::PacerOptions options;
  std::string peak_source;  // how options.peak_gbs was obtained ("" when it was not)
  telemetry::Degrade degrade;
  bool any() const { return options.fixed.on() || options.limits.any() || options.tile_mask; }
};

// Parses the specs; always_telemetry makes the telemetry even without a limit (monitor); need_peak
// measures the peak even without a bandwidth limit. `so` is the session's options (its backend, device and
// threads are the probe's); weight_bytes the bytes one decode step reads.
Pacing make_pacing(const PaceArgs& a, const SessionOptions& so, double weight_bytes, bool always_telemetry,
                   bool need_peak, double capacity_s = 600);

// The bandwidth peak of the session's backend: its memory probe's best pure read (GB/s) of 5 over the
// buffer --peak-mib gives; `source` says what was measured.
double measure_peak_gbs(const SessionOptions& so, int peak_mib, std::string& source);

// One line for a controller decision, as it is printed while a run goes on:
// "pace: 12.30 s: level 3 -> 4 (pause 1x median step, 2 threads): temp 81.2 °C above 80 °C".
std::string decision_line(const telemetry::Decision& d, const std::vector<telemetry::LadderStep>& ladder);

}  // namespace tilellm::cli
