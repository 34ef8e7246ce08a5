// `tilellm monitor`: a sustained decode workload under telemetry (and, when asked, pacing), for
// --duration seconds: requests of a random prompt (or the lines of --prompts) and --n-gen generated
// tokens each, one after the other, every forward pass and every telemetry sample recorded. It writes
//   PREFIX.json          the raw record (runtime/telemetry/record.h): samples, passes, decisions, kernels
//   PREFIX.samples.csv   the samples, one row each
//   PREFIX.passes.csv    the forward passes, one row each
//   PREFIX.html          the report (monitor_report.h), rendered from PREFIX.json as written
// and prints the summary. `tilellm monitor --from FILE.json -o PREFIX` renders a report again;
// `tilellm monitor --serve http://HOST:PORT` samples a running `tilellm serve` instead of running a workload
// (monitor_serve.h), with this machine's sensors.
//
//   tilellm monitor -m model.gguf --duration 1200 -o soak
//   tilellm monitor -m model.gguf --duration 600 --pace-target temp=80,power=45 -o capped
//   tilellm monitor --serve http://127.0.0.1:8080 --duration 300 -o server
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>

#include "base/error.h"
#include "commands.h"
#include "common.h"
#include "degrade_cost.h"
#include "monitor_report.h"
#include "monitor_serve.h"
#include "pace_args.h"
#include "runtime/bench.h"
#include "runtime/generate.h"
#include "runtime/telemetry/record.h"

namespace tilellm::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct MonitorArgs {
  ModelArgs model;
  PaceArgs pace;
  double duration = 60;
  int64_t n_prompt = 32;
  int64_t n_gen = 128;
  std::string prompts;  // one prompt per line; empty: random tokens
  std::string output = "monitor";
  std::string from;     // re-render this JSON record
  std::string serve;    // sample this running server instead of running a workload
  std::string api_key;  // its key
  bool profile = false;
  uint64_t seed = 42;
  std::string ppl_file;
  int64_t ppl_ctx = 128;
  int64_t ppl_chunks = 4;
};

std::string prefix_of(std::string o) {
  for (const char* ext : {".html", ".json"}) {
    const std::string e = ext;
    if (o.size() > e.size() && o.compare(o.size() - e.size(), e.size(), e) == 0)
      o.resize(o.size() - e.size());
  }
  if (o.empty()) fail("-o: give a file name prefix");
  return o;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !(out << text) || !out.flush()) fail("{}: cannot write", path);
}

void render(const telemetry::MonitorRecord& r, const std::string& html) {
  write_text(html, render_monitor_report(r));
}

void print_summary(const telemetry::MonitorRecord& r) {
  const telemetry::Summary s = telemetry::summarize(r);
  std::printf("decode: %lld steps, %.2f tokens/s", (long long)s.decode_steps, s.decode_tps);
  if (s.paused_share > 0)
    std::printf(" (%.2f without the pauses: %.1f%% lost to pacing)", s.unpaced_tps,
                100.0 * (1.0 - s.decode_tps / s.unpaced_tps));
  std::printf("\nlatency: p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, mean %.3f ms, stddev %.3f ms\n", s.p50_ms,
              s.p95_ms, s.p99_ms, s.mean_ms, s.stddev_ms);
  std::printf("predictability: p99/p50 %.3f, stddev/mean %.2f%%\n", s.p99_over_p50, 100.0 * s.cv);
  if (std::isfinite(s.cpu_power_w))
    std::printf("cpu package: %.1f W, %.4f J per generated token\n", s.cpu_power_w, s.cpu_j_per_token);
  if (std::isfinite(s.gpu_power_w))
    std::printf("gpu: %.1f W, %.4f J per generated token\n", s.gpu_power_w, s.gpu_j_per_token);
  if (std::isfinite(s.cpu_temp_max))
    std::printf("cpu temperature: mean %.1f °C, max %.1f °C\n", s.cpu_temp_mean, s.cpu_temp_max);
  if (std::isfinite(s.gpu_temp_max))
    std::printf("gpu temperature: mean %.1f °C, max %.1f °C\n", s.gpu_temp_mean, s.gpu_temp_max);
  if (r.info.peak_gbs > 0)
    std::printf("weight bandwidth: %.2f GB/s while computing, %.1f%% of the %.2f GB/s peak\n", s.bw_gbs,
                s.bw_share_pct, r.info.peak_gbs);
  std::printf("pacing: %d decisions, highest level %d\n", s.decisions, s.max_level);
}

