// A monitored run as one record: what ran (model, backend, pacing), the telemetry sources found, every
// sample, every forward pass, every controller decision and the per-kernel device times, with the summary
// statistics computed from them. `tilellm monitor` writes it as JSON (the raw samples, which its HTML
// report is rendered from, so `monitor --from FILE` re-renders a run) and as CSV (samples and passes, for
// spreadsheets).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/kernel_time.h"
#include "runtime/telemetry/host_sensors.h"
#include "runtime/telemetry/sample.h"

namespace tilellm::telemetry {

struct RunInfo {
  std::string model;       // file
  std::string model_type;  // "llama 135M Q4_1"
  std::string backend;     // "cpu", "vulkan:0", ...
  std::string cpu;         // the CPU's model name
  std::string commit;
  std::string started;   // RFC 3339 UTC
  std::string workload;  // "random tokens: prompt 32, generate 128 per request", or the prompt file
  int threads = 0;
  double duration_s = 0;  // asked for
  double sample_hz = 0;
  std::string pace = "off", pace_target = "off", degrade = "off";
  std::vector<std::string> ladder;    // what each controller level does (pacing.h describe), level 0 first
  double weight_bytes_per_token = 0;  // weight bytes one decode step reads
  double peak_gbs = 0;                // the bandwidth peak shares are of (0: none)
  std::string peak_source;            // how it was obtained
  double ppl_unmasked = 0, ppl_masked = 0;  // --degrade: its perplexity cost (0: not measured)
  std::string ppl_text;                     // over what
  double power_limit_w = 0;                 // NVML's enforced limit (0: unknown)
  bool kernel_timing = false;               // the backend timed its kernels (--profile)
  uint64_t dropped = 0, late_samples = 0;
};

struct MonitorRecord {
  RunInfo info;
  std::vector<SourceStatus> sources;
  std::vector<Sample> samples;
  std::vector<TokenRecord> passes;
  std::vector<Decision> decisions;
  std::vector<KernelTime> kernels;
};

// Nearest-rank percentile (p in (0, 100]) of v, which it sorts; NaN for an empty v.
double percentile(std::vector<double>& v, double p);

struct Summary {
  int64_t decode_steps = 0, prompt_tokens = 0, requests = 0;
  // Tokens the decode steps generated: one a step here; under `monitor --serve` one a generating slot.
  int64_t decode_tokens = 0;
  double span_s = 0;  // first pass start to last pass end
  // Decode steps' compute time (ms): percentiles, mean and sample standard deviation.
  double p50_ms = 0, p95_ms = 0, p99_ms = 0, mean_ms = 0, stddev_ms = 0;
  double p99_over_p50 = 0, cv = 0;  // p99 / p50 and stddev / mean
  double decode_tps = 0;            // decode tokens / (the steps' compute + pauses)
  double prompt_tps = 0;
  double paused_share = 0;  // pauses / (decode compute + pauses)
  double unpaced_tps = 0;   // decode tokens / the steps' compute alone: the throughput without the pauses
  // Averages over the samples (NaN where absent) and energy per generated token (prefill included).
  double cpu_power_w = 0, gpu_power_w = 0, cpu_j_per_token = 0, gpu_j_per_token = 0;
  double cpu_temp_mean = 0, cpu_temp_max = 0, gpu_temp_mean = 0, gpu_temp_max = 0;
  double cpu_mhz_mean = 0, gpu_sm_mhz_mean = 0;
  double bw_gbs = 0,
         bw_share_pct = 0;  // decode weight bytes / decode compute time, and its share of the peak
  double bw_load_pct =
      0;  // decode weight bytes / (compute + pauses) as a share of the peak: what pacing lowers
  int decisions = 0, max_level = 0;
};
Summary summarize(const MonitorRecord& r);

// JSON: one object (format "tilellm-monitor", version 1); the summary is written beside the raw data for
// readers and recomputed on reading. read_record throws tilellm::Error naming the file and what is wrong
// with it (missing, empty, not JSON, not a monitor file, a row of the wrong length, no decode steps).
void write_record_json(const MonitorRecord& r, const std::string& path);
MonitorRecord read_record_json(const std::string& path);
// CSV: samples (t_s and every channel, empty where absent, gpu_throttle) and passes, one row each.
void write_samples_csv(const MonitorRecord& r, const std::string& path);
void write_passes_csv(const MonitorRecord& r, const std::string& path);

}  // namespace tilellm::telemetry
