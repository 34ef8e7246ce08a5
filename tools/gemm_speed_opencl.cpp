// gemm-speed on the OpenCL backend (see gemm_speed_opencl.h for what is measured).
#include "gemm_speed_opencl.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <set>

#include "backends/cpu/tiled_weight.h"
#include "format/error.h"
#include "format/fp16.h"
#ifdef TILELLM_HAVE_OPENCL
#include "backends/opencl/opencl_backend.h"
#endif

namespace tilellm::cli {

#ifdef TILELLM_HAVE_OPENCL
namespace {

using namespace tilellm::gemm;
using Clock = std::chrono::steady_clock;

std::vector<float> random_matrix(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = d(rng);
    while (x == 0.0f);
  }
  return v;
}

std::vector<int> sample(int n, int count) {
  std::set<int> s;
  for (int i = 0; i < count; ++i) s.insert(int(int64_t(i) * (n - 1) / std::max(1, count - 1)));
  return {s.begin(), s.end()};
}

// How a mode's weights are held on the device (OpenclBackendOptions::weights): float-gemm F32 (native F32
// rows) or, at low precision, F16; the quantized modes their converted formats.
WeightsMode weights_mode(Mode m, int precision) {
  switch (m) {
    case Mode::kInt8B0:
      return WeightsMode::Int8B0;
    case Mode::kInt4B64:
      return WeightsMode::Int4B64;
    default:
      return precision == 2 ? WeightsMode::F16 : WeightsMode::Native;
  }
}

// The device's exact weights of W ([N][K] floats) in mode `wm`: what the kernels multiply by.
std::vector<float> exact_weights(const std::vector<float>& W, int K, int N, WeightsMode wm) {
  if (wm == WeightsMode::Native) return W;
  std::vector<float> e(W.size());
  for (int n = 0; n < N; ++n) {
    const float* src = W.data() + size_t(n) * K;
    float* dst = e.data() + size_t(n) * K;
    if (wm == WeightsMode::F16) {
      for (int k = 0; k < K; ++k) dst[k] = fp16_to_fp32(fp32_to_fp16(src[k]));
    } else {
      dequantize_row_asym(wm == WeightsMode::Int4B64 ? TileKind::Int4B64 : TileKind::Int8B0, src, K, dst);
    }
  }
  return e;
}

// Largest |C - ref| / sum |a w| over sampled entries (3 rows of A, 64 columns), ref in double.
double check(const std::vector<float>& A, const std::vector<float>& Wx, int M, int K, int N,
             const std::vector<float>& C) {
  double worst = 0.0;
  for (int m : sample(M, 3)) {
    for (int n : sample(N, 64)) {
      double ref = 0.0, mag = 0.0;
      for (int k = 0; k < K; ++k) {
        const double p = double(A[size_t(m) * K + k]) * Wx[size_t(n) * K + k];
        ref += p;
        mag += std::fabs(p);
      }
      const double err = std::fabs(double(C[size_t(m) * N + n]) - ref) / (mag + 1e-30);
      if (!(err <= 1.0)) return INFINITY;  // NaN or garbage
      worst = std::max(worst, err);
    }
  }
  return worst;
}

}  // namespace

GpuDeviceInfo opencl_device_info(int device, const std::string& profile) {
  const std::vector<opencl::DeviceRef> devs = opencl::list_devices();
  if (device < 0 || size_t(device) >= devs.size())
    fail("OpenCL device {} does not exist ({} found; see `tilellm devices`)", device, devs.size());
  opencl::Capabilities c = opencl::query_capabilities(devs[size_t(device)]);
  opencl::apply_profile(c, opencl::find_profile(profile));
  return {c.name, c.platform, c.driver_version, c.device_version, c.profile};
}