// The record's files and report (the report rendered from the JSON as written, as --from renders it), and
// the summary printed.
void write_outputs(const telemetry::MonitorRecord& r, const std::string& prefix) {
  const std::string json = prefix + ".json";
  telemetry::write_record_json(r, json);
  telemetry::write_samples_csv(r, prefix + ".samples.csv");
  telemetry::write_passes_csv(r, prefix + ".passes.csv");
  const telemetry::MonitorRecord back = telemetry::read_record_json(json);
  render(back, prefix + ".html");
  print_summary(back);
  std::printf("report: %s.html; raw samples: %s, %s.samples.csv, %s.passes.csv\n", prefix.c_str(),
              json.c_str(), prefix.c_str(), prefix.c_str());
}

// --serve: the server's steps and this machine's sensors; no model is loaded here.
void run_monitor_serve(const MonitorArgs& a, const std::string& prefix) {
  if (!a.pace.pace.empty() || !a.pace.pace_target.empty() || !a.pace.degrade.empty())
    fail(
        "--serve samples a server that paces itself: --pace, --pace-target and --degrade apply to a workload "
        "this command runs (without --serve)");
  if (a.profile) fail("--serve: --profile times a workload run here; the server's kernels are not read");
  telemetry::TelemetryOptions to;
  to.sample_hz = a.pace.sample_hz;
  to.sysfs_root = a.pace.sensors_root;
  to.nvml_device = a.pace.nvml_device;
  to.capacity_hint_s = a.duration + 60;
  telemetry::Telemetry tel(to);
  for (const telemetry::SourceStatus& s : tel.sources())
    std::fprintf(stderr, "telemetry: %s: %s (%s)\n", s.name.c_str(), s.present ? "present" : "absent",
                 s.detail.c_str());
  ServeSampling ss;
  ss.url = a.serve;
  ss.api_key = a.api_key;
  ss.duration = a.duration;
  const std::string started = bench::utc_now_rfc3339();
  std::fprintf(stderr, "monitor: %.0f s of the server at %s\n", a.duration, a.serve.c_str());
  telemetry::MonitorRecord r = sample_serve(ss, tel);
  r.info.cpu = bench::cpu_model_name();
  r.info.commit = build_commit();
  r.info.started = started;
  if (tel.nvml() && tel.nvml()->present() && std::isfinite(tel.nvml()->power_limit_w()))
    r.info.power_limit_w = tel.nvml()->power_limit_w();
  if (std::none_of(r.passes.begin(), r.passes.end(),
                   [](const telemetry::TokenRecord& p) { return p.decode; }))
    fail(
        "--serve {}: the server generated no token in {:.0f} s: nothing to report (send it requests while "
        "monitor runs)",
        a.serve, a.duration);
  write_outputs(r, prefix);
}

