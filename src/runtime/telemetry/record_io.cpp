// The monitor record's files (record.h): JSON, which reports are rendered from, and CSV.
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "runtime/telemetry/record.h"

namespace tilellm::telemetry {
namespace {

using json = nlohmann::ordered_json;
constexpr const char* kFormat = "tilellm-monitor";
constexpr int kVersion = 1;
const char* const kPassColumns[] = {"t_s",    "compute_ms", "pause_ms", "n_tok",
                                    "decode", "level",      "threads",  "masked"};
constexpr size_t kPassCols = sizeof(kPassColumns) / sizeof(kPassColumns[0]);

json num_or_null(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

void write_file(const std::string& path, const std::string& text) {
  // Written beside the target and renamed over it, so a failed write leaves no half file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) fail("{}: cannot write ({})", path, std::strerror(errno));
    out << text;
    if (!out.flush()) fail("{}: write failed", path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("{}: cannot write ({})", path, std::strerror(errno));
}

json info_json(const RunInfo& i) {
  json j;
  j["model"] = i.model;
  j["model_type"] = i.model_type;
  j["backend"] = i.backend;
  j["cpu"] = i.cpu;
  j["commit"] = i.commit;
  j["started"] = i.started;
  j["workload"] = i.workload;
  j["threads"] = i.threads;
  j["duration_s"] = i.duration_s;
  j["sample_hz"] = i.sample_hz;
  j["pace"] = i.pace;
  j["pace_target"] = i.pace_target;
  j["degrade"] = i.degrade;
  j["ladder"] = i.ladder;
  j["weight_bytes_per_token"] = i.weight_bytes_per_token;
  j["peak_gbs"] = i.peak_gbs;
  j["peak_source"] = i.peak_source;
  j["ppl_unmasked"] = i.ppl_unmasked;
  j["ppl_masked"] = i.ppl_masked;
  j["ppl_text"] = i.ppl_text;
  j["power_limit_w"] = i.power_limit_w;
  j["kernel_timing"] = i.kernel_timing;
  j["dropped"] = i.dropped;
  j["late_samples"] = i.late_samples;
  return j;
}

// A typed field of object o, named in the error when it is missing or of another type.
template <class T>
T get(const json& o, const char* key, const std::string& where, const T& dflt, bool required = false) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    if (required) fail("{}: missing \"{}\"", where, key);
    return dflt;
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    fail("{}: \"{}\" is not a {}", where, key, std::is_same_v<T, std::string> ? "string" : "number");
  }
}

RunInfo info_from(const json& j, const std::string& f) {
  RunInfo i;
  const std::string w = f + ": \"run\"";
  i.model = get<std::string>(j, "model", w, "");
  i.model_type = get<std::string>(j, "model_type", w, "");
  i.backend = get<std::string>(j, "backend", w, "");
  i.cpu = get<std::string>(j, "cpu", w, "");
  i.commit = get<std::string>(j, "commit", w, "");
  i.started = get<std::string>(j, "started", w, "");
  i.workload = get<std::string>(j, "workload", w, "");
  i.threads = get<int>(j, "threads", w, 0);
  i.duration_s = get<double>(j, "duration_s", w, 0);
  i.sample_hz = get<double>(j, "sample_hz", w, 0);
  i.pace = get<std::string>(j, "pace", w, "off");
  i.pace_target = get<std::string>(j, "pace_target", w, "off");
  i.degrade = get<std::string>(j, "degrade", w, "off");
  if (j.contains("ladder") && j["ladder"].is_array()) {
    for (const json& s : j["ladder"]) i.ladder.push_back(s.is_string() ? s.get<std::string>() : s.dump());
  }
  i.weight_bytes_per_token = get<double>(j, "weight_bytes_per_token", w, 0);
  i.peak_gbs = get<double>(j, "peak_gbs", w, 0);
  i.peak_source = get<std::string>(j, "peak_source", w, "");
  i.ppl_unmasked = get<double>(j, "ppl_unmasked", w, 0);
  i.ppl_masked = get<double>(j, "ppl_masked", w, 0);
  i.ppl_text = get<std::string>(j, "ppl_text", w, "");
  i.power_limit_w = get<double>(j, "power_limit_w", w, 0);
  i.kernel_timing = get<bool>(j, "kernel_timing", w, false);
  i.dropped = get<uint64_t>(j, "dropped", w, 0);
  i.late_samples = get<uint64_t>(j, "late_samples", w, 0);
  return i;
}

const json& array_field(const json& root, const char* key, const std::string& f) {
  const auto it = root.find(key);
  if (it == root.end()) fail("{}: missing \"{}\"", f, key);
  if (!it->is_array()) fail("{}: \"{}\" is not an array", f, key);
  return *it;
}

double cell(const json& v, const std::string& f, const char* what, size_t row) {
  if (v.is_null()) return NAN;
  if (!v.is_number())
    fail("{}: {} row {} holds a value that is not a number ({})", f, what, row + 1, v.dump());
  return v.get<double>();
}

}  // namespace

void write_record_json(const MonitorRecord& r, const std::string& path) {
  json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["run"] = info_json(r.info);
  const Summary s = summarize(r);
  json sj;
  sj["decode_steps"] = s.decode_steps;
  sj["prompt_tokens"] = s.prompt_tokens;
  sj["requests"] = s.requests;
  sj["span_s"] = s.span_s;
  sj["p50_ms"] = num_or_null(s.p50_ms);
  sj["p95_ms"] = num_or_null(s.p95_ms);
  sj["p99_ms"] = num_or_null(s.p99_ms);
  sj["mean_ms"] = num_or_null(s.mean_ms);
  sj["stddev_ms"] = num_or_null(s.stddev_ms);
  sj["p99_over_p50"] = num_or_null(s.p99_over_p50);
  sj["stddev_over_mean"] = num_or_null(s.cv);
  sj["decode_tps"] = num_or_null(s.decode_tps);
  sj["unpaced_tps"] = num_or_null(s.unpaced_tps);
  sj["paused_share"] = num_or_null(s.paused_share);
  sj["prompt_tps"] = num_or_null(s.prompt_tps);
  sj["cpu_power_w"] = num_or_null(s.cpu_power_w);
  sj["gpu_power_w"] = num_or_null(s.gpu_power_w);
  sj["cpu_j_per_token"] = num_or_null(s.cpu_j_per_token);
  sj["gpu_j_per_token"] = num_or_null(s.gpu_j_per_token);
  sj["bw_gbs"] = num_or_null(s.bw_gbs);
  sj["bw_share_pct"] = num_or_null(s.bw_share_pct);
  sj["bw_load_pct"] = num_or_null(s.bw_load_pct);
  sj["decisions"] = s.decisions;
  sj["max_level"] = s.max_level;
  j["summary"] = sj;
  json src = json::array();
  for (const SourceStatus& x : r.sources)
    src.push_back({{"name", x.name}, {"present", x.present}, {"detail", x.detail}});
  j["sources"] = src;
  json cols = json::array({"t_s"});
  for (int c = 0; c < kChannels; ++c) cols.push_back(channel_info(Channel(c)).key);
  cols.push_back("gpu_throttle");
  j["sample_columns"] = cols;
  json samples = json::array();
  for (const Sample& x : r.samples) {
    json row = json::array({x.t});
    for (int c = 0; c < kChannels; ++c) row.push_back(num_or_null(x.v[c]));
    row.push_back(x.gpu_throttle);
    samples.push_back(std::move(row));
  }
  j["samples"] = std::move(samples);
  j["pass_columns"] = json(std::vector<std::string>(kPassColumns, kPassColumns + kPassCols));
  json passes = json::array();
  for (const TokenRecord& p : r.passes) {
    passes.push_back(
        json::array({p.t, p.compute_ms, p.pause_ms, p.n_tok, p.decode, p.level, p.threads, p.masked}));
  }
  j["passes"] = std::move(passes);
  json dec = json::array();
  for (const Decision& d : r.decisions) {
    dec.push_back({{"t_s", d.t},
                   {"from", d.from},
                   {"to", d.to},
                   {"cause", limit_key(d.cause)},
                   {"reading", num_or_null(d.reading)},
                   {"limit", d.limit},
                   {"release", d.release}});
  }
  j["decisions"] = std::move(dec);
  json k = json::array();
  for (const KernelTime& x : r.kernels) k.push_back({{"name", x.name}, {"calls", x.calls}, {"ns", x.ns}});
  j["kernels"] = std::move(k);
  write_file(path, j.dump(1) + "\n");
}

MonitorRecord read_record_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the sample file ({})", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    fail("{}: the sample file is empty (a monitor run writes it; was the run stopped before it ended?)",
         path);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{}: not a monitor sample file: broken JSON at byte {} (truncated or edited?)", path, e.byte);
  }
  if (!root.is_object() || root.value("format", std::string()) != kFormat)
    fail("{}: not a monitor sample file (no \"format\": \"{}\")", path, kFormat);
  const int version = get<int>(root, "version", path, 0, true);
  if (version != kVersion)
    fail("{}: sample file version {}, this build reads version {}", path, version, kVersion);
  MonitorRecord r;
  if (!root.contains("run") || !root["run"].is_object()) fail("{}: missing \"run\"", path);
  r.info = info_from(root["run"], path);
  for (const json& s : array_field(root, "sources", path)) {
    r.sources.push_back({get<std::string>(s, "name", path + ": a source", "", true),
                         get<bool>(s, "present", path + ": a source", false, true),
                         get<std::string>(s, "detail", path + ": a source", "")});
  }
  // Samples: by column name, so that a file with fewer or reordered channels still reads.
  const json& cols = array_field(root, "sample_columns", path);
  std::vector<int> col_channel;
  for (const json& c : cols) {
    const std::string name = c.is_string() ? c.get<std::string>() : "";
    int ch = -1;
    if (name == "t_s") ch = -2;
    if (name == "gpu_throttle") ch = -3;
    for (int k = 0; k < kChannels; ++k) {
      if (name == channel_info(Channel(k)).key) ch = k;
    }
    col_channel.push_back(ch);
  }
  if (col_channel.empty() || col_channel[0] != -2)
    fail("{}: \"sample_columns\" must start with \"t_s\"", path);
  const json& samples = array_field(root, "samples", path);
  for (size_t i = 0; i < samples.size(); ++i) {
    const json& row = samples[i];
    if (!row.is_array() || row.size() != cols.size())
      fail("{}: sample row {} has {} values, the columns are {}", path, i + 1,
           row.is_array() ? row.size() : 0, cols.size());
    Sample s;
    for (size_t c = 0; c < cols.size(); ++c) {
      const double v = cell(row[c], path, "sample", i);
      if (col_channel[c] == -2) s.t = v;
      if (col_channel[c] == -3) s.gpu_throttle = std::isnan(v) ? 0 : uint64_t(v);
      if (col_channel[c] >= 0) s.v[col_channel[c]] = float(v);
    }
    if (std::isnan(s.t)) fail("{}: sample row {} has no time", path, i + 1);
    r.samples.push_back(s);
  }
  const json& passes = array_field(root, "passes", path);
  for (size_t i = 0; i < passes.size(); ++i) {
    const json& row = passes[i];
    if (!row.is_array() || row.size() != kPassCols)
      fail("{}: pass row {} has {} values, expected {}", path, i + 1, row.is_array() ? row.size() : 0,
           kPassCols);
    double v[kPassCols];
    for (size_t c = 0; c < kPassCols; ++c) {
      v[c] = cell(row[c], path, "pass", i);
      if (std::isnan(v[c]) || v[c] < (c == 0 ? -1e9 : 0))
        fail("{}: pass row {} holds a missing or negative {}", path, i + 1, kPassColumns[c]);
    }
    TokenRecord p;
    p.t = v[0];
    p.compute_ms = float(v[1]);
    p.pause_ms = float(v[2]);
    p.n_tok = int32_t(v[3]);
    p.decode = uint8_t(v[4] != 0);
    p.level = uint8_t(std::min(255.0, v[5]));
    p.threads = uint8_t(std::min(255.0, v[6]));
    p.masked = uint8_t(v[7] != 0);
    r.passes.push_back(p);
  }
  for (const json& d : array_field(root, "decisions", path)) {
    Decision x;
    const std::string w = path + ": a decision";
    x.t = get<double>(d, "t_s", w, 0, true);
    x.from = get<int>(d, "from", w, 0, true);
    x.to = get<int>(d, "to", w, 0, true);
    const std::string cause = get<std::string>(d, "cause", w, "", true);
    bool known = false;
    for (int l = 0; l < kLimits; ++l) {
      if (cause == limit_key(Limit(l))) x.cause = Limit(l), known = true;
    }
    if (!known) fail("{}: a decision's cause '{}' is not a limit", path, cause);
    x.reading = get<double>(d, "reading", w, NAN);
    x.limit = get<double>(d, "limit", w, 0, true);
    x.release = get<double>(d, "release", w, 0);
    r.decisions.push_back(x);
  }
  if (root.contains("kernels") && root["kernels"].is_array()) {
    for (const json& k : root["kernels"]) {
      KernelTime t;
      t.name = get<std::string>(k, "name", path + ": a kernel", "", true);
      t.calls = get<int64_t>(k, "calls", path + ": a kernel", 0);
      t.ns = get<double>(k, "ns", path + ": a kernel", 0);
      r.kernels.push_back(t);
    }
  }
  bool any_decode = false;
  for (const TokenRecord& p : r.passes) any_decode = any_decode || p.decode;
  if (!any_decode)
    fail("{}: holds no decode steps, nothing to report (the run ended before generating)", path);
  return r;
}

void write_samples_csv(const MonitorRecord& r, const std::string& path) {
  std::string out = "t_s";
  for (int c = 0; c < kChannels; ++c) out += std::string(",") + channel_info(Channel(c)).key;
  out += ",gpu_throttle\n";
  for (const Sample& s : r.samples) {
    out += fmt::format("{:.4f}", s.t);
    for (int c = 0; c < kChannels; ++c)
      out += std::isnan(s.v[c]) ? std::string(",") : fmt::format(",{:g}", s.v[c]);
    out += fmt::format(",{}\n", s.gpu_throttle);
  }
  write_file(path, out);
}

void write_passes_csv(const MonitorRecord& r, const std::string& path) {
  std::string out;
  for (size_t c = 0; c < kPassCols; ++c) out += std::string(c ? "," : "") + kPassColumns[c];
  out += "\n";
  for (const TokenRecord& p : r.passes) {
    out += fmt::format("{:.6f},{:.4f},{:.4f},{},{},{},{},{}\n", p.t, p.compute_ms, p.pause_ms, p.n_tok,
                       p.decode, p.level, p.threads, p.masked);
  }
  write_file(path, out);
}

}  // namespace tilellm::telemetry
