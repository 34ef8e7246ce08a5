// The MNN GemmSpeed vocabulary, header-only so the CLI (cmd_gemm_speed.cpp, cmd_gemv_bw.cpp) and its tests
// share it: test names, mode numbers and tags, the default shape table, argument parsing (backend numbers,
// precision, the GPU-mode bitmask) and MNN's exact output line formats.
//
// MNN's facts used here (test/speed/GemmSpeed.cpp as described in its docs): modes 0 float, 1 Int4-Block64,
// 2 Int8-Block0, 3 Int4-Block0 W4A8; GemmSpeedAll runs modes {0, 2, 1}; Int4-Block64 skips K % 64 != 0; a
// shape entry's maxM = 0 runs every M, > 0 only M <= maxM; 3 warm-ups then 10 timed runs, GFLOPS =
// 2*M*K*N / (avg_ms * 1e6); backends 0 CPU, 1 Metal, 2 CUDA, 3 OpenCL, 7 Vulkan; precision 0 Normal, 1 High,
// 2 Low; GPU mode bits (MNNGpuMode) tuning NONE 1, HEAVY 2, WIDE 4, NORMAL 8, FAST 16, memory BUFFER 64,
// IMAGE 128.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace tilellm::gemm {

enum class Mode { kFloat = 0, kInt4B64 = 1, kInt8B0 = 2, kInt4A8 = 3 };

inline const char* mode_tag(Mode m) {
  switch (m) {
    case Mode::kFloat:
      return "float-gemm";
    case Mode::kInt4B64:
      return "int4b64-gemm";
    case Mode::kInt8B0:
      return "int8b0-gemm";
    case Mode::kInt4A8:
      return "int4a8-gemm";
  }
  return "?";
}

struct ShapeConfig {
  int K = 0;
  int N = 0;
  int maxM = 0;  // 0: every M; > 0: only M <= maxM
};

inline std::vector<ShapeConfig> default_configs() {
  return {{2560, 4096, 0}, {2560, 1024, 0}, {4096, 2560, 0}, {2560, 9728, 0}, {9728, 2560, 0}};
}
// MNN's {8, 32, 128, 512}, plus M = 1 (decode GEMV) first.
inline std::vector<int> default_m_values() {
  return {1, 8, 32, 128, 512};
}

// Modes a test name runs, in MNN's order; nullopt for an unknown name. "speed/" may be omitted.
inline std::optional<std::vector<Mode>> modes_for_test(std::string name) {
  if (name.rfind("speed/", 0) == 0) name = name.substr(6);
  if (name == "GemmSpeedFloat") return std::vector<Mode>{Mode::kFloat};
  if (name == "GemmSpeedInt8") return std::vector<Mode>{Mode::kInt8B0};
  if (name == "GemmSpeedInt4") return std::vector<Mode>{Mode::kInt4B64};
  if (name == "GemmSpeedInt4A8") return std::vector<Mode>{Mode::kInt4A8};
  if (name == "GemmSpeedAll") return std::vector<Mode>{Mode::kFloat, Mode::kInt8B0, Mode::kInt4B64};
  return std::nullopt;
}

// Whether (shape, M, mode) runs: maxM, and Int4-Block64 needs K % 64 == 0.
inline bool config_runs(const ShapeConfig& s, int M, Mode mode) {
  if (s.maxM > 0 && M > s.maxM) return false;
  if (mode == Mode::kInt4B64 && s.K % 64 != 0) return false;
  return true;
}

// ---- backends and precision ----------------------------------------------------------------------------
// MNN's backend numbers: 0 CPU, 1 Metal, 2 CUDA, 3 OpenCL, 7 Vulkan (the registry's BackendEntry::mnn_type).
inline constexpr int kCpu = 0, kMetal = 1, kCuda = 2, kOpenCL = 3, kVulkan = 7;

// "0" / "cpu", "1" / "metal", "2" / "cuda", "3" / "opencl", "7" / "vulkan" as an MNN number; throws on
// anything else. Whether this build has the backend is the registry's to say.
inline int parse_backend(const std::string& s) {
  if (s == "0" || s == "cpu") return kCpu;
  if (s == "1" || s == "metal") return kMetal;
  if (s == "2" || s == "cuda") return kCuda;
  if (s == "3" || s == "opencl") return kOpenCL;
  if (s == "7" || s == "vulkan") return kVulkan;
  fail("unknown backend '{}': use 0 (cpu), 1 (metal), 2 (cuda), 3 (opencl) or 7 (vulkan)", s);
}

