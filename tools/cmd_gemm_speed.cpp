// `tilellm gemm-speed`: MNN's GemmSpeed benchmark (test/speed/GemmSpeed.cpp) on TileLLM's CPU kernels, or
// (backend 3) on the OpenCL backend's kernels (gemm_speed_opencl.h: MNN's GPU line, total and gpu times).
//
//   tilellm gemm-speed TEST [backend] [precision] [threads-or-gpu-mode]     (MNN's positional form)
//   tilellm gemm-speed speed/GemmSpeedAll --threads 2 --format md --plot gemm.svg
//   tilellm gemm-speed speed/GemmSpeedAll 3 0 68 --device 0 --format md    (OpenCL, buffer memory)
//
// Per (mode, K, N, M): the weights are made from random data and packed once; the kernel's output is checked
// against a double-precision reference at sampled rows and columns (a kernel that fails gets no GFLOPS);
// then 3 warm-ups and 10 timed runs. A run is what MNN times for the mode: the float GEMM, or for the
// quantized modes the run-time activation quantization plus the integer GEMM. The MNN line keeps MNN's
// printf format; median/min/stddev follow on a "#" line (text) or in the md/csv/json tables.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <set>

#include "bench/bench_env.h"
#include "bench/gemm.h"
#include "bench/gemm_speed.h"
#include "commands.h"
#include "format/error.h"
#include "gemm_speed_opencl.h"
#include "gemv_bw_opencl.h"

