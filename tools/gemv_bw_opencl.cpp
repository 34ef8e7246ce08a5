// `tilellm gemv-bw --backend opencl` (or 3): the decode GEMV y = W x (M = 1) on the OpenCL backend's matvec
// kernels, as achieved bandwidth over the weight bytes, against peaks measured on the device in the same run.
//
// The CPU version (cmd_gemv_bw.cpp) uses block-64 asymmetric weights of 8 and 4 bits. The device has a 4-bit
// block-64 format (INT4B64, --weights int4b64) but no 8-bit block-64 one, so the 8-bit row is INT8B0 (one
// scale and offset per output row over all of K, --weights int8b0); the output says so. Both are converted
// at upload exactly as the CPU converts them, and one output per weight copy is checked against a
// double-precision reference over those exact weights before anything is timed.
// Bytes counted: the device rows the kernel reads (codes plus fp16 (scale, offset) pairs, each row padded to
// 16 bytes: kernels/quants.cl).
// us/iter: the matvec kernel's device time (profiling timestamps), median of the iterations.
// Cold L2: the iterations alternate among copies of the weights whose total is at least twice the device's
// global memory cache (CL_DEVICE_GLOBAL_MEM_CACHE_SIZE), so a copy is evicted before it is read again. When
// that would take more than kMaxCopies copies (weights much smaller than the cache), kMaxCopies alternate
// and a device copy of 1.5x the cache runs between iterations instead (outside the timed kernel); the
// output says which. A driver may report less than its last-level cache (NVIDIA's reports 4 MiB on an H200,
// whose L2 is 50 MB), so at least kMinCache is assumed.
// Peaks, best of 5, on buffers of max(4x that cache, 256 MiB) (within the device's allocation limit):
// clEnqueueCopyBuffer (read + write bytes counted) and a pure read (kernels/bandwidth.cl: the best of a
// coalesced loop, a per-item contiguous loop and two loads per item; every item writes one float), both
// timed by profiling events. Beside each matvec row, the same two on a buffer of the weights' size ("read W",
// "copy W"): a kernel of a few tens of µs pays its launch and drain, so these are what any kernel reading
// those bytes can reach on this device (docs/OPENCL.md has the H200's numbers).
#include "gemv_bw_opencl.h"

#include <cmath>
#include <cstdio>
#include <random>

#include "bench/bench_env.h"
#include "bench/gemm_speed.h"
#include "commands.h"
#include "format/error.h"
#ifdef TILELLM_HAVE_OPENCL
#include "backends/opencl/error.h"
#include "backends/opencl/opencl_backend.h"
#endif

namespace tilellm::cli {

#ifdef TILELLM_HAVE_OPENCL
namespace {

using namespace tilellm::gemm;

// Device time in ms of a profiled event (waits for it).
double event_ms(cl_event ev) {
  opencl::check(clWaitForEvents(1, &ev), "clWaitForEvents");
  cl_ulong start = 0, end = 0;
  opencl::check(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
                "clGetEventProfilingInfo");
  opencl::check(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
                "clGetEventProfilingInfo");
  clReleaseEvent(ev);
  return double(end - start) * 1e-6;
}

// A device copy and pure reads of a buffer, timed by profiling events on the backend's own queue.
struct Bandwidth {
  OpenclBackend& be;
  opencl::ProgramHandle prog;
  opencl::Kernel strided, blocked, pairs;
  opencl::Buffer out;
  size_t items;  // the looping read kernels' global size: 2048 items per compute unit

  explicit Bandwidth(OpenclBackend& b)
      : be(b),
        prog(b.runtime().build({"bandwidth"})),
        strided(b.runtime().kernel(prog, "read_sum_strided")),
        blocked(b.runtime().kernel(prog, "read_sum_blocked")),
        pairs(b.runtime().kernel(prog, "read_sum_pairs")),
        items(std::max<size_t>(64, size_t(b.caps().compute_units) * 2048)) {}

  static constexpr int kReadKernels = 3;

