// `tilellm gemm-speed`: MNN's GemmSpeed benchmark (test/speed/GemmSpeed.cpp) on the engine's own matmul op,
// on any backend of the registry (MNN's backend numbers: 0 CPU, 3 OpenCL, ...), as MNN's benchmark runs its
// engine's own Conv1x1: the numbers are the ones `run` and `bench` get.
//
//   tilellm gemm-speed TEST [backend] [precision] [threads-or-gpu-mode]     (MNN's positional form)
//   tilellm gemm-speed speed/GemmSpeedAll --threads 2 --format md --plot gemm.svg
//   tilellm gemm-speed speed/GemmSpeedAll 3 0 68 --device 0 --format md    (OpenCL, buffer memory)
//
// Per (K, N, mode) one matrix of random weights goes through the backend's own load path in the weights mode
// of the mode (matmul_case.h); per M its output is checked against a double-precision reference (a
// configuration that fails gets no number), then 3 warm-ups and 10 timed runs of Backend::matmul. On the
// host a run is what decode and prefill run for the mode, MNN's CPU modes as MNN runs them: float-gemm in
// fp32 at every precision (--weights f32: the blocked GEMM), int8b0 / int4b64 / int4a8 as W8A8 / W4A8 with
// the activations quantized at run time (--weights int8b0 / int4b64 / int4b0; int8 activations with one scale
// per 256 (Q8_K) when K is a multiple of 256, per 32 (Q8_0) otherwise).
// On a device a run is the full round trip of one matmul call (A up, the kernels, C down): total is its wall
// time, gpu the sum of its kernels' device timestamps; the device multiplies the mode's weight format
// (float-gemm: F32 weights, F16 at precision 2) as `run` does: the integer modes under --activations q8
// (the default, as `run`'s) with the activations rounded to int8 where the backend has integer kernels for
// the product, else in fp32; --activations f32 times every mode's float path. The MNN line keeps MNN's printf
// format; median/min/stddev follow on a "#" line (text) or in the md/csv/json tables.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "backend_args.h"
#include "backends/registry.h"
#include "base/cpu_isa.h"
#include "base/cpu_set.h"
#include "base/error.h"
#include "bench_env.h"
#include "commands.h"
#include "gemm_speed_plot.h"
#include "matmul_case.h"
#include "mnn_gemm.h"

