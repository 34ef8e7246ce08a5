// `tilellm bench`: llama-bench's tests, options and output formats on TileLLM (see runtime/bench.h), and
// `--membw`, the machine's memory bandwidth for the decode roofline.
//
//   tilellm bench -m a.gguf,b.gguf -p 128,512 -n 64 -pg 512,128 -t 1,2 -r 5 -o json
//
// Every model x threads x depth x test is one row. Each row gets its own session whose context is sized to
// fit the test (depth + prompt + gen tokens) unless -c asks for more.
//
// With a backend that measures its start (OpenCL) the run first times it twice, cold (programs built from
// source and self-checked, the program cache bypassed and rewritten) and warm (from that cache); every row
// carries both (start_cold_ms, start_warm_ms), and the Markdown table gives them in a line below it.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "base/thread_pool.h"
#include "commands.h"
#include "common.h"
#include "pace_args.h"
#include "runtime/bench.h"

namespace tilellm::cli {
namespace {

struct BenchArgs {
  BackendArgs backend;  // --backend, --device, --device-profile
  std::vector<std::string> models;
  std::vector<std::string> n_prompt{"512"};
  std::vector<std::string> n_gen{"128"};
  std::vector<std::string> pg;
  std::vector<std::string> depth{"0"};
  std::vector<std::string> threads;
  int reps = 5;
  std::string output = "md";
  std::string activations = "q8";
  std::string weights = "native";
  std::string kv_type = "f16";
  int64_t ctx = 0;
  int64_t batch = 0;  // 0: the backend's (default_prompt_batch)
  uint32_t seed = 1234;
  bool membw = false;
  bool profile = false;  // --profile: per-kernel device times (backends that time their kernels)
  int64_t membw_mib = 256;
  PaceArgs pace;  // --pace, --pace-target: paced runs, comparable with unpaced ones
};

// "a,b" "c" -> a b c
std::vector<std::string> split_all(const std::vector<std::string>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) {
    size_t i = 0;
    while (i <= s.size()) {
      size_t j = s.find(',', i);
      if (j == std::string::npos) j = s.size();
      if (j > i) out.push_back(s.substr(i, j - i));
      i = j + 1;
    }
  }
  return out;
}

// CLI11 reads llama-bench's "-pg 512,128" as -p with the value "g" followed by "512,128"; move every such
// pair to pg. When -p itself was not given, llama-bench's default prompt test stays.
void take_pg_from_p(std::vector<std::string>& p, std::vector<std::string>& pg) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == "g") {
      if (i + 1 == p.size()) fail("-pg needs a 'prompt,gen' pair");
      pg.push_back(p[++i]);
    } else {
      rest.push_back(p[i]);
    }
  }
  p = rest.empty() ? std::vector<std::string>{"512"} : rest;
}

std::vector<int64_t> ints(const std::vector<std::string>& v, const char* what) {
  std::vector<int64_t> out;
  for (const auto& s : v) {
    for (int64_t x : bench::parse_int_list(s, what)) out.push_back(x);
  }
  return out;
}

std::vector<int> thread_counts(const BenchArgs& a) {
  std::vector<int> t;
  for (int64_t x : ints(a.threads, "-t")) {
    if (x < 1 || x > 4096) fail("-t: thread count {} is out of range", x);
    t.push_back(int(x));
  }
  if (t.empty()) t.push_back(ThreadPool::default_threads());
  return t;
}