  // GB/s of read kernel k (0 strided, 1 blocked, 2 pairs) over the first `bytes` of src (a multiple of 16).
  double read(int k, const opencl::Buffer& src, size_t bytes) {
    opencl::Runtime& rt = be.runtime();
    const cl_ulong n4 = bytes / 16;
    const size_t pair_items = size_t((n4 + 1) / 2);
    if (out.bytes < std::max(items, pair_items) * sizeof(float))
      out = rt.alloc(std::max(items, pair_items) * sizeof(float));
    const opencl::Kernel& kern = k == 0 ? strided : k == 1 ? blocked : pairs;
    opencl::set_arg(kern, 0, src);
    opencl::set_arg(kern, 1, n4);
    opencl::set_arg(kern, 2, out);
    be.reset_kernel_times();
    const size_t global[1] = {k == 2 ? pair_items : items};
    rt.launch(kern, 1, global, nullptr);
    double ns = 0.0;
    for (const KernelTime& t : be.kernel_times()) ns += t.ns;
    return double(bytes) / (ns * 1e-9) / 1e9;
  }

  // GB/s (read + write bytes) of clEnqueueCopyBuffer of the first `bytes` of src to dst.
  double copy(const opencl::Buffer& src, const opencl::Buffer& dst, size_t bytes) {
    cl_event ev = nullptr;
    opencl::check(
        clEnqueueCopyBuffer(be.runtime().queue(), src.get(), dst.get(), 0, 0, bytes, 0, nullptr, &ev),
        "clEnqueueCopyBuffer");
    return 2.0 * double(bytes) / (event_ms(ev) * 1e-3) / 1e9;
  }
};

constexpr cl_uchar kFill = 1;
constexpr cl_ulong kMinCache = cl_ulong(64) << 20;  // assumed at least (see the top of the file)

// Best of 5 over one large buffer: the device's copy (read + write) and pure-read peaks.
void measure_peaks(OpenclBackend& be, size_t bytes, double& copy_gbs, double& read_gbs) {
  opencl::Runtime& rt = be.runtime();
  bytes = bytes / 64 * 64;
  opencl::Buffer src = rt.alloc(bytes), dst = rt.alloc(bytes);
  opencl::check(clEnqueueFillBuffer(rt.queue(), src.get(), &kFill, 1, 0, bytes, 0, nullptr, nullptr),
                "clEnqueueFillBuffer");
  rt.finish();
  Bandwidth bw(be);
  copy_gbs = read_gbs = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    copy_gbs = std::max(copy_gbs, bw.copy(src, dst, bytes));
    for (int k = 0; k < Bandwidth::kReadKernels; ++k) read_gbs = std::max(read_gbs, bw.read(k, src, bytes));
  }
}

// The device row bytes of a converted K-row (kernels/quants.cl): codes, then 4 bytes of (scale, offset) per
// group, padded to 16.
size_t row_bytes(WeightsMode wm, int K) {
  const size_t codes = wm == WeightsMode::Int4B64 ? size_t(K) / 2 : size_t(K);
  const size_t groups = wm == WeightsMode::Int4B64 ? size_t(K + 63) / 64 : 1;
  return (codes + 4 * groups + 15) / 16 * 16;
}

}  // namespace