namespace tilellm::cli {
namespace {

using namespace tilellm::gemm;
using Clock = std::chrono::steady_clock;

struct GemmSpeedArgs {
  std::string test;
  std::string backend_pos = "0", precision_pos = "0";
  int third = -1;  // threads (CPU) or GPU-mode bitmask; -1: not given
  std::string backend, precision, gpu_memory, tuning, format = "text", plot, isa;
  int threads = -1;                     // --threads; -1: not given
  int device = -1;                      // device index of the backend; -1: its default_device
  std::string device_profile = "none";  // GPU backends: device profile
  std::vector<std::string> shapes;
  std::vector<int> ms;
  int warmup = 3, runs = 10;
  std::string activations = "q8";            // the integer modes' activations: q8 (as `run`) or f32
  std::map<std::string, std::string> given;  // the backend groups' flags (--cl-gemm-tile ...)
};

// How a mode's weights are held and its activations multiplied (see the top of the file).
BackendParams mode_params(Mode m, bool host, int precision, bool q8) {
  BackendParams p;
  switch (m) {
    case Mode::kFloat:
      p.weights = !host && precision == 2 ? WeightsMode::F16 : WeightsMode::F32;
      break;
    case Mode::kInt8B0:
      p.weights = WeightsMode::Int8B0;
      break;
    case Mode::kInt4B64:
      p.weights = WeightsMode::Int4B64;
      break;
    case Mode::kInt4A8:
      p.weights = WeightsMode::Int4B0;
      break;
  }
  p.activations = q8 && m != Mode::kFloat ? ActivationMode::Quantized : ActivationMode::F32;
  return p;
}

const char* mode_arithmetic(Mode m, bool host, int precision, bool q8) {
  if (!q8 && m != Mode::kFloat) {
    return m == Mode::kInt8B0    ? "int8b0 weights, fp32 activations"
           : m == Mode::kInt4B64 ? "int4b64 weights, fp32 activations"
                                 : "int4b0 weights, fp32 activations";
  }
  switch (m) {
    case Mode::kFloat:
      return host             ? "f32 weights, fp32 (MNN's x86 float path at every precision)"
             : precision == 2 ? "f16 weights, fp32 arithmetic"
                              : "f32 weights, fp32 arithmetic";
    case Mode::kInt8B0:
      return host
                 ? "int8b0 weights, int8 activations (Q8_K per 256, Q8_0 per 32 if K % 256)"
                 : "int8b0 weights, int8 activations per 32 where the backend has integer kernels, else fp32";
    case Mode::kInt4B64:
      return host ? "int4b64 weights, int8 activations (Q8_K per 256, Q8_0 per 32 if K % 256)"
                  : "int4b64 weights, int8 activations per 32 where the backend has integer kernels, else "
                    "fp32";
    case Mode::kInt4A8:
      return host
                 ? "int4b0 weights, int8 activations (Q8_K per 256, Q8_0 per 32 if K % 256)"
                 : "int4b0 weights, int8 activations per 32 where the backend has integer kernels, else fp32";
  }
  return "?";
}

// The tables after the MNN lines (md, csv, json), one row per measured configuration.
void print_tables(const GemmSpeedArgs& a, const std::vector<GemmRow>& rows, const std::string& backend,
                  const DeviceInfo& dev, int precision, int threads, const std::string& cpus,
                  const std::string& commit) {
  const std::string& device = dev.name;
  const bool gpu = std::any_of(rows.begin(), rows.end(), [](const GemmRow& r) { return r.has_gpu; });
  FILE* out = stdout;
  if (a.format == "md") {
    std::fprintf(out,
                 "\nbackend: %s, device: %s (%s), threads: %d, cpuset: %s, precision: %d, commit: %s\n\n",
                 backend.c_str(), device.c_str(), dev.summary.c_str(), threads, cpus.c_str(), precision,
                 commit.c_str());
    std::fprintf(
        out,
        "| mode | M | K | N | avg ms | median ms | min ms | stddev ms | GFLOPS (avg) | GFLOPS (median) |%s\n",
        gpu ? " gpu ms | gpu median ms | GFLOPS (gpu) |" : "");
    std::fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s\n", gpu ? "---:|---:|---:|" : "");
    for (const GemmRow& r : rows) {
      std::fprintf(out, "| %s | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f |", mode_tag(r.mode),
                   r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min, r.ms.stddev,
                   gflops(r.M, r.K, r.N, r.ms.mean), gflops(r.M, r.K, r.N, r.ms.median));
      if (gpu)
        std::fprintf(out, " %.3f | %.3f | %.2f |", r.gpu.mean, r.gpu.median,
                     gflops(r.M, r.K, r.N, r.gpu.mean));
      std::fprintf(out, "\n");
    }
    if (gpu) {
      std::fprintf(out,
                   "\navg/median/min/stddev ms: total (round trip: upload A, kernels, download C); gpu: the "
                   "kernels' device time (their timestamps), mean over the runs\n");
    }
  } else if (a.format == "csv") {
    std::fprintf(
        out,
        "mode,M,K,N,avg_ms,median_ms,min_ms,stddev_ms,gflops_avg,gflops_median,check_rel_err,backend,"
        "device,precision,threads,cpuset,commit,gpu_ms,gpu_median_ms,gpu_min_ms,gflops_gpu\n");
    for (const GemmRow& r : rows) {
      std::fprintf(out, "%s,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%.2e,%s,\"%s\",%d,%d,\"%s\",%s,",
                   mode_tag(r.mode), r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min, r.ms.stddev,
                   gflops(r.M, r.K, r.N, r.ms.mean), gflops(r.M, r.K, r.N, r.ms.median), r.max_rel_err,
                   backend.c_str(), device.c_str(), precision, threads, cpus.c_str(), commit.c_str());
      if (r.has_gpu) {
        std::fprintf(out, "%.4f,%.4f,%.4f,%.2f\n", r.gpu.mean, r.gpu.median, r.gpu.min,
                     gflops(r.M, r.K, r.N, r.gpu.mean));
      } else {
        std::fprintf(out, ",,,\n");
      }
    }
  } else if (a.format == "json") {
    std::fprintf(
        out,
        "{\"test\": \"%s\", \"backend\": \"%s\", \"device\": \"%s\", \"precision\": %d, \"threads\": %d, "
        "\"cpuset\": \"%s\", \"commit\": \"%s\", \"warmup\": %d, \"runs\": %d, \"results\": [",
        a.test.c_str(), backend.c_str(), device.c_str(), precision, threads, cpus.c_str(), commit.c_str(),
        a.warmup, a.runs);
    for (size_t i = 0; i < rows.size(); ++i) {
      const GemmRow& r = rows[i];
      std::fprintf(
          out,
          "%s\n  {\"mode\": \"%s\", \"M\": %d, \"K\": %d, \"N\": %d, \"avg_ms\": %.4f, \"median_ms\": %.4f, "
          "\"min_ms\": %.4f, \"stddev_ms\": %.4f, \"gflops\": %.2f, \"check_rel_err\": %.2e",
          i ? "," : "", mode_tag(r.mode), r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min, r.ms.stddev,
          gflops(r.M, r.K, r.N, r.ms.mean), r.max_rel_err);
      if (r.has_gpu) {
        std::fprintf(out, ", \"gpu_ms\": %.4f, \"gpu_median_ms\": %.4f, \"gflops_gpu\": %.2f", r.gpu.mean,
                     r.gpu.median, gflops(r.M, r.K, r.N, r.gpu.mean));
      }
      std::fprintf(out, "}");
    }
    std::fprintf(out, "\n]}\n");
  }
}

void gemm_speed(const GemmSpeedArgs& a) {
  if (a.test == "speed/GemvBW" || a.test == "GemvBW") {
    GemvArgs g;
    g.backend = a.backend.empty() ? a.backend_pos : a.backend;
    g.threads = cpu_threads(a.threads, a.third);
    g.device = a.device;
    g.device_profile = a.device_profile;
    g.shapes = a.shapes;
    g.format = a.format;
    g.isa = a.isa;
    g.activations = a.activations;
    return gemv_bw_main(g);
  }
  const auto modes = modes_for_test(a.test);
  if (!modes) {
    fail(
        "unknown test '{}': use speed/GemmSpeedFloat, speed/GemmSpeedInt8, speed/GemmSpeedInt4, "
        "speed/GemmSpeedInt4A8, speed/GemmSpeedAll or speed/GemvBW",
        a.test);
  }
  const int mnn = parse_backend(a.backend.empty() ? a.backend_pos : a.backend);
  const int precision = parse_precision(a.precision.empty() ? a.precision_pos : a.precision);
  if (a.format != "text" && a.format != "md" && a.format != "csv" && a.format != "json") {
    fail("unknown format '{}': use text, md, csv or json", a.format);
  }
  std::vector<ShapeConfig> shapes;
  for (const auto& s : a.shapes) shapes.push_back(parse_shape(s));
  if (shapes.empty()) shapes = default_configs();
  const std::vector<int> ms = a.ms.empty() ? default_m_values() : a.ms;
  for (int M : ms) {
    if (M <= 0) fail("M must be positive (got {})", M);
  }
  if (a.runs < 1 || a.warmup < 0) fail("--runs must be >= 1 and --warmup >= 0");

  // MNN's third argument: CPU threads on the host, the GPU-mode bitmask on a device. The bitmask is checked
  // before the backend is looked up, so a script's arguments are known good before it meets a build that
  // has the backend.
  const BackendEntry* found = find_backend_mnn(mnn);
  const bool host = mnn == kCpu || (found && found->host);
  GpuMode g;
  int third = 0;
  if (host) {
    if (!a.tuning.empty() || !a.gpu_memory.empty())
      fail("--tuning and --gpu-memory apply to GPU backends only");
    third = cpu_threads(a.threads, a.third);
  } else {
    g = parse_gpu_mode(a.third == -1 ? 0 : a.third);
    if (!a.tuning.empty()) g.tuning = parse_tuning(a.tuning);
    if (!a.gpu_memory.empty()) g.memory = parse_gpu_memory(a.gpu_memory);
    third = a.third >= 0 ? a.third : (a.tuning.empty() && a.gpu_memory.empty() ? 0 : g.mask());
  }
  const BackendEntry& entry = require_backend_mnn(mnn);
  const std::shared_ptr<BackendOptions> options = backend_options_from(entry, a.given);
  const int threads = host ? third : 1;
  if (!a.isa.empty()) select_isa(a.isa);

  const std::string commit = std::string(build_commit());
  const bool text = a.format == "text";
  FILE* prog = text ? stdout : stderr;  // the MNN lines: the output in text format, progress otherwise
  std::fputs(test_banner(*modes).c_str(), prog);
  std::fputs(backend_config_lines(mnn, precision, third).c_str(), prog);
  const std::vector<DeviceInfo> devs = entry.devices(host ? std::string("none") : a.device_profile);
  const int device = a.device >= 0 ? a.device : default_device(devs);
  if (size_t(device) >= devs.size())
    fail("{} device {} does not exist ({} found; see `tilellm devices`)", entry.name, device, devs.size());
  const DeviceInfo& dev = devs[size_t(device)];
  int ncpu = 0;
  const std::string cpus = bench::cpu_set(&ncpu);
  std::string arith;
  for (Mode m : *modes)
    arith += std::string(arith.empty() ? "" : "; ") + mode_tag(m) + ": " +
             mode_arithmetic(m, host, precision, a.activations == "q8");
  if (host) {
    std::fprintf(prog,
                 "# cpu: %s | %s | threads: %d | cpuset: %s (%d cpus) | precision: %d (%s) | %s | commit: %s "
                 "| warmup %d, runs %d\n",
                 dev.name.c_str(), dev.summary.c_str(), threads, cpus.c_str(), ncpu, precision,
                 precision_name(precision), arith.c_str(), commit.c_str(), a.warmup, a.runs);
    if (threads > ncpu) std::fprintf(stderr, "warning: %d threads on %d allowed CPUs\n", threads, ncpu);
  } else {
    // IMAGE is MNN's default when the bitmask leaves memory unset; only an explicit request (the IMAGE bit,
    // or --gpu-memory image, which overrides the bitmask) is refused, anything else runs on buffers.
    const bool image_asked =
        g.memory == kMemoryImage &&
        (a.gpu_memory == "image" || (a.gpu_memory.empty() && a.third >= 0 && (a.third & kMemoryImage) != 0));
    std::fprintf(
        prog,
        "# device %d: %s | backend: %s | %s | precision: %d (%s) | %s | memory: %s | tuning: %s (not used: "
        "work-group sizes come from the device's capabilities) | commit: %s | warmup %d, runs %d\n",
        device, dev.name.c_str(), entry.name.c_str(), dev.summary.c_str(), precision,
        precision_name(precision), arith.c_str(), image_asked ? "IMAGE" : "BUFFER", tuning_name(g.tuning),
        commit.c_str(), a.warmup, a.runs);
    // The backend's own flags given (a GEMM tile, a split), so that the lines say what ran.
    for (const auto& [flag, value] : a.given) std::fprintf(prog, "# %s %s\n", flag.c_str(), value.c_str());
    if (image_asked) {
      std::fprintf(
          prog,
          "memory mode IMAGE: skipped, no numbers are reported. The image weight path serves a model's "
          "own matrices (run/bench --gpu-memory image, for the formats the backend has image kernels "
          "for); this benchmark's weights are converted at load, which holds them in buffers. Use the "
          "BUFFER bit (64) or --gpu-memory buffer.\n");
      return;
    }
    if (g.memory != kMemoryBuffer) {
      std::fprintf(prog,
                   "# memory mode not given: BUFFER (IMAGE, MNN's default, does not hold this benchmark's "
                   "converted weights)\n");
    }
  }

  ThreadPool pool(threads);
  int max_m = 1;
  for (int M : ms) max_m = std::max(max_m, M);
  std::vector<GemmRow> rows;
  int failures = 0;
  // MNN's order: shape by shape, the modes of the test within a shape, M within a mode.
  const bool all = modes->size() > 1;
  for (const ShapeConfig& s : shapes) {
    if (all) std::fputs(shape_label(s, true).c_str(), prog);
    for (Mode mode : *modes) {
      if (mode == Mode::kInt4B64 && s.K % 64 != 0) {
        std::fprintf(prog, "  # %s skipped at K=%d N=%d: Int4-Block64 needs K %% 64 == 0\n", mode_tag(mode),
                     s.K, s.N);
        continue;
      }
      if (!all) std::fputs(shape_label(s, false).c_str(), prog);
      std::vector<int> run_ms;
      for (int M : ms) {
        if (config_runs(s, M, mode)) run_ms.push_back(M);
      }
      if (run_ms.empty()) continue;
      const int maxM = *std::max_element(run_ms.begin(), run_ms.end());
      BackendParams p = mode_params(mode, host, precision, a.activations == "q8");
      p.device = device;
      p.device_profile = host ? "none" : a.device_profile;
      p.pool = &pool;
      p.options = options.get();
      p.profiling = !host;
      // Every configuration is checked below before it is timed: a host fallback must not stand in for a
      // kernel that failed a self-check.
      p.self_check = false;
      p.max_tokens = maxM;
      p.max_in_elems = int64_t(maxM) * s.K;
      p.max_out_elems = int64_t(maxM) * s.N;
      p.max_width = 64;
      std::unique_ptr<MatmulCase> c;
      try {
        c = std::make_unique<MatmulCase>(entry, p, s.K, s.N, GgmlType::F32, uint32_t(s.K * 31 + s.N));
      } catch (const Error& e) {
        std::fprintf(prog, "  # %s skipped at K=%d N=%d: %s\n", mode_tag(mode), s.K, s.N, e.what());
        continue;
      }
      const std::vector<float> A = random_floats(size_t(maxM) * s.K, uint32_t(s.K + 7));
      std::vector<float> C(size_t(maxM) * s.N);
      for (int M : run_ms) {
        std::fill(C.begin(), C.end(), NAN);
        c->run(A.data(), M, C.data());
        const double err = c->check(A.data(), M, C.data());
        if (!(err <= 1e-4)) {
          std::fprintf(prog, "  %-28s  M=%-5d K=%-5d N=%-5d  CHECK FAILED: relative error %.3g, not timed\n",
                       mode_tag(mode), M, s.K, s.N, err);
          ++failures;
          continue;
        }
        for (int i = 0; i < a.warmup; ++i) c->run(A.data(), M, C.data());
        std::vector<double> total, gpu;
        for (int i = 0; i < a.runs; ++i) {
          c->backend().reset_kernel_times();  // a device finishes its queue: nothing earlier is in flight
          const auto t0 = Clock::now();
          c->run(A.data(), M, C.data());
          total.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          if (!host) gpu.push_back(kernel_ms(c->backend()));
        }
        const GemmRow r{mode, M, s.K, s.N, bench::stats_of(total), err, !host, bench::stats_of(gpu)};
        rows.push_back(r);
        if (host) {
          std::fputs(cpu_line(mode_tag(mode), M, s.K, s.N, r.ms.mean).c_str(), prog);
          if (text) {
            std::fprintf(
                prog,
                "  # median=%.3f ms  min=%.3f ms  stddev=%.3f ms  max-GFLOPS=%.2f  check: rel err %.1e\n",
                r.ms.median, r.ms.min, r.ms.stddev, gflops(M, s.K, s.N, r.ms.min), err);
          }
        } else {
          std::fputs(gpu_line(mode_tag(mode), M, s.K, s.N, r.ms.mean, r.gpu.mean).c_str(), prog);
          if (text) {
            std::fprintf(
                prog,
                "  # total median=%.3f min=%.3f stddev=%.3f ms | gpu median=%.3f min=%.3f stddev=%.3f ms | "
                "check: rel err %.1e\n",
                r.ms.median, r.ms.min, r.ms.stddev, r.gpu.median, r.gpu.min, r.gpu.stddev, err);
          }
        }
        std::fflush(prog);
      }
    }
  }
  const std::string where = entry.name + ":" + std::to_string(device) + " " + dev.name;
  print_tables(a, rows, entry.name, dev, precision, threads, cpus, commit);
  if (!a.plot.empty()) {
    write_gemm_plot(a.plot, rows,
                    a.test + ", " + where + (host ? ", " + std::to_string(threads) + " threads" : "") +
                        ", precision " + std::to_string(precision) + ", " + commit);
    std::fprintf(stderr, "plot written to %s\n", a.plot.c_str());
  }
  if (failures) fail("{} configuration(s) failed the reference check and were not timed", failures);
}

}  // namespace

void register_gemm_speed(CLI::App& app) {
  auto a = std::make_shared<GemmSpeedArgs>();
  CLI::App* sub = app.add_subcommand("gemm-speed",
                                     "MNN GemmSpeed GEMM throughput of the engine's matmul, on any backend");
  sub->add_option(
         "test", a->test,
         "speed/GemmSpeedFloat | speed/GemmSpeedInt8 | speed/GemmSpeedInt4 | speed/GemmSpeedInt4A8 | "
         "speed/GemmSpeedAll | speed/GemvBW")
      ->required();
  sub->add_option("backend_id", a->backend_pos, "MNN backend: 0 CPU, 1 Metal, 2 CUDA, 3 OpenCL, 7 Vulkan");
  sub->add_option("precision_id", a->precision_pos, "0 Normal, 1 High, 2 Low");
  sub->add_option(
      "threads_or_gpu_mode", a->third,
      "CPU: threads (default 1); GPU: MNN bitmask (tuning NONE 1, HEAVY 2, WIDE 4, NORMAL 8, FAST 16; "
      "memory BUFFER 64, IMAGE 128)");
  sub->add_option("--backend", a->backend, "cpu|metal|cuda|opencl|vulkan (or 0/1/2/3/7)");
  sub->add_option("--precision", a->precision, "normal|high|low (or 0/1/2)");
  sub->add_option("--threads", a->threads, "CPU threads");
  sub->add_option("--gpu-memory", a->gpu_memory, "buffer|image (GPU backends)");
  sub->add_option("--tuning", a->tuning, "none|heavy|wide|normal|fast (GPU backends)");
  sub->add_option("--device", a->device,
                  "device index of the backend (see `tilellm devices`); default: its first device that is "
                  "not emulated on the CPU, else 0")
      ->check(CLI::NonNegativeNumber);
  sub->add_option(
      "--device-profile", a->device_profile,
      "GPU backends: clamp the device to a GPU family's limits: none, powervr-rogue, mali-valhall, "
      "adreno-7xx (Vulkan also powervr-cxt, no-16bit)");
  sub->add_option("--shape", a->shapes, "K,N[,maxM] instead of the default shapes (repeatable)");
  sub->add_option("--m", a->ms, "M values instead of 1,8,32,128,512")->delimiter(',');
  sub->add_option("--format", a->format, "text (MNN lines) | md | csv | json");
  sub->add_option("--plot", a->plot, "write GFLOPS against M as a self-contained SVG");
  sub->add_option("--isa", a->isa,
                  "instruction set of the CPU kernels: best (default), or one this CPU runs (" +
                      supported_cpu_isa_names() + ")");
  sub->add_option(
         "--activations", a->activations,
         "the integer modes' activations: q8 (rounded to int8 per block where the backend has integer "
         "kernels, as `run`'s default) or f32 (the float path)")
      ->check(CLI::IsMember({"q8", "f32"}));
  sub->add_option("--warmup", a->warmup, "warm-up runs (MNN: 3)");
  sub->add_option("--runs", a->runs, "timed runs (MNN: 10)");
  add_backend_option_groups(sub, a->given);
  sub->callback([a] { gemm_speed(*a); });
}

}  // namespace tilellm::cli