namespace tilellm::cli {
namespace {

using namespace tilellm::gemm;
using Clock = std::chrono::steady_clock;

struct GemmSpeedArgs {
  std::string test;
  std::string backend_pos = "0", precision_pos = "0";
  int third = -1;  // threads (CPU) or GPU-mode bitmask; -1: not given
  std::string backend, precision, gpu_memory, tuning, format = "text", plot, isa = "auto";
  int threads = -1;                     // --threads; -1: not given
  int device = 0;                       // OpenCL device index
  std::string device_profile = "none";  // OpenCL device profile
  std::vector<std::string> shapes;
  std::vector<int> ms;
  int warmup = 3, runs = 10;
};

// ms: the CPU run, or on a GPU the full round trip (total); gpu: the kernels' device time (GPU rows only).
struct Row {
  Mode mode;
  int M, K, N;
  bench::Stats ms;
  double max_rel_err;
  bool has_gpu = false;
  bench::Stats gpu;
};

std::vector<float> random_matrix(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Rows and columns where the result is compared with the double reference.
std::vector<int> sample(int n, int count) {
  std::set<int> s;
  for (int i = 0; i < count; ++i) s.insert(int(int64_t(i) * (n - 1) / std::max(1, count - 1)));
  return {s.begin(), s.end()};
}

// One mode at one shape: weights packed once, every M of the shape measured.
class Case {
 public:
  Case(Mode mode, int K, int N, const std::vector<float>& W) : mode_(mode), K_(K), N_(N), W_(W) {
    switch (mode) {
      case Mode::kFloat:
        f32_ = pack_f32(W.data(), K, N);
        break;
      case Mode::kInt8B0:
        q_ = quantize_int8(W.data(), K, N, 0);
        break;
      case Mode::kInt4B64:
        q_ = quantize_int4(W.data(), K, N, 64);
        break;
      case Mode::kInt4A8:
        q_ = quantize_int4(W.data(), K, N, 0);
        break;
    }
  }

  void run(const float* A, int M, float* C, ThreadPool* pool, Isa isa) {
    if (mode_ == Mode::kFloat) {
      gemm_f32(f32_, A, M, C, pool, isa);
    } else {
      acts_.resize(M, q_);
      quantize_acts(A, M, K_, acts_, pool);
      gemm_quant(q_, acts_, C, pool, isa);
    }
  }

  // Largest |C - ref| / sum|a*w| over the sampled entries; the reference dequantizes as the kernels do.
  double check(const float* A, int M, const float* C) const {
    double worst = 0.0;
    for (int m : sample(M, 3)) {
      for (int n : sample(N_, 64)) {
        double ref = 0.0, mag = 0.0;
        for (int k = 0; k < K_; ++k) {
          double a, w;
          if (mode_ == Mode::kFloat) {
            a = A[size_t(m) * K_ + k];
            w = W_[size_t(n) * K_ + k];
          } else {
            a = double(acts_.scales.as<float>()[m]) * acts_.q.as<int8_t>()[size_t(m) * acts_.Kp + k];
            w = q_.dequantize(n, k);
          }
          ref += a * w;
          mag += std::fabs(a * w);
        }
        const double err = std::fabs(double(C[size_t(m) * N_ + n]) - ref) / (mag + 1e-30);
        if (!(err <= 1.0)) return INFINITY;  // NaN or garbage
        worst = std::max(worst, err);
      }
    }
    return worst;
  }

 private:
  Mode mode_;
  int K_, N_;
  const std::vector<float>& W_;
  PackedF32 f32_;
  QuantMatrix q_;
  QuantActs acts_;
};

const char* svg_color(Mode m) {
  switch (m) {
    case Mode::kFloat:
      return "#1f77b4";
    case Mode::kInt8B0:
      return "#d62728";
    case Mode::kInt4B64:
      return "#2ca02c";
    case Mode::kInt4A8:
      return "#9467bd";
  }
  return "#000";
}

// GFLOPS against M, one panel per (K, N), one line per mode; log2 M on x. Self-contained SVG. GPU rows add a
// dashed line per mode for the GFLOPS of the kernels' device time (the solid line is the round trip). A path
// ending in .html gets a page with the same SVG inline and the rows as a table under it.
void write_plot(const std::string& path, const std::vector<Row>& rows, const std::string& raw_title) {
  const bool html = path.size() >= 5 && path.compare(path.size() - 5, 5, ".html") == 0;
  std::string title;  // a device or CPU name may hold '&' or '<'
  for (char c : raw_title)
    title += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : std::string(1, c);
  std::vector<std::pair<int, int>> shapes;
  std::set<int> mset;
  std::set<Mode> modes;
  double ymax = 1.0;
  for (const Row& r : rows) {
    if (std::find(shapes.begin(), shapes.end(), std::make_pair(r.K, r.N)) == shapes.end()) {
      shapes.push_back({r.K, r.N});
    }
    mset.insert(r.M);
    modes.insert(r.mode);
    ymax = std::max(ymax, gflops(r.M, r.K, r.N, r.ms.mean));
    if (r.has_gpu && r.gpu.mean > 0) ymax = std::max(ymax, gflops(r.M, r.K, r.N, r.gpu.mean));
  }
  const std::vector<int> mv(mset.begin(), mset.end());
  const int pw = 300, ph = 240, ml = 50, mt = 50, gap = 30;
  const int W = ml + int(shapes.size()) * (pw + gap) + 20, H = mt + ph + 90;
  std::ofstream o(path);
  if (!o) fail("{}: cannot write the plot", path);
  if (html) {
    o << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << title
      << "</title></head>\n<body style=\"font-family: sans-serif\">\n";
  }
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" "
       "fill=\"white\"/>\n";
  o << "<text x=\"" << ml << "\" y=\"20\" font-size=\"14\">" << title << "</text>\n";
  const double ytop = std::ceil(ymax * 1.1 / 100.0) * 100.0;
  auto xpos = [&](int px, int M) {
    const size_t i = size_t(std::find(mv.begin(), mv.end(), M) - mv.begin());
    return px + (mv.size() > 1 ? double(i) * pw / double(mv.size() - 1) : pw / 2.0);
  };
  auto ypos = [&](double g) { return mt + ph - g / ytop * ph; };
  for (size_t s = 0; s < shapes.size(); ++s) {
    const int px = ml + int(s) * (pw + gap);
    o << "<rect x=\"" << px << "\" y=\"" << mt << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#888\"/>\n";
    o << "<text x=\"" << px + pw / 2 << "\" y=\"" << mt - 6
      << "\" text-anchor=\"middle\">K=" << shapes[s].first << " N=" << shapes[s].second << "</text>\n";
    for (int g = 0; g <= 4; ++g) {
      const double v = ytop * g / 4;
      o << "<line x1=\"" << px << "\" x2=\"" << px + pw << "\" y1=\"" << ypos(v) << "\" y2=\"" << ypos(v)
        << "\" stroke=\"#eee\"/>\n";
      if (s == 0) {
        o << "<text x=\"" << px - 4 << "\" y=\"" << ypos(v) + 4 << "\" text-anchor=\"end\">" << int(v)
          << "</text>\n";
      }
    }
    for (int M : mv) {
      o << "<text x=\"" << xpos(px, M) << "\" y=\"" << mt + ph + 14 << "\" text-anchor=\"middle\">" << M
        << "</text>\n";
    }
    o << "<text x=\"" << px + pw / 2 << "\" y=\"" << mt + ph + 30 << "\" text-anchor=\"middle\">M</text>\n";
    for (Mode mode : modes) {
      std::string pts, gpts;
      for (const Row& r : rows) {
        if (r.mode != mode || r.K != shapes[s].first || r.N != shapes[s].second) continue;
        const double x = xpos(px, r.M), y = ypos(gflops(r.M, r.K, r.N, r.ms.mean));
        pts += std::to_string(x) + "," + std::to_string(y) + " ";
        o << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"2.5\" fill=\"" << svg_color(mode) << "\"/>\n";
        if (r.has_gpu && r.gpu.mean > 0)
          gpts += std::to_string(x) + "," + std::to_string(ypos(gflops(r.M, r.K, r.N, r.gpu.mean))) + " ";
      }
      if (!pts.empty()) {
        o << "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" << svg_color(mode) << "\" points=\""
          << pts << "\"/>\n";
      }
      if (!gpts.empty()) {
        o << "<polyline fill=\"none\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\" stroke=\""
          << svg_color(mode) << "\" points=\"" << gpts << "\"/>\n";
      }
    }
  }
  o << "<text x=\"12\" y=\"" << mt + ph / 2 << "\" transform=\"rotate(-90 12 " << mt + ph / 2
    << ")\" text-anchor=\"middle\">GFLOPS (mean)</text>\n";
  int lx = ml;
  for (Mode mode : modes) {
    o << "<rect x=\"" << lx << "\" y=\"" << H - 30 << "\" width=\"12\" height=\"12\" fill=\""
      << svg_color(mode) << "\"/><text x=\"" << lx + 16 << "\" y=\"" << H - 20 << "\">" << mode_tag(mode)
      << "</text>\n";
    lx += 120;
  }
  if (std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.has_gpu; }))
    o << "<text x=\"" << lx << "\" y=\"" << H - 20
      << "\">solid: total (round trip); dashed: gpu time</text>\n";
  o << "</svg>\n";
  if (html) {
    o << "<table border=\"1\" cellpadding=\"3\" style=\"border-collapse: collapse; font-size: 12px\">\n"
      << "<tr><th>mode</th><th>M</th><th>K</th><th>N</th><th>mean ms</th><th>median ms</th><th>min ms</th>"
         "<th>GFLOPS (mean)</th>"
      << (std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.has_gpu; })
              ? "<th>gpu mean ms</th><th>GFLOPS (gpu)</th>"
              : "")
      << "</tr>\n";
    for (const Row& r : rows) {
      o << fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td>"
          "<td>{:.2f}</td>",
          mode_tag(r.mode), r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min,
          gflops(r.M, r.K, r.N, r.ms.mean));
      if (r.has_gpu)
        o << fmt::format("<td>{:.3f}</td><td>{:.2f}</td>", r.gpu.mean, gflops(r.M, r.K, r.N, r.gpu.mean));
      o << "</tr>\n";
    }
    o << "</table>\n</body></html>\n";
  }
}