void run_monitor(MonitorArgs a) {
  const std::string prefix = prefix_of(a.output);
  if (!a.from.empty()) {
    const telemetry::MonitorRecord r = telemetry::read_record_json(a.from);
    render(r, prefix + ".html");
    print_summary(r);
    std::printf("report: %s.html (from %s)\n", prefix.c_str(), a.from.c_str());
    return;
  }
  if (!(a.duration > 0 && a.duration <= 7 * 24 * 3600))
    fail("--duration {} is out of range (seconds, up to a week)", a.duration);
  if (!a.serve.empty()) return run_monitor_serve(a, prefix);
  if (!a.api_key.empty()) fail("--api-key is the key of the server --serve samples");
  if (a.n_gen < 1) fail("--n-gen must be at least 1 (got {})", a.n_gen);
  if (a.prompts.empty() && a.n_prompt < 1) fail("--n-prompt must be at least 1 (got {})", a.n_prompt);

  auto model = load_model(a.model);
  const Tokenizer& tok = model->tokenizer();
  const int64_t V = model->config().n_vocab;
  std::vector<std::vector<int32_t>> prompts;
  int64_t longest = a.n_prompt;
  if (!a.prompts.empty()) {
    std::ifstream in(a.prompts);
    if (!in) fail("{}: cannot open the prompt file", a.prompts);
    std::string line;
    longest = 0;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      prompts.push_back(tok.encode(line, true, false));
      longest = std::max<int64_t>(longest, int64_t(prompts.back().size()));
    }
    if (prompts.empty()) fail("{}: no prompts in it (one per line)", a.prompts);
  }
  SessionOptions so = session_options(a.model);
  so.n_ctx = std::max<int64_t>(a.model.ctx, longest + a.n_gen + 1);
  so.profile_kernels = a.profile;

  telemetry::RunInfo info;
  if (!a.pace.degrade.empty()) {
    so.tile_mask = telemetry::parse_degrade(a.pace.degrade).tile_mask;
    std::fprintf(stderr, "monitor: measuring the perplexity cost of --degrade %s\n", a.pace.degrade.c_str());
    const DegradeCost c = measure_degrade_cost(*model, so, a.ppl_file, a.ppl_ctx, a.ppl_chunks);
    std::printf("degrade %s: perplexity %.4f unmasked, %.4f masked (%+.2f%%) over %s\n",
                a.pace.degrade.c_str(), c.unmasked, c.masked, 100.0 * (c.masked / c.unmasked - 1.0),
                c.text.c_str());
    std::fflush(stdout);
    info.ppl_unmasked = c.unmasked;
    info.ppl_masked = c.masked;
    info.ppl_text = c.text;
  }
  Session session(*model, so);
  if (const std::string mem = session.device_memory_summary(); !mem.empty())
    std::fprintf(stderr, "%s\n", mem.c_str());
  const double bytes = double(bench::weight_bytes_per_token(*model, so.weights));
  Pacing pacing = make_pacing(a.pace, so, bytes, true, true, a.duration + 60);
  telemetry::Telemetry& tel = *pacing.telemetry;
  if (pacing.options.peak_gbs > 0)
    std::fprintf(stderr, "monitor: bandwidth peak %.2f GB/s (%s)\n", pacing.options.peak_gbs,
                 pacing.peak_source.c_str());
  for (const telemetry::SourceStatus& s : tel.sources())
    std::fprintf(stderr, "telemetry: %s: %s (%s)\n", s.name.c_str(), s.present ? "present" : "absent",
                 s.detail.c_str());

  info.model = model->file().path();
  info.model_type = bench::model_type(*model);
  info.backend = backend_label(a.model.backend);
  info.cpu = bench::cpu_model_name();
  info.commit = build_commit();
  info.started = bench::utc_now_rfc3339();
  info.workload =
      a.prompts.empty()
          ? fmt::format("random tokens: a prompt of {} and {} generated per request", a.n_prompt, a.n_gen)
          : fmt::format("{} prompts of {}, cycled; {} generated per request", prompts.size(), a.prompts,
                        a.n_gen);
  info.threads = session.n_threads();
  info.duration_s = a.duration;
  info.sample_hz = a.pace.sample_hz;
  info.pace = telemetry::to_string(pacing.options.fixed);
  info.pace_target = telemetry::to_string(pacing.options.limits);
  info.degrade = a.pace.degrade.empty() ? "off" : a.pace.degrade;
  info.weight_bytes_per_token = bytes;
  info.peak_gbs = pacing.options.peak_gbs;
  info.peak_source = pacing.peak_source;
  if (tel.nvml() && tel.nvml()->present() && std::isfinite(tel.nvml()->power_limit_w()))
    info.power_limit_w = tel.nvml()->power_limit_w();

  std::mt19937_64 rng(a.seed);
  auto next_prompt = [&](int64_t request) {
    if (!prompts.empty()) return prompts[size_t(request) % prompts.size()];
    std::vector<int32_t> ids(size_t(a.n_prompt));
    for (auto& id : ids) id = int32_t(rng() % uint64_t(V));
    if (tok.add_bos() && tok.bos() >= 0) ids[0] = tok.bos();
    return ids;
  };
  auto request = [&](int64_t i, int64_t n_gen, telemetry::Pacer* pacer, Clock::time_point deadline,
                     const std::function<void()>& each) {
    session.reset();
    SamplerParams sp;
    sp.seed = a.seed + uint64_t(i);
    Sampler sampler(sp, int32_t(V));
    GenerateOptions go;
    go.n_predict = n_gen;
    go.stop_at_eog = false;
    go.pacer = pacer;
    generate(session, sampler, next_prompt(i), go, [&](int32_t) {
      each();
      return Clock::now() < deadline;
    });
  };
  // A short warm-up, not recorded: first-touch faults and caches are not the workload's.
  request(-1, std::min<int64_t>(a.n_gen, 8), nullptr, Clock::time_point::max(), [] {});
  session.reset_kernel_times();

  std::vector<telemetry::LadderStep> ladder;
  tel.on_decision([&ladder](const telemetry::Decision& d) {
    std::fprintf(stderr, "%s\n", decision_line(d, ladder).c_str());
  });
  const bool tty = isatty(STDERR_FILENO);
  std::fprintf(stderr, "monitor: %.0f s of %s\n", a.duration, info.workload.c_str());
  {
    telemetry::Pacer pacer(session, &tel, pacing.options);
    ladder = pacer.ladder();
    for (const telemetry::LadderStep& s : ladder) info.ladder.push_back(telemetry::describe(s));
    for (int l = 0; l < telemetry::kLimits; ++l) {
      if (pacing.options.limits.has(telemetry::Limit(l)))
        std::fprintf(stderr, "pace: %s is read from %s\n", telemetry::limit_key(telemetry::Limit(l)),
                     pacer.source(telemetry::Limit(l)));
    }
    tel.start();
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.duration));
    int64_t tokens = 0;
    Clock::time_point shown = start;
    auto each = [&] {
      ++tokens;
      const Clock::time_point now = Clock::now();
      if (tty && now - shown >= std::chrono::seconds(1)) {
        shown = now;
        const double el = std::chrono::duration<double>(now - start).count();
        std::fprintf(stderr, "\rmonitor: %.0f / %.0f s, %lld tokens, %.1f tokens/s, level %d   ", el,
                     a.duration, (long long)tokens, double(tokens) / el, pacer.level());
      }
    };
    for (int64_t i = 0; Clock::now() < deadline; ++i) request(i, a.n_gen, &pacer, deadline, each);
    if (tty) std::fprintf(stderr, "\n");
  }
  tel.stop();

  telemetry::MonitorRecord r;
  r.info = info;
  r.info.dropped = tel.dropped();
  r.info.late_samples = tel.late_samples();
  r.sources = tel.sources();
  r.samples = tel.samples();
  r.passes = tel.passes();
  r.decisions = tel.decisions();
  r.kernels = session.kernel_times();
  r.info.kernel_timing = !r.kernels.empty();
  write_outputs(r, prefix);
}

}  // namespace

