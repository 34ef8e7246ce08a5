// `tilellm monitor`'s report: one self-contained HTML file (styles and plots inline, plots as SVG; no
// script, no external asset, so it opens anywhere and can be mailed) rendered from a monitor record
// (runtime/telemetry/record.h): a summary table at the top, the run's settings and telemetry sources, then
// per-token decode latency over time with its p50/p95/p99, throughput, clocks, temperatures, power and
// energy per token, bandwidth share, GPU utilization and the controller's level, each with the
// controller's decisions marked on the time axis, then the decision log and the per-kernel device times.
// A quantity this machine has no source for gets no plot but a line saying so, so that every plot drawn
// holds data.
#pragma once

#include <string>

#include "runtime/telemetry/record.h"

namespace tilellm::cli {

std::string render_monitor_report(const telemetry::MonitorRecord& r);

}  // namespace tilellm::cli