#ifdef TILELLM_HAVE_OPENCL
constexpr bool kHaveOpencl = true;
#else
constexpr bool kHaveOpencl = false;
#endif

// Backend 3: the OpenCL backend's kernels (gemm_speed_opencl.h); the MNN GPU lines, then the tables.
void gemm_speed_opencl(const GemmSpeedArgs& a, const std::vector<Mode>& modes,
                       const std::vector<ShapeConfig>& shapes, const std::vector<int>& ms, int precision,
                       const GpuMode& g, int mask) {
  const GpuDeviceInfo dev = opencl_device_info(a.device, a.device_profile);
  const std::string commit = std::string(build_commit());
  const bool text = a.format == "text";
  FILE* out = stdout;
  FILE* prog = text ? stdout : stderr;
  const char* weights = precision == 2 ? "F16 weights" : "F32 weights";
  // IMAGE is MNN's default when the bitmask leaves memory unset; only an explicit request (the IMAGE bit, or
  // --gpu-memory image, which overrides the bitmask) is refused, anything else runs on buffers.
  const bool image_asked =
      g.memory == kMemoryImage &&
      (a.gpu_memory == "image" || (a.gpu_memory.empty() && a.third >= 0 && (a.third & kMemoryImage) != 0));
  std::fputs(test_banner(modes).c_str(), prog);
  std::fputs(backend_config_lines(Backend::kOpenCL, precision, mask).c_str(), prog);
  std::fprintf(
      prog,
      "# device %d: %s | platform: %s | driver: %s | %s | profile: %s | precision: %d (%s: float-gemm "
      "on %s; int8b0/int4b64 on their device formats; fp32 compute and activations) | memory: %s | "
      "tuning: %s (not used: work-group sizes come from the device's capabilities) | commit: %s | "
      "warmup %d, runs %d\n",
      a.device, dev.name.c_str(), dev.platform.c_str(), dev.driver.c_str(), dev.version.c_str(),
      dev.profile.c_str(), precision, precision_name(precision), weights, image_asked ? "IMAGE" : "BUFFER",
      tuning_name(g.tuning), commit.c_str(), a.warmup, a.runs);
  if (image_asked) {
    std::fprintf(
        prog,
        "OpenCL memory mode IMAGE: skipped, no numbers are reported. The image weight path serves a model's "
        "F16/Q4_0/Q4_1/Q8_0 matrices (run/bench --gpu-memory image); this benchmark's weights (F32, and "
        "F16/int8b0/int4b64 converted at upload) are held in buffers. Use the BUFFER bit (64) or "
        "--gpu-memory buffer.\n");
    return;
  }
  if (g.memory != kMemoryBuffer) {
    std::fprintf(prog,
                 "# memory mode not given: BUFFER (IMAGE, MNN's default, does not hold this benchmark's "
                 "converted weights)\n");
  }

  GpuGemmConfig c;
  c.device = a.device;
  c.profile = a.device_profile;
  c.precision = precision;
  c.modes = modes;
  c.shapes = shapes;
  c.ms = ms;
  c.warmup = a.warmup;
  c.runs = a.runs;
  int failures = 0;
  const std::vector<GpuGemmRow> gr = run_gemm_opencl(c, prog, text, &failures);
  std::vector<Row> rows;
  for (const GpuGemmRow& r : gr)
    rows.push_back(Row{r.mode, r.M, r.K, r.N, r.total_ms, r.max_rel_err, true, r.gpu_ms});

  const std::string where = fmt::format("opencl:{} {}", a.device, dev.name);
  if (a.format == "md") {
    std::fprintf(out,
                 "\ndevice: %s, driver: %s, %s, profile: %s, precision: %d, memory: BUFFER, commit: %s\n\n",
                 where.c_str(), dev.driver.c_str(), dev.version.c_str(), dev.profile.c_str(), precision,
                 commit.c_str());
    std::fprintf(
        out,
        "| mode | M | K | N | avg ms | median ms | min ms | stddev ms | GFLOPS (avg) | GFLOPS (median) | "
        "gpu ms | gpu median ms | GFLOPS (gpu) |\n");
    std::fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const Row& r : rows) {
      std::fprintf(out,
                   "| %s | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %.3f | %.3f | %.2f |\n",
                   mode_tag(r.mode), r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min, r.ms.stddev,
                   gflops(r.M, r.K, r.N, r.ms.mean), gflops(r.M, r.K, r.N, r.ms.median), r.gpu.mean,
                   r.gpu.median, gflops(r.M, r.K, r.N, r.gpu.mean));
    }
    std::fprintf(out,
                 "\navg/median/min/stddev ms: total (round trip: upload A, kernels, download C); gpu: the "
                 "kernels' device time (profiling timestamps), mean over the runs\n");
  } else if (a.format == "csv") {
    std::fprintf(
        out,
        "mode,M,K,N,avg_ms,median_ms,min_ms,stddev_ms,gflops_avg,gflops_median,check_rel_err,backend,"
        "precision,threads,cpuset,isa,cpu,commit,gpu_ms,gpu_median_ms,gpu_min_ms,gflops_gpu,device,"
        "driver,opencl,profile,memory\n");
    for (const Row& r : rows) {
      std::fprintf(
          out,
          "%s,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%.2e,opencl,%d,,,,,%s,%.4f,%.4f,%.4f,%.2f,\"%s\","
          "\"%s\",\"%s\",%s,buffer\n",
          mode_tag(r.mode), r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min, r.ms.stddev,
          gflops(r.M, r.K, r.N, r.ms.mean), gflops(r.M, r.K, r.N, r.ms.median), r.max_rel_err, precision,
          commit.c_str(), r.gpu.mean, r.gpu.median, r.gpu.min, gflops(r.M, r.K, r.N, r.gpu.mean),
          where.c_str(), dev.driver.c_str(), dev.version.c_str(), dev.profile.c_str());
    }
  } else if (a.format == "json") {
    std::fprintf(out,
                 "{\"test\": \"%s\", \"backend\": \"opencl\", \"device\": \"%s\", \"driver\": \"%s\", "
                 "\"opencl\": \"%s\", \"profile\": \"%s\", \"precision\": %d, \"memory\": \"buffer\", "
                 "\"commit\": \"%s\", \"warmup\": %d, \"runs\": %d, \"results\": [",
                 a.test.c_str(), where.c_str(), dev.driver.c_str(), dev.version.c_str(), dev.profile.c_str(),
                 precision, commit.c_str(), a.warmup, a.runs);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(
          out,
          "%s\n  {\"mode\": \"%s\", \"M\": %d, \"K\": %d, \"N\": %d, \"avg_ms\": %.4f, "
          "\"median_ms\": %.4f, \"min_ms\": %.4f, \"stddev_ms\": %.4f, \"gflops\": %.2f, "
          "\"gpu_ms\": %.4f, \"gpu_median_ms\": %.4f, \"gflops_gpu\": %.2f, \"check_rel_err\": %.2e}",
          i ? "," : "", mode_tag(r.mode), r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min, r.ms.stddev,
          gflops(r.M, r.K, r.N, r.ms.mean), r.gpu.mean, r.gpu.median, gflops(r.M, r.K, r.N, r.gpu.mean),
          r.max_rel_err);
    }
    std::fprintf(out, "\n]}\n");
  }
  if (!a.plot.empty()) {
    write_plot(a.plot, rows,
               a.test + ", opencl " + dev.name + " (" + dev.profile + "), precision " +
                   std::to_string(precision) + ", " + commit);
    std::fprintf(stderr, "plot written to %s\n", a.plot.c_str());
  }
  if (failures) fail("{} configuration(s) failed the reference check and were not timed", failures);
}