void gemv_bw_opencl(int device, const std::string& profile, const std::vector<ShapeConfig>& shapes,
                    const std::string& format, int peak_mib) {
  if (format != "text" && format != "md") fail("gemv-bw prints text or md tables (got '{}')", format);
  const std::vector<opencl::DeviceRef> devs = opencl::list_devices();
  if (device < 0 || size_t(device) >= devs.size())
    fail("OpenCL device {} does not exist ({} found; see `tilellm devices`)", device, devs.size());
  cl_ulong cache = 0;
  opencl::check(clGetDeviceInfo(devs[size_t(device)].device, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof cache,
                                &cache, nullptr),
                "clGetDeviceInfo(CL_DEVICE_GLOBAL_MEM_CACHE_SIZE)");
  cache = std::max(cache, kMinCache);
  int max_k = 64, max_n = 1;
  for (const ShapeConfig& s : shapes) {
    if (s.K % 64 != 0) fail("gemv-bw uses block 64: K={} is not a multiple of 64", s.K);
    max_k = std::max(max_k, s.K);
    max_n = std::max(max_n, s.N);
  }
  const std::string commit = std::string(build_commit());
  constexpr int kIters = 10, kMaxCopies = 8;
  bool header = false;
  double read_gbs = 0.0, copy_gbs = 0.0;
  for (WeightsMode wm : {WeightsMode::Int8B0, WeightsMode::Int4B64}) {
    OpenclBackendOptions o;
    o.device = device;
    o.profile = profile;
    o.max_tokens = 1;
    o.max_in_elems = max_k;
    o.max_out_elems = max_n;
    o.max_width = 64;
    o.weights = wm;
    o.profiling = true;
    o.self_check = false;  // checked below, before timing
    OpenclBackend be(o);
    if (!header) {
      const opencl::Capabilities& c = be.caps();
      const size_t peak_bytes = std::min<size_t>(
          peak_mib > 0 ? size_t(peak_mib) << 20 : std::max<size_t>(size_t(cache) * 4, size_t(256) << 20),
          c.max_alloc_bytes / 2);
      measure_peaks(be, peak_bytes, copy_gbs, read_gbs);
      std::printf("# gemv-bw | opencl device %d: %s | driver: %s | %s | profile: %s | commit: %s\n", device,
                  c.name.c_str(), c.driver_version.c_str(), c.device_version.c_str(), c.profile.c_str(),
                  commit.c_str());
      std::printf(
          "# peak (same run, device timestamps): copy %.2f GB/s (clEnqueueCopyBuffer, read+write), pure read "
          "%.2f GB/s (read_sum kernels) over %.0f MiB; global memory cache %.1f MiB\n",
          copy_gbs, read_gbs, double(peak_bytes) / (1 << 20), double(cache) / (1 << 20));
      std::printf(
          "# 8-bit row: int8b0 (one scale/offset per output row; the device has no 8-bit block-64 format); "
          "4-bit row: int4b64 (block 64, as the CPU's q4b64)\n");
      std::printf(
          "| type | thr | us/iter | W MiB | bytes/elem | eff GB/s | %%peak | GFLOPS | AI | copies | %%copy | "
          "read W GB/s | copy W GB/s |\n");
      std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
      header = true;
    }
    for (const ShapeConfig& s : shapes) {
      const double bytes = double(row_bytes(wm, s.K)) * s.N;
      // Copies of the weights, so that the iterations' total reaches twice the cache: copy i is the matrix
      // starting i rows into one host array (distinct addresses, distinct device buffers).
      const double want = std::ceil(2.0 * double(cache) / bytes) + 1;
      const int copies = int(std::clamp(want, 2.0, double(kMaxCopies)));
      const bool flush = want > kMaxCopies;
      std::mt19937 rng(uint32_t(s.K + s.N));
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      std::vector<float> W(size_t(s.N + copies) * s.K), x(size_t(s.K)), y(size_t(s.N));
      for (auto& v : W) v = d(rng);
      for (auto& v : x) v = d(rng);
      std::vector<Weight> ws(static_cast<size_t>(copies));
      for (int i = 0; i < copies; ++i) {
        Weight& w = ws[size_t(i)];
        w.name = fmt::format("gemv-bw copy {}", i);
        w.type = GgmlType::F32;
        w.data = reinterpret_cast<const uint8_t*>(W.data() + size_t(i) * s.K);
        w.n_in = s.K;
        w.n_out = s.N;
        w.row_bytes = size_t(s.K) * sizeof(float);
        be.upload_weight(w);
      }
      const TileKind kind = wm == WeightsMode::Int4B64 ? TileKind::Int4B64 : TileKind::Int8B0;
      std::vector<float> exact(size_t(s.K));
      for (int i = 0; i < copies; ++i) {
        be.matmul(ws[size_t(i)], x.data(), 1, y.data());
        for (int n : {0, s.N / 3, s.N - 1}) {
          dequantize_row_asym(kind, W.data() + size_t(i + n) * s.K, s.K, exact.data());
          double ref = 0, mag = 0;
          for (int k = 0; k < s.K; ++k) {
            ref += double(exact[size_t(k)]) * x[size_t(k)];
            mag += std::fabs(double(exact[size_t(k)]) * x[size_t(k)]);
          }
          if (!(std::fabs(y[size_t(n)] - ref) <= 1e-4 * mag))
            fail("gemv-bw: the OpenCL {} matvec failed its check (copy {}, row {})", weights_mode_name(wm), i,
                 n);
        }
      }
      // The flush: a device copy of 1.5x the cache (reads and writes evict everything), between iterations.
      opencl::Buffer fsrc, fdst;
      const size_t fbytes = size_t(cache) * 3 / 2;
      if (flush) {
        fsrc = be.runtime().alloc(fbytes);
        fdst = be.runtime().alloc(fbytes);
      }
      std::vector<double> us;
      for (int it = 0; it < kIters + 2; ++it) {
        if (flush) {
          opencl::check(clEnqueueCopyBuffer(be.runtime().queue(), fsrc.get(), fdst.get(), 0, 0, fbytes, 0,
                                            nullptr, nullptr),
                        "clEnqueueCopyBuffer");
        }
        be.reset_kernel_times();  // finishes the queue (the flush too)
        be.matmul(ws[size_t(it % copies)], x.data(), 1, y.data());
        double ns = 0.0;
        for (const KernelTime& t : be.kernel_times()) ns += t.ns;
        if (it >= 2) us.push_back(ns * 1e-3);
      }
      // The same bytes read and copied by themselves, cold as the weights are (their own copies, the same
      // flush): what one kernel can do with a buffer of this size on this device, launch and drain
      // included, next to the large-buffer peaks above.
      const size_t wbytes = size_t(bytes) / 16 * 16;
      std::vector<opencl::Buffer> plain(static_cast<size_t>(copies));
      for (opencl::Buffer& b : plain) {
        b = be.runtime().alloc(wbytes);
        opencl::check(
            clEnqueueFillBuffer(be.runtime().queue(), b.get(), &kFill, 1, 0, wbytes, 0, nullptr, nullptr),
            "clEnqueueFillBuffer");
      }
      const opencl::Buffer plain_dst = be.runtime().alloc(wbytes);
      // Every operation reads the next copy, so none finds its bytes in the cache from the one before.
      Bandwidth bw(be);
      std::vector<double> ops[Bandwidth::kReadKernels + 1];  // the read kernels', then the copy's GB/s
      for (int it = 0, next = 0; it < kIters + 2; ++it) {
        for (int op = 0; op <= Bandwidth::kReadKernels; ++op) {
          if (flush) {
            opencl::check(clEnqueueCopyBuffer(be.runtime().queue(), fsrc.get(), fdst.get(), 0, 0, fbytes, 0,
                                              nullptr, nullptr),
                          "clEnqueueCopyBuffer");
          }
          const opencl::Buffer& src = plain[size_t(next++ % copies)];
          const double v =
              op < Bandwidth::kReadKernels ? bw.read(op, src, wbytes) : bw.copy(src, plain_dst, wbytes);
          if (it >= 2) ops[op].push_back(v);
        }
      }
      double read_w = 0.0;
      for (int k = 0; k < Bandwidth::kReadKernels; ++k)
        read_w = std::max(read_w, bench::stats_of(ops[k]).median);
      const double copy_w = bench::stats_of(ops[Bandwidth::kReadKernels]).median;
      const double t = bench::stats_of(us).median;
      const double flops = 2.0 * s.K * s.N;
      const double gbs = bytes / (t * 1e-6) / 1e9;
      std::printf(
          "| %s %dx%d | gpu | %.1f | %.2f | %.4f | %.2f | %.1f | %.2f | %.2f | %d%s | %.1f | %.2f | %.2f |\n",
          weights_mode_name(wm), s.N, s.K, t, bytes / (1 << 20), bytes / (double(s.K) * s.N), gbs,
          100.0 * gbs / read_gbs, flops / (t * 1e-6) / 1e9, flops / bytes, copies, flush ? " + flush" : "",
          100.0 * gbs / copy_gbs, read_w, copy_w);
      std::fflush(stdout);
    }
  }
  std::printf(
      "# us/iter: median of %d iterations of the matvec kernel's device time, each on the next of `copies` "
      "weight copies (together over twice the cache: cold L2; \"+ flush\": the weights are too small for "
      "that "
      "with %d copies, so a device copy of 1.5x the cache runs between iterations); %%peak against the pure "
      "read peak, %%copy against the copy peak; read W / copy W: the weight bytes alone read by the read_sum "
      "kernels (the best kernel's median) and copied by clEnqueueCopyBuffer (read + write counted, median), "
      "each of %d runs on the next copy (cold likewise)\n",
      kIters, kMaxCopies, kIters);
}

#else

void gemv_bw_opencl(int, const std::string&, const std::vector<gemm::ShapeConfig>&, const std::string&, int) {
  fail("this build has no OpenCL backend (CMake found no OpenCL headers and ICD loader when configuring it)");
}

#endif

}  // namespace tilellm::cli