void run_membw(const BenchArgs& a, bench::Format f) {
  if (a.membw_mib < 1) fail("--membw-mib must be at least 1");
  const std::string commit = build_commit(), cpu = bench::cpu_model_name(),
                    cpu_set = bench::cpu_affinity_list();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (f == bench::Format::Md) {
    std::printf("| %-30s | %7s | %10s | %14s | %14s |\n", "cpu", "threads", "buffer", "copy r+w GB/s",
                "read GB/s");
    std::printf("| %s | %s | %s | %s | %s |\n", std::string(30, '-').c_str(),
                "------:", "---------:", "-------------:", "-------------:");
  } else if (f == bench::Format::Csv) {
    std::printf("cpu_info,cpu_set,commit,n_threads,buffer_bytes,membw_copy_gbs,membw_read_gbs\n");
  }
  for (int t : thread_counts(a)) {
    const bench::MemBandwidth bw = bench::measure_membw(size_t(a.membw_mib) << 20, t, std::max(a.reps, 1));
    nlohmann::ordered_json j;
    j["cpu_info"] = cpu;
    j["cpu_set"] = cpu_set;
    j["commit"] = commit;
    j["test_time"] = bench::utc_now_rfc3339();
    j["n_threads"] = bw.n_threads;
    j["buffer_bytes"] = bw.buffer_bytes;
    j["membw_copy_gbs"] = bw.copy_gbs;
    j["membw_read_gbs"] = bw.read_gbs;
    switch (f) {
      case bench::Format::Md:
        std::printf("| %-30s | %7d | %6lld MiB | %14.2f | %14.2f |\n", cpu.c_str(), t, (long long)a.membw_mib,
                    bw.copy_gbs, bw.read_gbs);
        break;
      case bench::Format::Csv:
        std::printf("\"%s\",\"%s\",\"%s\",%d,%zu,%f,%f\n", cpu.c_str(), cpu_set.c_str(), commit.c_str(), t,
                    bw.buffer_bytes, bw.copy_gbs, bw.read_gbs);
        break;
      case bench::Format::Json:
        rows.push_back(j);
        break;
      case bench::Format::Jsonl:
        std::printf("%s\n", j.dump().c_str());
        break;
    }
    std::fflush(stdout);
  }
  if (f == bench::Format::Json) std::printf("%s\n", rows.dump(2).c_str());
}

// --profile: the device time of every kernel over the test's warm-up and timed runs, on stderr (stdout
// keeps the chosen format). Shares are of the summed kernel time; the wall time of the runs beyond that sum
// is launch and synchronization cost.
void print_kernel_profile(const Session& session, const bench::TestSpec& t, int reps) {
  const std::vector<KernelTime> times = session.kernel_times();
  if (times.empty()) {
    std::fprintf(
        stderr,
        "profile: this backend has no kernel timestamps (--profile times the kernels of GPU backends)\n");
    return;
  }
  double total = 0;
  int64_t calls = 0;
  for (const KernelTime& k : times) total += k.ns, calls += k.calls;
  std::fprintf(stderr, "profile %s (%d runs + warm-up): %lld kernel launches, %.1f ms of kernel time\n",
               bench::test_name(t).c_str(), reps, static_cast<long long>(calls), total / 1e6);
  std::fprintf(stderr,
               "| kernel | calls | total us | us/call | share |\n| --- | ---: | ---: | ---: | ---: |\n");
  std::vector<KernelTime> sorted = times;
  std::sort(sorted.begin(), sorted.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.ns > b.ns; });
  for (const KernelTime& k : sorted) {
    std::fprintf(stderr, "| %s | %lld | %.1f | %.2f | %.1f%% |\n", k.name.c_str(),
                 static_cast<long long>(k.calls), k.ns / 1e3, k.ns / 1e3 / double(k.calls),
                 total > 0 ? 100.0 * k.ns / total : 0.0);
  }
  for (const KernelTime& k : sorted) {
    if (!k.driver_stats.empty())
      std::fprintf(stderr, "driver statistics: %s: %s\n", k.name.c_str(), k.driver_stats.c_str());
  }
}

// --profile, tests that generate: the host's time per decoded token, from a second session without kernel
// timestamps (a profiled pass records every step, so it would time recording rather than what decode
// runs): a token of prompt, then the test's decode steps, each pass's wall time inside the backend less the
// time it waited for the device. Only for backends that measure it (Backend::pass_times counted the test's
// own decode passes).
void print_host_time(const Model& model, SessionOptions so, const bench::TestSpec& t) {
  if (t.n_gen <= 0) return;
  so.profile_kernels = false;
  so.n_ctx = std::max<int64_t>(so.n_ctx, t.n_gen + 1);
  Session session(model, so);
  const int32_t tok = 1;
  session.eval(&tok, 1);
  session.reset_pass_times();
  for (int i = 0; i < t.n_gen; ++i) session.eval(&tok, 1);
  const Backend::PassTimes p = session.pass_times();
  if (p.decode_passes == 0) return;
  const double n = double(p.decode_passes);
  std::fprintf(
      stderr,
      "host time per decoded token: %.1f us (%.1f us a pass in the backend, %.1f us of it waiting for "
      "the device; %llu decode passes, %llu replayed from a recording)\n",
      (p.wall_ns - p.wait_ns) / n / 1e3, p.wall_ns / n / 1e3, p.wait_ns / n / 1e3,
      static_cast<unsigned long long>(p.decode_passes), static_cast<unsigned long long>(p.replayed));
}