std::vector<GpuGemmRow> run_gemm_opencl(const GpuGemmConfig& c, FILE* prog, bool text, int* failures) {
  std::vector<GpuGemmRow> rows;
  int max_m = 1, max_k = 1, max_n = 1;
  for (int M : c.ms) max_m = std::max(max_m, M);
  for (const ShapeConfig& s : c.shapes) {
    max_k = std::max(max_k, s.K);
    max_n = std::max(max_n, s.N);
  }
  // One backend per mode (each holds its own device weight format), made when the mode first runs; the
  // backend keys weights by address, so they are kept as long as it.
  std::vector<std::vector<float>> kept;  // declared first: destroyed after the backends that point into it
  std::vector<std::unique_ptr<OpenclBackend>> backends(c.modes.size());
  auto backend_for = [&](size_t i) -> OpenclBackend& {
    if (!backends[i]) {
      OpenclBackendOptions o;
      o.device = c.device;
      o.profile = c.profile;
      o.max_tokens = max_m;
      o.max_in_elems = int64_t(max_m) * max_k;
      o.max_out_elems = int64_t(max_m) * max_n;
      o.max_width = 64;
      o.weights = weights_mode(c.modes[i], c.precision);
      o.profiling = true;
      // Every configuration is checked below before it is timed; a CPU fallback must not stand in for a
      // kernel.
      o.self_check = false;
      backends[i] = std::make_unique<OpenclBackend>(o);
    }
    return *backends[i];
  };
  for (Mode mode : c.modes) {
    if (mode == Mode::kInt4A8) {
      std::fprintf(prog,
                   "  %-28s  skipped: the OpenCL backend has no W4A8 kernel (int8 activations); no number is "
                   "reported\n",
                   mode_tag(mode));
    }
  }
  // MNN's order: shape by shape, the modes of the test within a shape, M within a mode.
  const bool all = c.modes.size() > 1;
  for (const ShapeConfig& s : c.shapes) {
    if (all) std::fputs(shape_label(s, true).c_str(), prog);
    for (size_t mi = 0; mi < c.modes.size(); ++mi) {
      const Mode mode = c.modes[mi];
      if (mode == Mode::kInt4A8) continue;
      if (mode == Mode::kInt4B64 && s.K % 64 != 0) {
        std::fprintf(prog, "  # %s skipped at K=%d N=%d: Int4-Block64 needs K %% 64 == 0\n", mode_tag(mode),
                     s.K, s.N);
        continue;
      }
      if (!all) std::fputs(shape_label(s, false).c_str(), prog);
      std::vector<int> run_ms;
      for (int M : c.ms) {
        if (config_runs(s, M, mode)) run_ms.push_back(M);
      }
      if (run_ms.empty()) continue;
      if (s.K % 32 != 0 && mode != Mode::kFloat) {
        std::fprintf(prog, "  # %s skipped at K=%d N=%d: the device formats need K %% 32 == 0\n",
                     mode_tag(mode), s.K, s.N);
        continue;
      }
      OpenclBackend& be = backend_for(mi);
      const int maxM = *std::max_element(run_ms.begin(), run_ms.end());
      kept.push_back(random_matrix(size_t(s.N) * s.K, uint32_t(s.K * 31 + s.N)));
      const std::vector<float>& W = kept.back();
      const std::vector<float> A = random_matrix(size_t(maxM) * s.K, uint32_t(s.K + 7));
      Weight w;
      w.name = fmt::format("gemm-speed {}x{}", s.N, s.K);
      w.type = GgmlType::F32;
      w.data = reinterpret_cast<const uint8_t*>(W.data());
      w.n_in = s.K;
      w.n_out = s.N;
      w.row_bytes = size_t(s.K) * sizeof(float);
      be.upload_weight(w);
      const std::vector<float> Wx = exact_weights(W, s.K, s.N, weights_mode(mode, c.precision));
      std::vector<float> C(size_t(maxM) * s.N);
      for (int M : run_ms) {
        std::fill(C.begin(), C.end(), NAN);
        be.matmul(w, A.data(), M, C.data());
        const double err = check(A, Wx, M, s.K, s.N, C);
        if (!(err <= 1e-4)) {
          std::fprintf(prog, "  %-28s  M=%-5d K=%-5d N=%-5d  CHECK FAILED: relative error %.3g, not timed\n",
                       mode_tag(mode), M, s.K, s.N, err);
          ++*failures;
          continue;
        }
        for (int i = 0; i < c.warmup; ++i) be.matmul(w, A.data(), M, C.data());
        std::vector<double> total, gpu;
        for (int i = 0; i < c.runs; ++i) {
          be.reset_kernel_times();  // finishes the queue: nothing of an earlier run is in flight
          const auto t0 = Clock::now();
          be.matmul(w, A.data(), M, C.data());  // blocking upload of A, kernels, blocking download of C
          total.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          double ns = 0.0;
          for (const KernelTime& kt : be.kernel_times()) ns += kt.ns;
          gpu.push_back(ns * 1e-6);
        }
        const GpuGemmRow r{mode, M, s.K, s.N, bench::stats_of(total), bench::stats_of(gpu), err};
        rows.push_back(r);
        std::fputs(gpu_line(mode_tag(mode), M, s.K, s.N, r.total_ms.mean, r.gpu_ms.mean).c_str(), prog);
        if (text) {
          std::fprintf(prog,
                       "  # total median=%.3f min=%.3f stddev=%.3f ms | gpu median=%.3f min=%.3f stddev=%.3f "
                       "ms | check: rel err %.1e\n",
                       r.total_ms.median, r.total_ms.min, r.total_ms.stddev, r.gpu_ms.median, r.gpu_ms.min,
                       r.gpu_ms.stddev, err);
        }
        std::fflush(prog);
      }
    }
  }
  return rows;
}

#else

GpuDeviceInfo opencl_device_info(int, const std::string&) {
  fail("this build has no OpenCL backend (CMake found no OpenCL headers and ICD loader when configuring it)");
}

std::vector<GpuGemmRow> run_gemm_opencl(const GpuGemmConfig&, FILE*, bool, int*) {
  fail("this build has no OpenCL backend (CMake found no OpenCL headers and ICD loader when configuring it)");
}

#endif

}  // namespace tilellm::cli
