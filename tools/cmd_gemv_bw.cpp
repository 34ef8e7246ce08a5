// `tilellm gemv-bw` (also `tilellm gemm-speed speed/GemvBW`): decode GEMV y = W x (M = 1) as achieved
// bandwidth over the weight bytes, against memory peaks measured in the same run.
//
// Default W is 4096 x 14336 (N x K: a Llama-3-8B FFN down projection). Weights are block-64 asymmetric, 8 and
// 4 bits (MNN's GemvBWTest rows), 8 bits with one block over all of K (Int8-Block0, gemm-speed's int8b0), and
// block-64 3 and 2 bits; the bytes counted are the packed codes plus one fp16 scale and one fp16 offset per
// block (what the kernel reads; 8.5, 4.5, 8 + 32 / K, 3.5 and 2.5 bits per weight). Between iterations a
// buffer larger than the last-level cache is written, so every iteration reads its weights from DRAM. An
// iteration is what decode runs: the activation quantization plus the integer GEMV.
//   eff GB/s = weight bytes / time;  %peak = eff / read peak;  GFLOPS = 2*K*N / time;  AI = 2*K*N / bytes
// Peaks: memcpy (read + write bytes counted) and a pure read (sum over a buffer), each over 2x the LLC, on
// the same threads, measured in every round of the rows' iterations; the table uses their medians.
// --backend opencl (or 3): the same table from the OpenCL backend's matvec kernels (gemv_bw_opencl.cpp).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <tuple>

#include "bench/bench_env.h"
#include "bench/gemm.h"
#include "bench/gemm_speed.h"
#include "commands.h"
#include "format/error.h"
#include "gemv_bw_opencl.h"
#include "runtime/bench.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm::cli {
namespace {

using namespace tilellm::gemm;
using Clock = std::chrono::steady_clock;

size_t llc_bytes() {
  for (int idx = 3; idx >= 2; --idx) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/size");
    std::string s;
    if (in >> s && !s.empty()) {
      size_t v = std::stoull(s);
      if (s.back() == 'K') v <<= 10;
      if (s.back() == 'M') v <<= 20;
      return v;
    }
  }
  return size_t(64) << 20;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Writes every cache line of buf (over the LLC) so the next iteration starts with cold caches.
void flush_caches(AlignedBuffer& buf, ThreadPool& pool) {
  const int64_t n = int64_t(buf.size() / 64);
  uint8_t* p = buf.as<uint8_t>();
  pool.parallel_for(n, 4096, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) p[i * 64] = uint8_t(p[i * 64] + 1);
  });
}

// One round of the peaks: GB/s of a pure read of src, then of a memcpy of it (read + write counted), each
// buffer larger than the LLC (so each also leaves the caches cold for what runs next). The read goes first:
// after the copy it would share DRAM with the write-back of the copy's dirty lines.
void peak_round(ThreadPool& pool, AlignedBuffer& src, AlignedBuffer& dst, double& copy_gbs,
                double& read_gbs) {
  const int64_t chunk = 1 << 20;
  const int64_t n = int64_t(src.size()) / chunk;
  std::vector<uint64_t> sink(size_t(pool.size()) * 8, 0);
  auto t0 = Clock::now();
  pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int t) {
    sink[size_t(t) * 8] += bench::read_stream(src.as<uint8_t>() + b * chunk, size_t((e - b) * chunk));
  });
  read_gbs = double(n * chunk) / seconds_since(t0) / 1e9;
  t0 = Clock::now();
  pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
    std::memcpy(dst.as<uint8_t>() + b * chunk, src.as<uint8_t>() + b * chunk, size_t((e - b) * chunk));
  });
  copy_gbs = 2.0 * double(n * chunk) / seconds_since(t0) / 1e9;
  if (sink[0] == 42) std::fprintf(stderr, " ");  // keep the sums alive
}

// One row of the table: a weight format at one shape, quantized and checked, and its timed iterations.
struct GemvRow {
  std::string name;
  int K = 0, N = 0;
  QuantMatrix w;
  QuantActs acts;
  std::vector<float> x, y;
  std::vector<double> us;
};

}  // namespace