void gemm_speed(GemmSpeedArgs a) {
  if (a.test == "speed/GemvBW" || a.test == "GemvBW") {
    if (parse_backend(a.backend.empty() ? a.backend_pos : a.backend) == Backend::kOpenCL) {
      std::vector<ShapeConfig> shapes;
      for (const auto& s : a.shapes) shapes.push_back(parse_shape(s));
      if (shapes.empty()) shapes.push_back({14336, 4096, 0});
      return gemv_bw_opencl(a.device, a.device_profile, shapes, a.format);
    }
    gemv_bw_main(cpu_threads(a.threads, a.third), a.shapes, a.format);
    return;
  }
  const auto modes = modes_for_test(a.test);
  if (!modes) {
    fail(
        "unknown test '{}': use speed/GemmSpeedFloat, speed/GemmSpeedInt8, speed/GemmSpeedInt4, "
        "speed/GemmSpeedInt4A8, speed/GemmSpeedAll or speed/GemvBW",
        a.test);
  }
  const Backend backend = parse_backend(a.backend.empty() ? a.backend_pos : a.backend);
  const int precision = parse_precision(a.precision.empty() ? a.precision_pos : a.precision);
  if (a.format != "text" && a.format != "md" && a.format != "csv" && a.format != "json") {
    fail("unknown format '{}': use text, md, csv or json", a.format);
  }

  std::vector<ShapeConfig> shapes;
  for (const auto& s : a.shapes) shapes.push_back(parse_shape(s));
  if (shapes.empty()) shapes = default_configs();
  std::vector<int> ms = a.ms.empty() ? default_m_values() : a.ms;
  for (int M : ms) {
    if (M <= 0) fail("M must be positive (got {})", M);
  }
  if (a.runs < 1 || a.warmup < 0) fail("--runs must be >= 1 and --warmup >= 0");

  if (backend != Backend::kCpu) {
    // GPU backends take the third argument as MNN's GPU-mode bitmask; validate it even where no such backend
    // is built, so a script's arguments are known good before it meets a build that has one.
    GpuMode g = parse_gpu_mode(a.third == -1 ? 0 : a.third);
    if (!a.tuning.empty()) g.tuning = parse_tuning(a.tuning);
    if (!a.gpu_memory.empty()) g.memory = parse_gpu_memory(a.gpu_memory);
    const int mask = a.third >= 0 ? a.third : (a.tuning.empty() && a.gpu_memory.empty() ? 0 : g.mask());
    if (backend == Backend::kOpenCL && kHaveOpencl)
      return gemm_speed_opencl(a, *modes, shapes, ms, precision, g, mask);
    std::fputs(test_banner(*modes).c_str(), stdout);
    std::fputs(backend_config_lines(backend, precision, mask).c_str(), stdout);
    std::printf("# gpu mode: memory %s, tuning %s\n", g.memory == kMemoryBuffer ? "BUFFER" : "IMAGE",
                tuning_name(g.tuning));
    std::printf("backend %d (%s) is not available in this build; skipped (no numbers are reported for it)\n",
                int(backend), backend_name(backend));
    return;
  }
  if (!a.tuning.empty() || !a.gpu_memory.empty())
    fail("--tuning and --gpu-memory apply to GPU backends only");

  const int threads = cpu_threads(a.threads, a.third);
  Isa isa = best_isa();
  if (a.isa == "scalar") {
    isa = Isa::kScalar;
  } else if (a.isa != "auto") {
    fail("unknown --isa '{}': use auto or scalar", a.isa);
  }
  int ncpu = 0;
  const std::string cpus = bench::cpu_set(&ncpu);
  const std::string commit = std::string(build_commit());
  const bool text = a.format == "text";
  FILE* out = stdout;
  FILE* prog = text ? stdout : stderr;  // the MNN lines: the output in text format, progress otherwise

  std::fputs(test_banner(*modes).c_str(), prog);
  std::fputs(backend_config_lines(Backend::kCpu, precision, threads).c_str(), prog);
  std::fprintf(prog,
               "# cpu: %s | isa: %s | threads: %d | cpuset: %s (%d cpus) | precision: %d (%s; fp32 "
               "compute on x86 as MNN) | commit: %s | warmup %d, runs %d\n",
               bench::cpu_model().c_str(), isa_name(isa), threads, cpus.c_str(), ncpu, precision,
               precision_name(precision), commit.c_str(), a.warmup, a.runs);
  if (threads > ncpu) std::fprintf(stderr, "warning: %d threads on %d allowed CPUs\n", threads, ncpu);

  ThreadPool pool(threads);
  std::vector<Row> rows;
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
      const std::vector<float> W = random_matrix(size_t(s.N) * s.K, uint32_t(s.K * 31 + s.N));
      const std::vector<float> A = random_matrix(size_t(maxM) * s.K, uint32_t(s.K + 7));
      Case c(mode, s.K, s.N, W);
      std::vector<float> C(size_t(maxM) * s.N);
      for (int M : run_ms) {
        std::fill(C.begin(), C.end(), NAN);
        c.run(A.data(), M, C.data(), &pool, isa);
        const double err = c.check(A.data(), M, C.data());
        if (!(err <= 1e-4)) {
          std::fprintf(prog, "  %-28s  M=%-5d K=%-5d N=%-5d  CHECK FAILED: relative error %.3g, not timed\n",
                       mode_tag(mode), M, s.K, s.N, err);
          ++failures;
          continue;
        }
        for (int i = 0; i < a.warmup; ++i) c.run(A.data(), M, C.data(), &pool, isa);
        std::vector<double> times;
        for (int i = 0; i < a.runs; ++i) {
          const auto t0 = Clock::now();
          c.run(A.data(), M, C.data(), &pool, isa);
          times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        const Row r{mode, M, s.K, s.N, bench::stats_of(times), err, false, {}};
        rows.push_back(r);
        std::fputs(cpu_line(mode_tag(mode), M, s.K, s.N, r.ms.mean).c_str(), prog);
        if (text) {
          std::fprintf(
              prog, "  # median=%.3f ms  min=%.3f ms  stddev=%.3f ms  max-GFLOPS=%.2f  check: rel err %.1e\n",
              r.ms.median, r.ms.min, r.ms.stddev, gflops(M, s.K, s.N, r.ms.min), err);
        }
        std::fflush(prog);
      }
    }
  }

  if (a.format == "md") {
    std::fprintf(out, "\ncpu: %s, isa: %s, threads: %d, cpuset: %s, precision: %d, commit: %s\n\n",
                 bench::cpu_model().c_str(), isa_name(isa), threads, cpus.c_str(), precision, commit.c_str());
    std::fprintf(
        out,
        "| mode | M | K | N | avg ms | median ms | min ms | stddev ms | GFLOPS (avg) | GFLOPS (median) |\n");
    std::fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const Row& r : rows) {
      std::fprintf(out, "| %s | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f |\n", mode_tag(r.mode),
                   r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min, r.ms.stddev,
                   gflops(r.M, r.K, r.N, r.ms.mean), gflops(r.M, r.K, r.N, r.ms.median));
    }
  } else if (a.format == "csv") {
    std::fprintf(
        out,
        "mode,M,K,N,avg_ms,median_ms,min_ms,stddev_ms,gflops_avg,gflops_median,check_rel_err,backend,"
        "precision,threads,cpuset,isa,cpu,commit\n");
    for (const Row& r : rows) {
      std::fprintf(out, "%s,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%.2e,cpu,%d,%d,\"%s\",%s,\"%s\",%s\n",
                   mode_tag(r.mode), r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min, r.ms.stddev,
                   gflops(r.M, r.K, r.N, r.ms.mean), gflops(r.M, r.K, r.N, r.ms.median), r.max_rel_err,
                   precision, threads, cpus.c_str(), isa_name(isa), bench::cpu_model().c_str(),
                   commit.c_str());
    }
  } else if (a.format == "json") {
    std::fprintf(
        out,
        "{\"test\": \"%s\", \"backend\": \"cpu\", \"precision\": %d, \"threads\": %d, \"cpuset\": \"%s\", "
        "\"isa\": \"%s\", \"cpu\": \"%s\", \"commit\": \"%s\", \"warmup\": %d, \"runs\": %d, \"results\": [",
        a.test.c_str(), precision, threads, cpus.c_str(), isa_name(isa), bench::cpu_model().c_str(),
        commit.c_str(), a.warmup, a.runs);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(
          out,
          "%s\n  {\"mode\": \"%s\", \"M\": %d, \"K\": %d, \"N\": %d, \"avg_ms\": %.4f, \"median_ms\": %.4f, "
          "\"min_ms\": %.4f, \"stddev_ms\": %.4f, \"gflops\": %.2f, \"check_rel_err\": %.2e}",
          i ? "," : "", mode_tag(r.mode), r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min, r.ms.stddev,
          gflops(r.M, r.K, r.N, r.ms.mean), r.max_rel_err);
    }
    std::fprintf(out, "\n]}\n");
  }
  if (!a.plot.empty()) {
    write_plot(a.plot, rows,
               a.test + ", cpu " + isa_name(isa) + ", " + std::to_string(threads) + " threads, precision " +
                   std::to_string(precision) + ", " + commit);
    std::fprintf(stderr, "plot written to %s\n", a.plot.c_str());
  }
  if (failures) fail("{} configuration(s) failed the reference check and were not timed", failures);
}

}  // namespace

