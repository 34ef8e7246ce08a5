// `tilellm gemv-bw` (also `tilellm gemm-speed speed/GemvBW`): the decode GEMV y = W x (M = 1) of the engine's
// own matmul op, on any backend of the registry, as achieved bandwidth over the weight bytes against memory
// peaks measured on that backend's device in the same run (MNN's GemvBW table, and ours beside it). The
// activations are `run`'s: --activations q8 (the default) rounds them to int8 per block where the backend
// has integer decode kernels (the CPU, CUDA, Vulkan), so the products timed are the ones decode runs;
// --activations f32 times every backend's float path.
//
// Default W is 4096 x 14336 (N x K: a Llama-3-8B FFN down projection). One row per weight format the engine
// holds (matmul_case.h: the matrix goes through the backend's own load path): int8b0 (8-bit, one fp16 scale
// and offset per output row, MNN's Int8-Block0), int4b64 (4-bit, one pair per 64 inputs, MNN's Int4-Block64
// and GemvBW's w4), q8_0 (the GGUF format: int8 codes and one fp16 scale per 32) and f16; --formats picks
// others too: q4_0, q4_k, q6_k (GGUF types of random blocks, held as each backend holds the file's). The
// bytes counted are the format's own: codes plus scales and offsets (1 + 4/K, 0.5 + 4/64 and 2 bytes per
// weight; a GGUF type's block bytes, 34/32 for q8_0; a backend's padding of a row is not counted). On the
// host an iteration is what decode runs (the activations quantized as the format pairs with them, then the
// integer or float GEMV) and is timed by the wall clock; on a device it is the matvec's kernels, timed by
// their timestamps.
//   eff GB/s = weight bytes / time;  %peak = eff / read peak;  GFLOPS = 2*K*N / time;  AI = 2*K*N / bytes
// Rounds: each measures the peaks (the backend's memory probes: a pure read and a copy, read + write bytes
// counted, of buffers of max(4x the device's cache, 256 MiB) or --peak-mib), then one iteration of every row
// and, beside each, the same bytes read and copied alone ("read W", "copy W": what any kernel reading those
// bytes reaches, launch and drain included). The probe flushes the cache before every timed operation, so
// each reads from memory. The table uses the medians of 10 rounds after 2 warm-up rounds.
// On a device backend a second table follows: each format's products back to back over copies of the matrix
// in one decode step, as decode runs them (gemv_b2b.h).
#include <cmath>
#include <cstdio>
#include <memory>
#include <tuple>

#include "backend_args.h"
#include "backends/registry.h"
#include "base/cpu_isa.h"
#include "base/error.h"
#include "bench_env.h"
#include "commands.h"
#include "gemv_b2b.h"
#include "matmul_case.h"
#include "mnn_gemm.h"

namespace tilellm::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Format {
  const char* name;
  WeightsMode mode;
  GgmlType source;  // what the benchmark's weights are stored in before the load converts them
};
// MNN's four (the default table), then GGUF block types decode reads as the file holds them.
constexpr Format kFormats[] = {
    {"int8b0", WeightsMode::Int8B0, GgmlType::F32}, {"int4b64", WeightsMode::Int4B64, GgmlType::F32},
    {"q8_0", WeightsMode::Native, GgmlType::Q8_0},  {"f16", WeightsMode::F16, GgmlType::F32},
    {"q4_0", WeightsMode::Native, GgmlType::Q4_0},  {"q4_k", WeightsMode::Native, GgmlType::Q4_K},
    {"q6_k", WeightsMode::Native, GgmlType::Q6_K}};
constexpr const char* kDefaultFormats = "int8b0,int4b64,q8_0,f16";

// The format's bytes for K inputs of one output row (see the top of the file).
double row_bytes(const Format& f, int K) {
  switch (f.mode) {
    case WeightsMode::Int8B0:
      return K + 4.0;
    case WeightsMode::Int4B64:
      return K / 2.0 + 4.0 * ((K + 63) / 64);
    case WeightsMode::F16:
      return 2.0 * K;
    default:
      return double(row_size(f.source, K));  // the GGUF type's own bytes
  }
}