void gemv_bw_main(int threads, const std::vector<std::string>& shape_args, const std::string& format) {
  std::vector<ShapeConfig> shapes;
  for (const auto& s : shape_args) shapes.push_back(parse_shape(s));
  if (shapes.empty()) shapes.push_back({14336, 4096, 0});
  if (format != "text" && format != "md") fail("gemv-bw prints text or md tables (got '{}')", format);
  const Isa isa = best_isa();
  int ncpu = 0;
  const std::string cpus = bench::cpu_set(&ncpu);
  ThreadPool pool(threads);
  const size_t llc = llc_bytes();

  // Every row is quantized and checked against the double reference first.
  std::vector<GemvRow> rows;
  for (const ShapeConfig& s : shapes) {
    if (s.K % 64 != 0) fail("gemv-bw uses block 64: K={} is not a multiple of 64", s.K);
    std::mt19937 rng(uint32_t(s.K + s.N));
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> W(size_t(s.N) * s.K), x(size_t(s.K));
    for (auto& v : W) v = d(rng);
    for (auto& v : x) v = d(rng);
    // Block 0 = one (scale, offset) pair per output channel over all of K.
    for (const auto& [name, bits, block] :
         {std::tuple{"q8b64", 8, 64}, {"q8b0", 8, 0}, {"q4b64", 4, 64}, {"q3b64", 3, 64}, {"q2b64", 2, 64}}) {
      GemvRow& r = rows.emplace_back();
      r.name = name;
      r.K = s.K;
      r.N = s.N;
      r.w = quantize_bits(W.data(), s.K, s.N, bits, block);
      r.acts.resize(1, r.w);
      r.x = x;
      r.y.assign(size_t(s.N), 0.0f);
      quantize_acts(r.x.data(), 1, s.K, r.acts, &pool);
      gemm_quant(r.w, r.acts, r.y.data(), &pool, isa);
      for (int n : {0, s.N / 3, s.N - 1}) {
        double ref = 0, mag = 0;
        for (int k = 0; k < s.K; ++k) {
          const double t =
              double(r.acts.scales.as<float>()[0]) * r.acts.q.as<int8_t>()[k] * r.w.dequantize(n, k);
          ref += t;
          mag += std::fabs(t);
        }
        if (!(std::fabs(r.y[size_t(n)] - ref) <= 1e-4 * mag))
          fail("gemv-bw: {} kernel failed its check", name);
      }
    }
  }

  // Rounds: the peaks, then one cold iteration of every row. A slow spell of the machine then falls on the
  // peaks and the rows alike instead of on whichever was measured during it (with the peaks measured once,
  // before the rows, q4b64 gave 75% to 105% of the read peak from run to run on a shared VM; in rounds,
  // 79% to 93%).
  constexpr int kWarm = 2, kIters = 10;
  AlignedBuffer flush(llc * 3 / 2);
  const size_t peak_bytes = std::max<size_t>(llc * 4, size_t(256) << 20) / 2;
  AlignedBuffer src(peak_bytes), dst(peak_bytes);  // zero-filled: every page is touched before the timing
  std::vector<double> copy_r, read_r;
  for (int it = 0; it < kWarm + kIters; ++it) {
    double c = 0, rd = 0;
    peak_round(pool, src, dst, c, rd);
    if (it >= kWarm) {
      copy_r.push_back(c);
      read_r.push_back(rd);
    }
    for (GemvRow& r : rows) {
      flush_caches(flush, pool);
      const auto t0 = Clock::now();
      quantize_acts(r.x.data(), 1, r.K, r.acts, &pool);
      gemm_quant(r.w, r.acts, r.y.data(), &pool, isa);
      if (it >= kWarm) r.us.push_back(seconds_since(t0) * 1e6);
    }
  }
  const double copy_gbs = bench::stats_of(copy_r).median, read_gbs = bench::stats_of(read_r).median;
  std::printf("# gemv-bw | cpu: %s | isa: %s | threads: %d | cpuset: %s | commit: %s\n",
              bench::cpu_model().c_str(), isa_name(isa), threads, cpus.c_str(), build_commit());
  std::printf(
      "# peak (same run, %d threads, median of the %d rounds the rows ran in): "
      "memcpy %.2f GB/s (read+write), pure read %.2f GB/s (best %.2f / %.2f); "
      "LLC %.0f MiB, flushed between iterations\n",
      threads, kIters, copy_gbs, read_gbs, *std::max_element(copy_r.begin(), copy_r.end()),
      *std::max_element(read_r.begin(), read_r.end()), double(llc) / (1 << 20));
  std::printf("| type | thr | us/iter | W MiB | bytes/elem | eff GB/s | %%peak | GFLOPS | AI |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const GemvRow& r : rows) {
    const double t = bench::stats_of(r.us).median;
    const double bytes = double(r.w.code_bytes() + r.w.param_bytes());
    const double flops = 2.0 * r.K * r.N;
    const double gbs = bytes / (t * 1e-6) / 1e9;
    std::printf("| %s %dx%d | %d | %.1f | %.2f | %.4f | %.2f | %.1f | %.2f | %.2f |\n", r.name.c_str(), r.N,
                r.K, threads, t, bytes / (1 << 20), bytes / (double(r.K) * r.N), gbs, 100.0 * gbs / read_gbs,
                flops / (t * 1e-6) / 1e9, flops / bytes);
  }
  std::printf("# us/iter: median of %d cold-cache iterations (activation quantization + GEMV)\n", kIters);
}

void register_gemv_bw(CLI::App& app) {
  struct Args {
    int threads = 1;
    std::vector<std::string> shapes;
    std::string format = "text";
    std::string backend = "cpu", device_profile = "none";
    int device = 0, peak_mib = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("gemv-bw", "decode GEMV bandwidth against the memcpy/read roofline");
  sub->add_option("-t,--threads", a->threads, "CPU threads")->check(CLI::Range(1, 4096));
  sub->add_option("--shape", a->shapes, "K,N (repeatable; default 14336,4096)");
  sub->add_option("--backend", a->backend, "cpu (0) or opencl (3)");
  sub->add_option("--device", a->device, "OpenCL device index (see `tilellm devices`)");
  sub->add_option("--device-profile", a->device_profile,
                  "OpenCL: clamp the device to a GPU family's limits: none, powervr-rogue, mali-valhall, "
                  "adreno-7xx");
  sub->add_option(
      "--peak-mib", a->peak_mib,
      "OpenCL: size of the peak measurement's buffers in MiB (default, or 0: max(4x the device's cache, "
      "256))");
  sub->callback([a] {
    if (a->peak_mib < 0) fail("--peak-mib must be a positive size in MiB (got {})", a->peak_mib);
    const gemm::Backend b = gemm::parse_backend(a->backend);
    if (b == gemm::Backend::kCpu) return gemv_bw_main(a->threads, a->shapes, a->format);
    if (b != gemm::Backend::kOpenCL)
      fail("gemv-bw runs on backend 0 (cpu) or 3 (opencl), not {}", a->backend);
    std::vector<gemm::ShapeConfig> shapes;
    for (const auto& s : a->shapes) shapes.push_back(parse_shape(s));
    if (shapes.empty()) shapes.push_back({14336, 4096, 0});
    gemv_bw_opencl(a->device, a->device_profile, shapes, a->format, a->peak_mib);
  });
}

}  // namespace tilellm::cli