void register_gemm_speed(CLI::App& app) {
  auto a = std::make_shared<GemmSpeedArgs>();
  CLI::App* sub =
      app.add_subcommand("gemm-speed", "MNN GemmSpeed GEMM throughput benchmark (CPU and OpenCL backends)");
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
  sub->add_option("--device", a->device, "OpenCL device index (see `tilellm devices`)");
  sub->add_option("--device-profile", a->device_profile,
                  "OpenCL: clamp the device to a GPU family's limits: none, powervr-rogue, mali-valhall, "
                  "adreno-7xx");
  sub->add_option("--shape", a->shapes, "K,N[,maxM] instead of the default shapes (repeatable)");
  sub->add_option("--m", a->ms, "M values instead of 1,8,32,128,512")->delimiter(',');
  sub->add_option("--format", a->format, "text (MNN lines) | md | csv | json");
  sub->add_option("--plot", a->plot, "write GFLOPS against M as a self-contained SVG");
  sub->add_option("--isa", a->isa, "auto | scalar (the portable path)");
  sub->add_option("--warmup", a->warmup, "warm-up runs (MNN: 3)");
  sub->add_option("--runs", a->runs, "timed runs (MNN: 10)");
  sub->callback([a] { gemm_speed(*a); });
}

}  // namespace tilellm::cli