// 0 Normal, 1 High, 2 Low (fp16 where the backend has it); also by name.
inline int parse_precision(const std::string& s) {
  if (s == "0" || s == "normal") return 0;
  if (s == "1" || s == "high") return 1;
  if (s == "2" || s == "low") return 2;
  fail("unknown precision '{}': use 0 (normal), 1 (high) or 2 (low)", s);
}

inline const char* precision_name(int p) {
  return p == 0 ? "Normal" : p == 1 ? "High" : "Low";
}

// MNN's MNNGpuMode bits.
inline constexpr int kTuningNone = 1, kTuningHeavy = 2, kTuningWide = 4, kTuningNormal = 8, kTuningFast = 16;
inline constexpr int kMemoryBuffer = 64, kMemoryImage = 128;

struct GpuMode {
  int tuning = kTuningWide;   // one of the kTuning* bits (WIDE is OpenCL's default)
  int memory = kMemoryImage;  // kMemoryBuffer or kMemoryImage (IMAGE is OpenCL's default)
  int mask() const { return tuning | memory; }
};

// Validates an MNN GPU-mode bitmask: only the seven known bits, at most one tuning bit and at most one
// memory bit; a missing group takes OpenCL's default. 68 = BUFFER + WIDE.
inline GpuMode parse_gpu_mode(int mask) {
  constexpr int tuning_bits = kTuningNone | kTuningHeavy | kTuningWide | kTuningNormal | kTuningFast;
  constexpr int memory_bits = kMemoryBuffer | kMemoryImage;
  if (mask < 0 || (mask & ~(tuning_bits | memory_bits)) != 0) {
    fail(
        "GPU mode {} has unknown bits: tuning NONE 1, HEAVY 2, WIDE 4, NORMAL 8, FAST 16; memory BUFFER 64, "
        "IMAGE 128",
        mask);
  }
  const int t = mask & tuning_bits, m = mask & memory_bits;
  if ((t & (t - 1)) != 0) fail("GPU mode {} sets more than one tuning bit", mask);
  if (m == memory_bits) fail("GPU mode {} sets both BUFFER (64) and IMAGE (128)", mask);
  GpuMode g;
  if (t) g.tuning = t;
  if (m) g.memory = m;
  return g;
}

inline int parse_tuning(const std::string& s) {
  if (s == "none") return kTuningNone;
  if (s == "heavy") return kTuningHeavy;
  if (s == "wide") return kTuningWide;
  if (s == "normal") return kTuningNormal;
  if (s == "fast") return kTuningFast;
  fail("unknown tuning '{}': use none, heavy, wide, normal or fast", s);
}

inline int parse_gpu_memory(const std::string& s) {
  if (s == "buffer") return kMemoryBuffer;
  if (s == "image") return kMemoryImage;
  fail("unknown GPU memory mode '{}': use buffer or image", s);
}

inline const char* tuning_name(int t) {
  switch (t) {
    case kTuningNone:
      return "NONE";
    case kTuningHeavy:
      return "HEAVY";
    case kTuningWide:
      return "WIDE";
    case kTuningNormal:
      return "NORMAL";
    case kTuningFast:
      return "FAST";
  }
  return "?";
}

// "K,N" or "K,N,maxM".
inline ShapeConfig parse_shape(const std::string& s) {
  ShapeConfig c;
  char tail = 0;
  const int got = std::sscanf(s.c_str(), "%d,%d,%d%c", &c.K, &c.N, &c.maxM, &tail);
  const bool two = got == 2 && s.find(',') == s.rfind(',');
  const bool clean = s.find_first_not_of("0123456789,") == std::string::npos;
  if (clean && (two || got == 3) && c.K > 0 && c.N > 0 && c.maxM >= 0) return c;
  fail("bad shape '{}': expected K,N or K,N,maxM with positive K and N", s);
}