// The rows --formats names, in the order given.
std::vector<const Format*> formats_of(const std::string& list) {
  std::vector<const Format*> out;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, comma - at);
    const Format* f = nullptr;
    for (const Format& k : kFormats) {
      if (name == k.name) f = &k;
    }
    if (!f) {
      std::string names;
      for (const Format& k : kFormats) names += std::string(names.empty() ? "" : ", ") + k.name;
      fail("--formats: unknown weight format '{}' (one of {})", name, names);
    }
    out.push_back(f);
    at = comma + 1;
  }
  return out;
}

struct Row {
  const Format* format;
  std::unique_ptr<MatmulCase> c;
  double bytes = 0;
  std::vector<double> us, read_w, copy_w;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

void gemv_bw_main(const GemvArgs& a) {
  if (a.format != "text" && a.format != "md") fail("gemv-bw prints text or md tables (got '{}')", a.format);
  if (a.peak_mib < 0) fail("--peak-mib must be a positive size in MiB (got {})", a.peak_mib);
  if (a.activations != "q8" && a.activations != "f32")
    fail("--activations takes q8 or f32 (got '{}')", a.activations);
  const ActivationMode act = a.activations == "q8" ? ActivationMode::Quantized : ActivationMode::F32;
  const BackendEntry& entry = require_backend_mnn(gemm::parse_backend(a.backend));
  if (!entry.make_probe) fail("backend {} has no memory probes, which gemv-bw measures against", entry.name);
  std::vector<gemm::ShapeConfig> shapes;
  for (const auto& s : a.shapes) shapes.push_back(gemm::parse_shape(s));
  if (shapes.empty()) shapes.push_back({14336, 4096, 0});
  const bool host = entry.host;
  if (!a.isa.empty()) select_isa(a.isa);
  const int threads = host ? a.threads : 1;
  if (threads < 1 || threads > 4096) fail("thread count {} is out of range (1 .. 4096)", threads);
  ThreadPool pool(threads);
  BackendParams base;
  base.device_profile = host ? "none" : a.device_profile;
  base.pool = &pool;
  const std::shared_ptr<BackendOptions> options = cli::backend_options_from(entry, a.given);
  base.options = options.get();
  const std::vector<DeviceInfo> devs = entry.devices(base.device_profile);
  base.device = a.device >= 0 ? a.device : default_device(devs);
  if (size_t(base.device) >= devs.size())
    fail("{} device {} does not exist ({} found; see `tilellm devices`)", entry.name, base.device,
         devs.size());
  std::unique_ptr<MemoryProbe> probe = entry.make_probe(base);

  // Every row is made (through the backend's load path) and checked against the double reference first.
  std::vector<Row> rows;
  const std::vector<const Format*> formats = formats_of(a.formats.empty() ? kDefaultFormats : a.formats);
  for (const gemm::ShapeConfig& s : shapes) {
    if (s.K % 64 != 0) fail("gemv-bw uses block 64: K={} is not a multiple of 64", s.K);
    for (const Format* fp : formats) {
      const Format& f = *fp;
      if (const int64_t bs = type_traits(f.source).block_size; s.K % bs != 0)
        fail("gemv-bw: {} rows are blocks of {}: K={} is not a multiple of it", f.name, bs, s.K);
      BackendParams p = base;
      p.weights = f.mode;
      p.activations = act;
      p.profiling = !host;
      p.self_check = false;  // checked below, before timing
      p.max_tokens = 1;
      p.max_in_elems = s.K;
      p.max_out_elems = s.N;
      p.max_width = 64;
      Row& r = rows.emplace_back();
      r.format = &f;
      r.c = std::make_unique<MatmulCase>(entry, p, s.K, s.N, f.source, uint32_t(s.K + s.N));
      r.bytes = row_bytes(f, s.K) * s.N;
      const std::vector<float> x = random_floats(size_t(s.K), uint32_t(s.K));
      std::vector<float> y(size_t(s.N));
      r.c->run(x.data(), 1, y.data());
      const double err = r.c->check(x.data(), 1, y.data());
      if (!(err <= 1e-4))
        fail("gemv-bw: the {} {} GEMV failed its check (relative error {:.3g})", entry.name, f.name, err);
    }
  }

  constexpr int kWarm = 2, kIters = 10;
  const size_t cache = probe->cache_bytes();
  size_t peak_bytes =
      a.peak_mib > 0 ? size_t(a.peak_mib) << 20 : std::max<size_t>(cache * 4, size_t(256) << 20);
  peak_bytes = std::min(peak_bytes, probe->max_buffer_bytes()) / 64 * 64;
  std::vector<double> copy_r, read_r;
  for (int it = 0; it < kWarm + kIters; ++it) {
    const bool keep = it >= kWarm;
    // The read first: after the copy it would share memory with the write-back of the copy's dirty lines.
    const double rd = probe->read_gbs(peak_bytes), cp = probe->copy_gbs(peak_bytes);
    if (keep) {
      read_r.push_back(rd);
      copy_r.push_back(cp);
    }
    for (Row& r : rows) {
      const std::vector<float> x = random_floats(size_t(r.c->K()), uint32_t(it));
      std::vector<float> y(size_t(r.c->N()));
      probe->flush();
      r.c->backend().reset_kernel_times();
      const auto t0 = Clock::now();
      r.c->run(x.data(), 1, y.data());
      const double us = host ? seconds_since(t0) * 1e6 : kernel_ms(r.c->backend()) * 1e3;
      probe->flush();
      const double rw = probe->read_gbs(size_t(r.bytes) / 64 * 64);
      probe->flush();
      const double cw = probe->copy_gbs(size_t(r.bytes) / 64 * 64);
      if (keep) {
        r.us.push_back(us);
        r.read_w.push_back(rw);
        r.copy_w.push_back(cw);
      }
    }
  }
  const double copy_gbs = bench::stats_of(copy_r).median, read_gbs = bench::stats_of(read_r).median;
  const DeviceInfo& dev = devs[size_t(base.device)];
  const std::string where =
      host ? fmt::format("cpu: {} | {} | threads: {} | cpuset: {}", dev.name, dev.summary, threads,
                         bench::cpu_set())
           : fmt::format("{} device {}: {} | {}", entry.name, base.device, dev.name, dev.summary);
  std::printf("# gemv-bw | backend: %s | %s | activations: %s | commit: %s\n", entry.name.c_str(),
              where.c_str(), a.activations.c_str(), build_commit());
  std::printf(
      "# peak (same run, %s, median of the %d rounds the rows ran in): memcpy %.2f GB/s (read+write), pure "
      "read "
      "%.2f GB/s (best %.2f / %.2f) over %.0f MiB; cache %.0f MiB, flushed before every timed operation\n",
      host ? fmt::format("{} threads", threads).c_str() : "device timestamps", kIters, copy_gbs, read_gbs,
      *std::max_element(copy_r.begin(), copy_r.end()), *std::max_element(read_r.begin(), read_r.end()),
      double(peak_bytes) / (1 << 20), double(cache) / (1 << 20));
  std::printf(
      "| type | thr | us/iter | W MiB | bytes/elem | eff GB/s | %%peak | GFLOPS | AI | %%copy | read W GB/s "
      "| copy W "
      "GB/s |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    const int K = r.c->K(), N = r.c->N();
    const double t = bench::stats_of(r.us).median;
    const double flops = 2.0 * K * N;
    const double gbs = r.bytes / (t * 1e-6) / 1e9;
    std::printf("| %s %dx%d | %s | %.1f | %.2f | %.4f | %.4g | %.1f | %.4g | %.2f | %.1f | %.4g | %.4g |\n",
                r.format->name, N, K, host ? std::to_string(threads).c_str() : "gpu", t, r.bytes / (1 << 20),
                r.bytes / (double(K) * N), gbs, 100.0 * gbs / read_gbs, flops / (t * 1e-6) / 1e9,
                flops / r.bytes, 100.0 * gbs / copy_gbs, bench::stats_of(r.read_w).median,
                bench::stats_of(r.copy_w).median);
  }
  std::printf(
      "# us/iter: median of %d iterations (%s), each from memory (the cache flushed first); read W / copy W: "
      "the weight bytes alone read and copied by the memory probes (medians, flushed likewise)\n",
      kIters,
      host ? (act == ActivationMode::Quantized ? "wall clock: activation quantization + GEMV" : "wall clock")
           : "the kernels' device time");
  if (host) return;
  // Back to back: the products as a decode step runs them (gemv_b2b.h).
  std::printf(
      "# back to back: each format's products over copies of the matrix (together >= 4x the cache), one "
      "after "
      "the other in one decode step (recorded once and replayed where the backend does); median of 10 steps, "
      "wall clock, launch and synchronisation included\n");
  std::printf("| type | copies | us/product | eff GB/s | %%peak | %%copy |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    const BackToBack b = gemv_back_to_back(entry, base, r.c->K(), r.c->N(), r.format->mode, act,
                                           r.format->source, r.bytes, cache);
    // Four significant digits: a loaded or emulated device's MB/s must not print as 0.00 GB/s.
    std::printf("| %s %dx%d | %d | %.1f | %.4g | %.3g | %.3g |\n", r.format->name, r.c->N(), r.c->K(),
                b.copies, b.us, b.gbs, 100.0 * b.gbs / read_gbs, 100.0 * b.gbs / copy_gbs);
  }
}