void run_bench(BenchArgs a) {
  take_pg_from_p(a.n_prompt, a.pg);
  const bench::Format format = bench::parse_format(a.output);
  if (a.membw) {
    run_membw(a, format);
    return;
  }
  if (a.reps < 1) fail("-r must be at least 1, got {}", a.reps);
  const std::vector<std::string> models = split_all(a.models);
  if (models.empty()) fail("no model given (-m)");
  const std::vector<bench::TestSpec> tests =
      bench::make_tests(ints(a.n_prompt, "-p"), ints(a.n_gen, "-n"), ints(a.pg, "-pg"), ints(a.depth, "-d"));
  if (tests.empty()) fail("no tests to run (every -p, -n and -pg count is zero)");
  const std::vector<int> threads = thread_counts(a);

  const std::string commit = build_commit(), cpu = bench::cpu_model_name(),
                    cpu_set = bench::cpu_affinity_list(), gpu = device_name(a.backend);
  const bool tty = isatty(STDERR_FILENO);
  std::unique_ptr<bench::Printer> printer = bench::make_printer(format);
  StartTimes start;
  {
    SessionOptions so;
    so.kv_type = a.kv_type == "f32" ? GgmlType::F32 : GgmlType::F16;
    apply_backend_args(a.backend, so);
    if (require_backend(so.backend).measure_start) {
      if (tty)
        std::fprintf(stderr, "bench: timing the %s backend's cold and warm start\n", so.backend.c_str());
      start = bench::measure_start(so);
    }
  }
  std::fputs(printer->header().c_str(), stdout);
  std::fflush(stdout);
  for (const std::string& path : models) {
    ModelArgs ma;
    ma.model = path;
    auto model = load_model(ma);
    for (int nt : threads) {
      for (const bench::TestSpec& t : tests) {
        const int64_t need = t.n_depth + t.n_prompt + t.n_gen;
        SessionOptions so;
        so.n_threads = nt;
        so.n_ctx = std::max<int64_t>(a.ctx, std::max<int64_t>(need, 1));
        apply_backend_args(a.backend, so);
        so.n_batch = a.batch > 0 ? a.batch : default_prompt_batch(so.backend);
        so.kv_type = a.kv_type == "f32" ? GgmlType::F32 : GgmlType::F16;
        so.activations = a.activations == "f32" ? ActivationMode::F32 : ActivationMode::Quantized;
        so.weights = parse_weights_mode(a.weights);
        so.profile_kernels = a.profile;
        // Held by pointer so that --profile's second session (print_host_time) does not share the device
        // with it.
        auto held = std::make_unique<Session>(*model, so);
        Session& session = *held;
        session.reset_kernel_times();  // the self-check's launches are not the test's

        bench::Row r;
        r.build_commit = commit;
        r.cpu_info = cpu;
        r.gpu_info = gpu;
        r.model_filename = path;
        r.model_type = bench::model_type(*model);
        r.model_size = model->weight_bytes();
        r.model_n_params = model->n_params();
        r.n_batch = so.n_batch;
        r.n_threads = nt;
        r.type_k = r.type_v = a.kv_type;
        r.test = t;
        r.cpu_set = cpu_set;
        r.backend = backend_label(a.backend);
        r.activations = a.activations;
        r.weights_mode = a.weights;
        r.weight_bytes_per_token = bench::weight_bytes_per_token(*model, so.weights);
        r.test_time = bench::utc_now_rfc3339();
        r.start_cold_ms = start.cold_ms;
        r.start_warm_ms = start.warm_ms;
        if (tty) {
          std::fprintf(stderr, "bench: %s, %d threads, %s: %d runs after a warm-up\n", path.c_str(), nt,
                       bench::test_name(t).c_str(), a.reps);
        }
        if (a.pace.pace.empty() && a.pace.pace_target.empty()) {
          r.samples_ns = bench::measure(session, t, a.reps, a.seed);
        } else {
          // Paced: the pauses fall inside the timed runs; the controller's decisions are printed on stderr.
          Pacing pacing = make_pacing(a.pace, so, double(r.weight_bytes_per_token), false, false);
          telemetry::Pacer pacer(session, pacing.telemetry.get(), pacing.options);
          if (pacing.telemetry) {
            const std::vector<telemetry::LadderStep> ladder = pacer.ladder();
            pacing.telemetry->on_decision([ladder](const telemetry::Decision& d) {
              std::fprintf(stderr, "%s\n", decision_line(d, ladder).c_str());
            });
            pacing.telemetry->start();
          }
          r.samples_ns = bench::measure(session, t, a.reps, a.seed, &pacer);
          r.pace = telemetry::to_string(pacing.options.fixed);
          r.pace_target = telemetry::to_string(pacing.options.limits);
        }
        std::fputs(printer->row(r).c_str(), stdout);
        std::fflush(stdout);
        if (a.profile) {
          print_kernel_profile(session, t, a.reps);
          const bool measures_host = session.pass_times().decode_passes > 0;  // backends that count passes
          held.reset();
          if (measures_host) print_host_time(*model, so, t);
        }
      }
    }
  }
  std::fputs(printer->footer().c_str(), stdout);
}

}  // namespace

