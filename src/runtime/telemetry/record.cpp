#include "runtime/telemetry/record.h"

#include <algorithm>
#include <cmath>

namespace tilellm::telemetry {
namespace {

struct Stat {
  double sum = 0, max = -INFINITY;
  int64_t n = 0;
  void add(float x) {
    if (std::isnan(x)) return;
    sum += x, ++n, max = std::max(max, double(x));
  }
  double mean() const { return n ? sum / double(n) : NAN; }
  double maximum() const { return n ? max : NAN; }
};

// The change of a cumulative channel over the run (NaN when it was never read).
double delta(const std::vector<Sample>& s, Channel c) {
  double first = NAN, last = NAN;
  for (const Sample& x : s) {
    const float v = x.get(c);
    if (std::isnan(v)) continue;
    if (std::isnan(first)) first = v;
    last = v;
  }
  return last - first;
}

}  // namespace

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t k = size_t(std::max(1.0, std::ceil(p / 100.0 * double(v.size()))));
  return v[std::min(k, v.size()) - 1];
}

Summary summarize(const MonitorRecord& r) {
  Summary s;
  std::vector<double> ms;
  double decode_ms = 0, pause_ms = 0, prompt_ms = 0, t0 = INFINITY, t1 = -INFINITY;
  for (const TokenRecord& p : r.passes) {
    t0 = std::min(t0, p.t);
    t1 = std::max(t1, p.t + (p.compute_ms + p.pause_ms) / 1000.0);
    if (p.decode) {
      ms.push_back(p.compute_ms);
      decode_ms += p.compute_ms;
      pause_ms += p.pause_ms;
      ++s.decode_steps;
      s.decode_tokens += p.n_tok;
    } else {
      s.prompt_tokens += p.n_tok;
      prompt_ms += p.compute_ms;
      ++s.requests;
    }
  }
  s.span_s = r.passes.empty() ? 0 : t1 - t0;
  if (!ms.empty()) {
    double sum = 0;
    for (double x : ms) sum += x;
    s.mean_ms = sum / double(ms.size());
    double ss = 0;
    for (double x : ms) ss += (x - s.mean_ms) * (x - s.mean_ms);
    s.stddev_ms = ms.size() > 1 ? std::sqrt(ss / double(ms.size() - 1)) : 0;
    s.p50_ms = percentile(ms, 50);
    s.p95_ms = percentile(ms, 95);
    s.p99_ms = percentile(ms, 99);
    s.p99_over_p50 = s.p99_ms / s.p50_ms;
    s.cv = s.stddev_ms / s.mean_ms;
    s.decode_tps = 1000.0 * double(s.decode_tokens) / (decode_ms + pause_ms);
    s.unpaced_tps = 1000.0 * double(s.decode_tokens) / decode_ms;
    s.paused_share = pause_ms / (decode_ms + pause_ms);
  }
  s.prompt_tps = prompt_ms > 0 ? 1000.0 * double(s.prompt_tokens) / prompt_ms : 0;

  Stat cpu_w, gpu_w, cpu_t, gpu_t, cpu_f, gpu_f;
  for (const Sample& x : r.samples) {
    cpu_w.add(x.get(Channel::CpuPowerW));
    gpu_w.add(x.get(Channel::GpuPowerW));
    cpu_t.add(x.get(Channel::CpuTempC));
    gpu_t.add(x.get(Channel::GpuTempC));
    cpu_f.add(x.get(Channel::CpuMhz));
    gpu_f.add(x.get(Channel::GpuSmMhz));
  }
  s.cpu_power_w = cpu_w.mean();
  s.gpu_power_w = gpu_w.mean();
  s.cpu_temp_mean = cpu_t.mean();
  s.cpu_temp_max = cpu_t.maximum();
  s.gpu_temp_mean = gpu_t.mean();
  s.gpu_temp_max = gpu_t.maximum();
  s.cpu_mhz_mean = cpu_f.mean();
  s.gpu_sm_mhz_mean = gpu_f.mean();
  const double generated = double(std::max<int64_t>(s.decode_tokens, 1));
  s.cpu_j_per_token = s.decode_tokens ? delta(r.samples, Channel::CpuEnergyJ) / generated : NAN;
  s.gpu_j_per_token = s.decode_tokens ? delta(r.samples, Channel::GpuEnergyJ) / generated : NAN;
  if (decode_ms > 0)
    s.bw_gbs = double(s.decode_steps) * r.info.weight_bytes_per_token / (decode_ms / 1000.0) / 1e9;
  s.bw_share_pct = r.info.peak_gbs > 0 ? 100.0 * s.bw_gbs / r.info.peak_gbs : NAN;
  s.bw_load_pct = r.info.peak_gbs > 0 && decode_ms > 0 ? s.bw_share_pct * (1.0 - s.paused_share) : NAN;
  s.decisions = int(r.decisions.size());
  for (const Decision& d : r.decisions) s.max_level = std::max(s.max_level, d.to);
  return s;
}

}  // namespace tilellm::telemetry
