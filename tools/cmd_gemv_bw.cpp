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
// Peaks: memcpy (read + write bytes counted) and a pure read (sum over a buffer), each over 4x the LLC, on
// the same threads.
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

// Best of 5: GB/s of memcpy (read + write) and of a pure read.
void measure_peaks(ThreadPool& pool, size_t bytes, double& copy_gbs, double& read_gbs) {
  AlignedBuffer src(bytes), dst(bytes);
  std::memset(src.as<void>(), 1, bytes);
  const int64_t chunk = 1 << 20;
  const int64_t n = int64_t(bytes) / chunk;
  copy_gbs = read_gbs = 0.0;
  std::vector<uint64_t> sink(size_t(pool.size()) * 8, 0);
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
      std::memcpy(dst.as<uint8_t>() + b * chunk, src.as<uint8_t>() + b * chunk, size_t((e - b) * chunk));
    });
    copy_gbs = std::max(copy_gbs, 2.0 * double(n * chunk) / seconds_since(t0) / 1e9);
    t0 = Clock::now();
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int t) {
      sink[size_t(t) * 8] += bench::read_stream(src.as<uint8_t>() + b * chunk, size_t((e - b) * chunk));
    });
    read_gbs = std::max(read_gbs, double(n * chunk) / seconds_since(t0) / 1e9);
  }
  if (sink[0] == 42) std::fprintf(stderr, " ");  // keep the sums alive
}

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
  AlignedBuffer flush(llc * 3 / 2);
  double copy_gbs = 0, read_gbs = 0;
  measure_peaks(pool, std::max<size_t>(llc * 4, size_t(256) << 20) / 2, copy_gbs, read_gbs);
  std::printf("# gemv-bw | cpu: %s | isa: %s | threads: %d | cpuset: %s | commit: %s\n",
              bench::cpu_model().c_str(), isa_name(isa), threads, cpus.c_str(), build_commit());
  std::printf(
      "# peak (same run, %d threads): memcpy %.2f GB/s (read+write), pure read %.2f GB/s; LLC %.0f MiB, "
      "flushed between iterations\n",
      threads, copy_gbs, read_gbs, double(llc) / (1 << 20));
  std::printf("| type | thr | us/iter | W MiB | bytes/elem | eff GB/s | %%peak | GFLOPS | AI |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  constexpr int kIters = 10;
  for (const ShapeConfig& s : shapes) {
    if (s.K % 64 != 0) fail("gemv-bw uses block 64: K={} is not a multiple of 64", s.K);
    std::mt19937 rng(uint32_t(s.K + s.N));
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> W(size_t(s.N) * s.K), x(size_t(s.K)), y(size_t(s.N));
    for (auto& v : W) v = d(rng);
    for (auto& v : x) v = d(rng);
    // Block 0 = one (scale, offset) pair per output channel over all of K.
    for (const auto& [name, bits, block] :
         {std::tuple{"q8b64", 8, 64}, {"q8b0", 8, 0}, {"q4b64", 4, 64}, {"q3b64", 3, 64}, {"q2b64", 2, 64}}) {
      const QuantMatrix w = quantize_bits(W.data(), s.K, s.N, bits, block);
      QuantActs acts;
      acts.resize(1, w);
      // Check a few outputs against the double reference before timing.
      quantize_acts(x.data(), 1, s.K, acts, &pool);
      gemm_quant(w, acts, y.data(), &pool, isa);
      for (int n : {0, s.N / 3, s.N - 1}) {
        double ref = 0, mag = 0;
        for (int k = 0; k < s.K; ++k) {
          const double t = double(acts.scales.as<float>()[0]) * acts.q.as<int8_t>()[k] * w.dequantize(n, k);
          ref += t;
          mag += std::fabs(t);
        }
        if (!(std::fabs(y[size_t(n)] - ref) <= 1e-4 * mag)) fail("gemv-bw: {} kernel failed its check", name);
      }
      std::vector<double> us;
      for (int it = 0; it < kIters + 2; ++it) {
        flush_caches(flush, pool);
        const auto t0 = Clock::now();
        quantize_acts(x.data(), 1, s.K, acts, &pool);
        gemm_quant(w, acts, y.data(), &pool, isa);
        if (it >= 2) us.push_back(seconds_since(t0) * 1e6);
      }
      const double t = bench::stats_of(us).median;
      const double bytes = double(w.code_bytes() + w.param_bytes());
      const double flops = 2.0 * s.K * s.N;
      const double gbs = bytes / (t * 1e-6) / 1e9;
      std::printf("| %s %dx%d | %d | %.1f | %.2f | %.4f | %.2f | %.1f | %.2f | %.2f |\n", name, s.N, s.K,
                  threads, t, bytes / (1 << 20), bytes / (double(s.K) * s.N), gbs, 100.0 * gbs / read_gbs,
                  flops / (t * 1e-6) / 1e9, flops / bytes);
      std::fflush(stdout);
    }
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