void register_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand(
      "bench", "prompt-processing and generation speed, with llama-bench's tests, fields and formats");
  sub->add_option("-m,--model", a->models, "GGUF model file(s); repeat or give a comma list");
  sub->add_option("-p,--n-prompt", a->n_prompt, "prompt tokens per pp test, comma list (0: none)")
      ->capture_default_str();
  sub->add_option("-n,--n-gen", a->n_gen, "generated tokens per tg test, comma list (0: none)")
      ->capture_default_str();
  sub->add_option("--pg", a->pg, "pp+tg test as 'prompt,gen' (llama-bench's -pg also works); repeatable");
  sub->add_option("-d,--n-depth", a->depth, "tokens already in the cache before each test, comma list")
      ->capture_default_str();
  add_backend_args(sub, a->backend);
  sub->add_option("-r,--repetitions", a->reps, "timed runs per test")->capture_default_str();
  sub->add_option("-t,--threads", a->threads,
                  "thread counts, comma list (default: the CPUs this process may use)");
  sub->add_option("-o,--output", a->output, "output format")
      ->check(CLI::IsMember({"md", "csv", "json", "jsonl"}))
      ->capture_default_str();
  sub->add_option("--activations", a->activations,
                  "matmul activations: q8 = quantized like llama.cpp, f32 = exact float path")
      ->check(CLI::IsMember({"q8", "f32"}))
      ->capture_default_str();
  sub->add_option("--weights", a->weights,
                  "how matrices are held: native (GGUF types, Q4_0/Q4_1/Q8_0 tiled), int4b64, int8b0, f16")
      ->check(CLI::IsMember({"native", "int4b64", "int8b0", "f16"}))
      ->capture_default_str();
  sub->add_option("--cache-type", a->kv_type, "KV cache element type")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str();
  sub->add_option("-c,--ctx-size", a->ctx, "context size (default: just enough for each test)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("-b,--batch-size", a->batch,
                  "prompt tokens per forward pass (default: the backend's, 512 on CUDA and Vulkan, else 64)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--seed", a->seed, "seed of the random token ids")->capture_default_str();
  sub->add_flag("--membw", a->membw,
                "measure memory bandwidth instead (memcpy read+write and pure read, per -t thread count)");
  sub->add_flag(
      "--profile", a->profile,
      "time every device kernel (GPU backends) and print a per-kernel table on stderr after each test, and "
      "for generation tests the host time per decoded token (backends that measure it)");
  sub->add_option("--membw-mib", a->membw_mib, "buffer size of --membw in MiB")->capture_default_str();
  add_pace_args(sub, a->pace, false);
  sub->callback([a] { run_bench(*a); });
}

}  // namespace tilellm::cli
