#include "monitor_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "runtime/telemetry/nvml.h"
#include "runtime/telemetry/pacing.h"
#include "svg_plot.h"

namespace tilellm::cli {
namespace {

using namespace telemetry;

std::string fmt_or_dash(double x, const char* f) {
  return std::isfinite(x) ? fmt::format(fmt::runtime(f), x) : std::string("—");
}

// Time bins over the run: their width and, per bin, what the passes and samples in it add up to.
struct Bins {
  double width = 1;
  int n = 0;
  std::vector<double> mid;
  int of(double t) const { return std::clamp(int(t / width), 0, n - 1); }
};

Bins make_bins(double span) {
  Bins b;
  b.width = std::max(span / 300.0, 0.25);
  b.n = std::max(1, int(std::ceil(span / b.width)));
  for (int i = 0; i < b.n; ++i) b.mid.push_back((i + 0.5) * b.width);
  return b;
}

// A channel's samples, as they are when few, else averaged per bin.
PlotSeries channel_series(const MonitorRecord& r, Channel c, const Bins& b, const char* name,
                          const char* color) {
  PlotSeries s{name, color, {}, {}};
  if (r.samples.size() <= 1500) {
    for (const Sample& x : r.samples) s.x.push_back(x.t), s.y.push_back(x.get(c));
    return s;
  }
  std::vector<double> sum(size_t(b.n), 0);
  std::vector<int> cnt(size_t(b.n), 0);
  for (const Sample& x : r.samples) {
    if (std::isnan(x.get(c))) continue;
    sum[size_t(b.of(x.t))] += x.get(c), ++cnt[size_t(b.of(x.t))];
  }
  for (int i = 0; i < b.n; ++i)
    s.x.push_back(b.mid[size_t(i)]), s.y.push_back(cnt[size_t(i)] ? sum[size_t(i)] / cnt[size_t(i)] : NAN);
  return s;
}

bool has_channel(const MonitorRecord& r, Channel c) {
  int n = 0;
  for (const Sample& s : r.samples) n += !std::isnan(s.get(c));
  return n >= 2;
}

void row(std::string& o, const std::string& k, const std::string& v) {
  o += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", html_escape(k), v);
}

const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:960px;color:#1b1f24;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.sub{color:#57606a;margin:0 0 16px}table{border-collapse:collapse;margin:6px 0}th,td{padding:3px 10px;border:1px solid #d0d7de;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.summary td{font-variant-numeric:tabular-nums}.absent{color:#8c959f}.ok{color:#1a7f37}.note{color:#57606a;font-size:13px}
figure{margin:10px 0}svg.plot{background:#fff;border:1px solid #d0d7de}
svg .g{stroke:#eaeef2;stroke-width:1}svg .t{font-size:13px;font-weight:600;fill:#1b1f24}
svg .yl{font-size:11px;fill:#57606a;text-anchor:end}svg .xl{font-size:11px;fill:#57606a;text-anchor:middle}
svg .lg{font-size:11px;fill:#1b1f24}svg .s{fill:none;stroke-width:1.6}svg .sf{fill:none;stroke-width:1;opacity:.45}
svg .h{stroke-dasharray:5 4;stroke-width:1.2}svg .hl{font-size:11px;text-anchor:end}
svg .du{stroke:#cf222e;stroke-width:1.2;stroke-dasharray:3 3}svg .dd{stroke:#1a7f37;stroke-width:1.2;stroke-dasharray:3 3}
)";

}  // namespace

std::string render_monitor_report(const MonitorRecord& r) {
  const Summary s = summarize(r);
  const RunInfo& in = r.info;
  double span = 0;
  for (const TokenRecord& p : r.passes) span = std::max(span, p.t + (p.compute_ms + p.pause_ms) / 1000.0);
  for (const Sample& x : r.samples) span = std::max(span, x.t);
  const bool minutes = span > 600;
  const Bins b = make_bins(span);

  std::string o = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  o += fmt::format("<title>TileLLM monitor: {}</title>\n<style>{}</style></head><body>\n",
                   html_escape(in.model), kStyle);
  o += "<h1>TileLLM monitor report</h1>\n";
  o += fmt::format("<p class=\"sub\">{} ({}) on {} &middot; {} &middot; started {} &middot; commit {}</p>\n",
                   html_escape(in.model), html_escape(in.model_type), html_escape(in.backend),
                   html_escape(in.cpu), html_escape(in.started), html_escape(in.commit));

  // Summary.
  o += "<h2>Summary</h2>\n<table class=\"summary\">\n";
  // A sampled server's passes are its steps (monitor_serve.h): its prompt passes are steps of prompt chunks
  // alone, not requests.
  const bool served = in.backend.rfind("serve at ", 0) == 0;
  row(o, "decode steps",
      served ? fmt::format("{} in {:.1f} s ({} steps of prompt chunks alone, {} tokens)", s.decode_steps,
                           s.span_s, s.requests, s.prompt_tokens)
             : fmt::format("{} in {:.1f} s ({} requests, {} prompt tokens)", s.decode_steps, s.span_s,
                           s.requests, s.prompt_tokens));
  row(o, "decode throughput",
      fmt::format("{} tokens/s{}", fmt_or_dash(s.decode_tps, "{:.2f}"),
                  s.paused_share > 0
                      ? fmt::format(" (without the pauses {:.2f}: {:.1f}% lost to pacing)", s.unpaced_tps,
                                    100.0 * (1.0 - s.decode_tps / s.unpaced_tps))
                      : std::string()));
  row(o, "decode latency per token",
      fmt::format("p50 {} ms &middot; p95 {} ms &middot; p99 {} ms &middot; mean {} ms &middot; stddev {} ms",
                  fmt_or_dash(s.p50_ms, "{:.3f}"), fmt_or_dash(s.p95_ms, "{:.3f}"),
                  fmt_or_dash(s.p99_ms, "{:.3f}"), fmt_or_dash(s.mean_ms, "{:.3f}"),
                  fmt_or_dash(s.stddev_ms, "{:.3f}")));
  row(o, "predictability",
      fmt::format("p99 / p50 = {} &middot; stddev / mean = {}", fmt_or_dash(s.p99_over_p50, "{:.3f}"),
                  std::isfinite(s.cv) ? fmt::format("{:.2f}%", 100.0 * s.cv) : "—"));
  row(o, "prompt throughput", fmt::format("{} tokens/s", fmt_or_dash(s.prompt_tps, "{:.1f}")));
  if (std::isfinite(s.cpu_power_w) || std::isfinite(s.gpu_power_w)) {
    std::string p;
    if (std::isfinite(s.cpu_power_w))
      p += fmt::format("CPU package {:.1f} W, {} J per generated token", s.cpu_power_w,
                       fmt_or_dash(s.cpu_j_per_token, "{:.4f}"));
    if (std::isfinite(s.gpu_power_w))
      p += fmt::format("{}GPU {:.1f} W, {} J per generated token{}", p.empty() ? "" : " &middot; ",
                       s.gpu_power_w, fmt_or_dash(s.gpu_j_per_token, "{:.4f}"),
                       in.power_limit_w > 0 ? fmt::format(" (limit {:.0f} W)", in.power_limit_w) : "");
    row(o, "power and energy", p);
  } else {
    row(o, "power and energy", "<span class=\"absent\">no power source on this machine</span>");
  }
  if (std::isfinite(s.cpu_temp_mean) || std::isfinite(s.gpu_temp_mean)) {
    std::string t;
    if (std::isfinite(s.cpu_temp_mean))
      t += fmt::format("CPU mean {:.1f} °C, max {:.1f} °C", s.cpu_temp_mean, s.cpu_temp_max);
    if (std::isfinite(s.gpu_temp_mean))
      t += fmt::format("{}GPU mean {:.1f} °C, max {:.1f} °C", t.empty() ? "" : " &middot; ", s.gpu_temp_mean,
                       s.gpu_temp_max);
    row(o, "temperature", t);
  } else {
    row(o, "temperature", "<span class=\"absent\">no temperature source on this machine</span>");
  }
  if (std::isfinite(s.cpu_mhz_mean) || std::isfinite(s.gpu_sm_mhz_mean)) {
    std::string c;
    if (std::isfinite(s.cpu_mhz_mean)) c += fmt::format("CPU mean {:.0f} MHz", s.cpu_mhz_mean);
    if (std::isfinite(s.gpu_sm_mhz_mean))
      c += fmt::format("{}GPU SM mean {:.0f} MHz", c.empty() ? "" : " &middot; ", s.gpu_sm_mhz_mean);
    row(o, "clocks", c);
  }
  if (in.weight_bytes_per_token > 0) {
    row(o, "weight bandwidth",
        fmt::format("{} GB/s while computing ({:.1f} MB per token){}", fmt_or_dash(s.bw_gbs, "{:.2f}"),
                    in.weight_bytes_per_token / 1e6,
                    in.peak_gbs > 0
                        ? fmt::format(": {:.1f}% of the {:.2f} GB/s peak; {:.1f}% over the run with pauses",
                                      s.bw_share_pct, in.peak_gbs, s.bw_load_pct)
                        : std::string()));
  } else {
    row(o, "weight bandwidth",
        "<span class=\"absent\">unknown: the bytes a step reads are not known here</span>");
  }
  row(o, "pacing",
      fmt::format("--pace {} &middot; --pace-target {} &middot; {} decisions, highest level {}",
                  html_escape(in.pace), html_escape(in.pace_target), s.decisions, s.max_level));
  if (in.degrade != "off") {
    row(o, "lossy degradation",
        fmt::format("--degrade {}: perplexity {} unmasked, {} masked ({}) over {}", html_escape(in.degrade),
                    fmt_or_dash(in.ppl_unmasked > 0 ? in.ppl_unmasked : NAN, "{:.4f}"),
                    fmt_or_dash(in.ppl_masked > 0 ? in.ppl_masked : NAN, "{:.4f}"),
                    in.ppl_unmasked > 0
                        ? fmt::format("{:+.2f}%", 100.0 * (in.ppl_masked / in.ppl_unmasked - 1.0))
                        : "—",
                    html_escape(in.ppl_text)));
  }
  o += "</table>\n";

  // Settings and sources.
  o += "<h2>Run</h2>\n<table>\n";
  row(o, "model", html_escape(in.model) + " (" + html_escape(in.model_type) + ")");
  row(o, "backend",
      in.threads > 0 ? fmt::format("{} &middot; {} threads", html_escape(in.backend), in.threads)
                     : html_escape(in.backend));
  row(o, "workload", fmt::format("{} &middot; {:.0f} s asked", html_escape(in.workload), in.duration_s));
  row(o, "sampling",
      fmt::format("{:g} Hz on its own thread &middot; {} samples{}{}", in.sample_hz, r.samples.size(),
                  in.late_samples ? fmt::format(", {} late", in.late_samples) : "",
                  in.dropped ? fmt::format(", {} records dropped", in.dropped) : ""));
  row(o, "bandwidth peak",
      in.peak_gbs > 0 ? fmt::format("{:.2f} GB/s ({})", in.peak_gbs, html_escape(in.peak_source)) : "none");
  if (!in.ladder.empty() && in.pace_target != "off") {
    std::string l;
    for (size_t i = 0; i < in.ladder.size(); ++i)
      l += fmt::format("{}{}: {}", i ? "<br>" : "", i, html_escape(in.ladder[i]));
    row(o, "controller levels", l);
  }
  o += "</table>\n<table>\n<tr><th>telemetry source</th><th></th><th>what, or why absent</th></tr>\n";
  o += fmt::format("<tr><td>per-token times</td><td class=\"ok\">present</td><td>{}</td></tr>\n",
                   served ? "every engine step of the server (GET /metrics/steps)"
                          : "every forward pass, on the decode thread");
  o += fmt::format("<tr><td>per-kernel device time</td><td class=\"{}\">{}</td><td>{}</td></tr>\n",
                   in.kernel_timing ? "ok" : "absent", in.kernel_timing ? "present" : "absent",
                   in.kernel_timing
                       ? fmt::format("{} kernels timed by the backend", r.kernels.size())
                       : std::string("the backend has no kernel timestamps, or --profile was not given"));
  for (const SourceStatus& x : r.sources) {
    o += fmt::format("<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>\n", html_escape(x.name),
                     x.present ? "ok" : "absent", x.present ? "present" : "absent", html_escape(x.detail));
  }
  o += fmt::format(
      "<tr><td>weight bandwidth</td><td class=\"{}\">{}</td><td>{}</td></tr>\n</table>\n",
      in.weight_bytes_per_token > 0 ? "ok" : "absent", in.weight_bytes_per_token > 0 ? "present" : "absent",
      in.weight_bytes_per_token > 0 ? "weight bytes per decode step / step time" : "unknown bytes per step");

  // Plots.
  o += "<h2>Over time</h2>\n<p class=\"note\">Dashed red and green verticals: the controller stepping up and "
       "down "
       "(hover for the reading).</p>\n";
  std::vector<std::string> absent;
  std::vector<TimeMark> marks;
  for (const Decision& d : r.decisions) {
    marks.push_back({d.t, d.to > d.from,
                     fmt::format("{:.2f} s: level {} -> {} ({} {:.3g} {}, limit {:g})", d.t, d.from, d.to,
                                 limit_key(d.cause), d.reading, limit_unit(d.cause), d.limit)});
  }
  auto emit = [&](const TimePlot& p, const std::string& why_absent) {
    if (p.points() >= 2) {
      o += render_time_plot(p, span, marks, minutes);
    } else {
      absent.push_back(p.title + ": " + why_absent);
    }
  };
  // Decode latency and throughput, per bin.
  {
    std::vector<double> sum(size_t(b.n), 0), mx(size_t(b.n), NAN), bytes_ms(size_t(b.n), 0),
        tokens(size_t(b.n), 0);
    std::vector<int> cnt(size_t(b.n), 0), lvl(size_t(b.n), -1);
    for (const TokenRecord& p : r.passes) {
      const size_t i = size_t(b.of(p.t));
      lvl[i] = std::max(lvl[i], int(p.level));
      if (!p.decode) continue;
      sum[i] += p.compute_ms, ++cnt[i];
      tokens[i] += p.n_tok;  // one a step here; one a generating slot for a sampled server
      mx[i] = std::isnan(mx[i]) ? p.compute_ms : std::max(mx[i], double(p.compute_ms));
    }
    PlotSeries mean{"mean per bin", "#0969da", b.mid, {}}, top{"max per bin", "#0969da", b.mid, {}};
    top.faint = true;
    PlotSeries tps{"decode tokens/s", "#8250df", b.mid, {}};
    PlotSeries load{"weight bytes / wall time", "#bc4c00", b.mid, {}},
        ach{"while computing", "#0969da", b.mid, {}};
    PlotSeries level{"level", "#cf222e", b.mid, {}};
    level.step = true;
    for (int i = 0; i < b.n; ++i) {
      const size_t k = size_t(i);
      mean.y.push_back(cnt[k] ? sum[k] / cnt[k] : NAN);
      top.y.push_back(mx[k]);
      tps.y.push_back(tokens[k] / b.width);
      if (in.peak_gbs > 0) {
        load.y.push_back(100.0 * cnt[k] * in.weight_bytes_per_token / b.width / 1e9 / in.peak_gbs);
        ach.y.push_back(cnt[k] ? 100.0 * in.weight_bytes_per_token / (sum[k] / cnt[k] / 1000.0) / 1e9 /
                                     in.peak_gbs
                               : NAN);
      }
      level.y.push_back(lvl[k] >= 0 ? lvl[k] : NAN);
    }
    TimePlot lat{"latency", "Decode latency per token", "ms", {top, mean}, {}};
    lat.lines = {{s.p50_ms, fmt::format("p50 {:.3f}", s.p50_ms), "#1a7f37"},
                 {s.p95_ms, fmt::format("p95 {:.3f}", s.p95_ms), "#9a6700"},
                 {s.p99_ms, fmt::format("p99 {:.3f}", s.p99_ms), "#cf222e"}};
    emit(lat, "no decode steps");
    emit(TimePlot{"throughput", "Decode throughput", "tokens/s", {tps}, {}}, "no decode steps");
    if (in.peak_gbs > 0) {
      TimePlot bw{"bandwidth", "Weight bandwidth", "% of peak", {ach, load}, {}};
      emit(bw, "");
    } else {
      absent.push_back("Weight bandwidth: no peak measured or given");
    }
    if (in.pace_target != "off") emit(TimePlot{"level", "Pacing controller level", "level", {level}, {}}, "");
  }
  // Sensors.
  {
    TimePlot clk{"clocks", "Clocks", "MHz", {}, {}};
    if (has_channel(r, Channel::CpuMhz))
      clk.series.push_back(channel_series(r, Channel::CpuMhz, b, "CPU", "#0969da"));
    if (has_channel(r, Channel::GpuSmMhz))
      clk.series.push_back(channel_series(r, Channel::GpuSmMhz, b, "GPU SM", "#8250df"));
    if (has_channel(r, Channel::GpuMemMhz))
      clk.series.push_back(channel_series(r, Channel::GpuMemMhz, b, "GPU memory", "#bc4c00"));
    emit(clk, "no cpufreq, /proc/cpuinfo clock or NVML");
    TimePlot tmp{"temperature", "Temperature", "°C", {}, {}};
    if (has_channel(r, Channel::CpuTempC))
      tmp.series.push_back(channel_series(r, Channel::CpuTempC, b, "CPU", "#cf222e"));
    if (has_channel(r, Channel::GpuTempC))
      tmp.series.push_back(channel_series(r, Channel::GpuTempC, b, "GPU", "#bc4c00"));
    emit(tmp, "no thermal zone, hwmon sensor or NVML");
    TimePlot pw{"power", "Power", "W", {}, {}};
    if (has_channel(r, Channel::CpuPowerW))
      pw.series.push_back(channel_series(r, Channel::CpuPowerW, b, "CPU package", "#0969da"));
    if (has_channel(r, Channel::GpuPowerW))
      pw.series.push_back(channel_series(r, Channel::GpuPowerW, b, "GPU", "#8250df"));
    if (in.power_limit_w > 0 && has_channel(r, Channel::GpuPowerW))
      pw.lines.push_back({in.power_limit_w, fmt::format("GPU limit {:.0f} W", in.power_limit_w), "#57606a"});
    emit(pw, "no RAPL, hwmon power or NVML");
    // Energy per generated token per bin: the energy counters' increase over the bin / its decode steps.
    TimePlot ept{"energy", "Energy per generated token", "J", {}, {}};
    std::vector<int> steps(size_t(b.n), 0);
    for (const TokenRecord& p : r.passes) steps[size_t(b.of(p.t))] += p.decode;
    for (auto [c, name, color] : {std::tuple{Channel::CpuEnergyJ, "CPU package", "#0969da"},
                                  std::tuple{Channel::GpuEnergyJ, "GPU", "#8250df"}}) {
      if (!has_channel(r, c)) continue;
      std::vector<double> joules(size_t(b.n), 0);
      double prev = NAN;
      for (const Sample& x : r.samples) {
        const double e = x.get(c);
        if (std::isnan(e)) continue;
        if (!std::isnan(prev)) joules[size_t(b.of(x.t))] += e - prev;
        prev = e;
      }
      PlotSeries se{name, color, b.mid, {}};
      for (int i = 0; i < b.n; ++i)
        se.y.push_back(steps[size_t(i)] ? joules[size_t(i)] / steps[size_t(i)] : NAN);
      ept.series.push_back(se);
    }
    emit(ept, "no energy counter or power reading");
    TimePlot ut{"utilization", "GPU utilization", "%", {}, {}};
    if (has_channel(r, Channel::GpuUtilPct))
      ut.series.push_back(channel_series(r, Channel::GpuUtilPct, b, "kernels", "#8250df"));
    if (has_channel(r, Channel::GpuMemUtilPct))
      ut.series.push_back(channel_series(r, Channel::GpuMemUtilPct, b, "memory", "#bc4c00"));
    emit(ut, "no NVML");
  }
  if (!absent.empty()) {
    o += "<p class=\"note\">Not plotted (nothing to plot on this run):</p><ul class=\"note\">\n";
    for (const std::string& a : absent) o += "<li>" + html_escape(a) + "</li>\n";
    o += "</ul>\n";
  }

  // Decisions.
  o += "<h2>Controller decisions</h2>\n";
  if (r.decisions.empty()) {
    o += fmt::format("<p class=\"note\">{}</p>\n",
                     in.pace_target == "off" ? "No --pace-target was set: the controller had nothing to hold."
                                             : "No limit was crossed: the controller never acted.");
  } else {
    o += "<table><tr><th>time (s)</th><th>level</th><th>now</th><th>because</th></tr>\n";
    for (const Decision& d : r.decisions) {
      const std::string now = size_t(d.to) < in.ladder.size() ? in.ladder[size_t(d.to)] : "";
      o += fmt::format(
          "<tr><td class=\"n\">{:.2f}</td><td>{} &rarr; {}</td><td>{}</td><td>{} {:.4g} {} {} {:g} "
          "{}</td></tr>\n",
          d.t, d.from, d.to, html_escape(now), limit_key(d.cause), d.reading, limit_unit(d.cause),
          d.to > d.from ? "above its limit" : "below its release", d.to > d.from ? d.limit : d.release,
          limit_unit(d.cause));
    }
    o += "</table>\n";
  }
  if (!r.kernels.empty()) {
    double total = 0;
    for (const KernelTime& k : r.kernels) total += k.ns;
    std::vector<KernelTime> ks = r.kernels;
    std::sort(ks.begin(), ks.end(), [](const KernelTime& a, const KernelTime& b2) { return a.ns > b2.ns; });
    o += fmt::format(
        "<h2>Device time per kernel</h2>\n<p class=\"note\">{:.1f} ms of kernel time in all; {:.3f} ms per "
        "decode step.</p>\n<table><tr><th>kernel</th><th>calls</th><th>total "
        "ms</th><th>us/call</th><th>share</th></tr>\n",
        total / 1e6, s.decode_steps ? total / 1e6 / double(s.decode_steps) : 0.0);
    for (const KernelTime& k : ks) {
      o += fmt::format(
          "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2f}</td><td class=\"n\">{:.2f}</td><td "
          "class=\"n\">{:.1f}%</td></tr>\n",
          html_escape(k.name), k.calls, k.ns / 1e6, k.calls ? k.ns / 1e3 / double(k.calls) : 0.0,
          total > 0 ? 100.0 * k.ns / total : 0.0);
    }
    o += "</table>\n";
  }
  o += "<p class=\"note\">Written by <code>tilellm monitor</code>; the raw samples are in the JSON and CSV "
       "files beside "
       "this one (<code>tilellm monitor --from FILE.json</code> renders this page "
       "again).</p>\n</body></html>\n";
  return o;
}

}  // namespace tilellm::cli