void register_gemv_bw(CLI::App& app) {
  auto a = std::make_shared<GemvArgs>();
  CLI::App* sub = app.add_subcommand("gemv-bw",
                                     "decode GEMV bandwidth of the engine's matmul against the device's "
                                     "read and copy peaks");
  sub->add_option("-t,--threads", a->threads, "CPU threads")->check(CLI::Range(1, 4096));
  sub->add_option("--shape", a->shapes, "K,N (repeatable; default 14336,4096)");
  sub->add_option("--backend", a->backend, "a backend by name or MNN number (cpu or 0, opencl or 3, ...)");
  sub->add_option("--device", a->device,
                  "device index of the backend (see `tilellm devices`); default: its first device that is "
                  "not emulated on the CPU, else 0")
      ->check(CLI::NonNegativeNumber);
  sub->add_option(
      "--device-profile", a->device_profile,
      "GPU backends: clamp the device to a GPU family's limits: none, powervr-rogue, mali-valhall, "
      "adreno-7xx (Vulkan also powervr-cxt, no-16bit)");
  sub->add_option(
      "--peak-mib", a->peak_mib,
      "size of the peak measurement's buffers in MiB (default, or 0: max(4x the device's cache, 256))");
  sub->add_option("--format", a->format, "text or md (the same table)");
  sub->add_option("--formats", a->formats,
                  std::string("weight formats to time, a comma list (default ") + kDefaultFormats +
                      ", MNN's; also q4_0, q4_k, q6_k: GGUF types held as the file holds them)");
  sub->add_option("--activations", a->activations,
                  "q8 (rounded to int8 per block where the backend has integer decode kernels, as `run`'s "
                  "default) or f32 (the float path)")
      ->check(CLI::IsMember({"q8", "f32"}));
  sub->add_option("--isa", a->isa,
                  "instruction set of the CPU kernels: best (default), or one this CPU runs (" +
                      supported_cpu_isa_names() + ")");
  cli::add_backend_option_groups(sub, a->given);
  sub->callback([a] { gemv_bw_main(*a); });
}

}  // namespace tilellm::cli