// The CPU thread count from --threads (named) or MNN's third positional, -1 meaning not given, named first;
// 1 when neither is given (MNN's default). A given count must be 1 .. 4096.
inline int cpu_threads(int named, int positional) {
  if (named == -1 && positional == -1) return 1;
  const int t = named != -1 ? named : positional;
  if (t < 1 || t > 4096) fail("CPU thread count {} is out of range (1 .. 4096)", t);
  return t;
}

// ---- MNN's header lines (test/speed/GemmSpeed.cpp at MNN 4d40bdb) ----------------------------------------
// A test opens with a blank line, its banner and printBackendConfig's line(s); each shape then has a label,
// after a blank line in GemmSpeedAll (which runs every mode under one label), without one in the single-mode
// tests (Int4-Block64 leaves out a shape whose K % 64 != 0, label included). GemmSpeedInt4A8 is not MNN's:
// its banner is ours, in the same form.

inline std::string test_banner(const std::vector<Mode>& modes) {
  const char* title = "All GEMM Speed Benchmark";
  if (modes.size() == 1) {
    switch (modes[0]) {
      case Mode::kFloat:
        title = "Float Conv1x1 GEMM Speed";
        break;
      case Mode::kInt8B0:
        title = "Int8-Block0 Conv1x1 GEMM Speed";
        break;
      case Mode::kInt4B64:
        title = "Int4-Block64 Conv1x1 GEMM Speed";
        break;
      case Mode::kInt4A8:
        title = "Int4-Block0 W4A8 Conv1x1 GEMM Speed";
        break;
    }
  }
  return std::string("\n===== ") + title + " =====\n";
}

// printBackendConfig: the backend's name and type, precision and the third argument as given (threads, or
// the GPU-mode bitmask); for OpenCL with a bitmask > 0 also the memory mode, IMAGE unless the BUFFER bit is
// set (MNN's test reads it that way; the backend's own default for a mask without memory bits is IMAGE too).
inline std::string backend_config_lines(int b, int precision, int third) {
  const char* name = b == kOpenCL   ? "OpenCL"
                     : b == kVulkan ? "Vulkan"
                     : b == kMetal  ? "Metal"
                     : b == kCuda   ? "CUDA"
                                    : "CPU";
  char buf[160];
  std::snprintf(buf, sizeof buf, "Backend: %s (type=%d), precision=%d, numthread=%d\n", name, b, precision,
                third);
  std::string out = buf;
  if (b == kOpenCL && third > 0)
    out += (third & kMemoryBuffer) != 0 ? "  OpenCL memory mode: BUFFER\n" : "  OpenCL memory mode: IMAGE\n";
  return out;
}

// The shape's label; `all`: GemmSpeedAll's form, after a blank line.
inline std::string shape_label(const ShapeConfig& s, bool all) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "%s--- K=%d N=%d ---\n", all ? "\n" : "", s.K, s.N);
  return buf;
}

// ---- MNN's output lines --------------------------------------------------------------------------------
inline constexpr const char* kCpuLineFormat = "  %-28s  M=%-5d K=%-5d N=%-5d  avg=%.3f ms  %.2f GFLOPS\n";
inline constexpr const char* kGpuLineFormat =
    "  %-28s  M=%-5d K=%-5d N=%-5d  total=%.3f ms (%.2f GFLOPS)  gpu=%.3f ms (%.2f GFLOPS)\n";

inline double gflops(int M, int K, int N, double ms) {
  return 2.0 * M * K * N / (ms * 1e6);
}

inline std::string cpu_line(const char* tag, int M, int K, int N, double avg_ms) {
  char buf[256];
  std::snprintf(buf, sizeof buf, kCpuLineFormat, tag, M, K, N, avg_ms, gflops(M, K, N, avg_ms));
  return buf;
}

inline std::string gpu_line(const char* tag, int M, int K, int N, double total_ms, double gpu_ms) {
  char buf[320];
  std::snprintf(buf, sizeof buf, kGpuLineFormat, tag, M, K, N, total_ms, gflops(M, K, N, total_ms), gpu_ms,
                gflops(M, K, N, gpu_ms));
  return buf;
}

}  // namespace tilellm::gemm