void register_monitor(CLI::App& app) {
  auto a = std::make_shared<MonitorArgs>();
  CLI::App* sub = app.add_subcommand(
      "monitor",
      "a sustained workload under telemetry and pacing, written as raw samples and an HTML report");
  add_model_args(sub, a->model);
  add_pace_args(sub, a->pace, true);
  sub->add_option("--duration", a->duration, "seconds of workload")->capture_default_str();
  sub->add_option("-p,--n-prompt", a->n_prompt, "random prompt tokens per request")->capture_default_str();
  sub->add_option("-n,--n-gen", a->n_gen, "tokens generated per request")->capture_default_str();
  sub->add_option("--prompts", a->prompts,
                  "a file of prompts, one per line, cycled (instead of random tokens)");
  sub->add_option("-o,--output", a->output, "file name prefix: PREFIX.html, .json, .samples.csv, .passes.csv")
      ->capture_default_str();
  sub->add_option("--from", a->from,
                  "render the report of a JSON record written by an earlier run, and stop");
  sub->add_option("--serve", a->serve,
                  "sample a running `tilellm serve` at this address (http://HOST:PORT) through its metrics "
                  "instead of running a workload: its steps, and this machine's sensors");
  sub->add_option("--api-key", a->api_key, "--serve: the server's API key");
  sub->add_flag("--profile", a->profile,
                "time every device kernel (GPU backends): a per-kernel table in the report");
  sub->add_option("--seed", a->seed, "seed of the random prompts and the sampling")->capture_default_str();
  sub->add_option("--ppl-file", a->ppl_file, "--degrade: the text its perplexity cost is measured on");
  sub->add_option("--ppl-ctx", a->ppl_ctx, "--degrade: the context of that measurement")
      ->capture_default_str();
  sub->add_option("--ppl-chunks", a->ppl_chunks, "--degrade: the chunks of that measurement")
      ->capture_default_str();
  sub->callback([a] { run_monitor(*a); });
}

}  // namespace tilellm::cli
