// `tilellm gemm-speed` on backend 3 (OpenCL): MNN's GemmSpeed GEMMs run through the engine's OpenCL backend
// (OpenclBackend::matmul, its matmul/matvec kernels and device weight formats), so the numbers are those
// of the kernels a model runs. tools/cmd_gemm_speed.cpp parses the arguments and prints the tables; this
// file builds the backend, checks and times every configuration.
//
// Per mode one backend: float-gemm holds F32 weights (precision 0 / 1) or F16 ones (precision 2, low);
// int8b0-gemm and int4b64-gemm the INT8B0 / INT4B64 device formats, converted at upload exactly as the CPU
// converts (--weights int8b0 / int4b64). The activations are float32 (the device computes the float path:
// the exact weights times float activations). int4a8-gemm (W4A8, int8 activations) has no device kernel:
// it is skipped with a line saying so.
// A run is the full round trip of one matmul call: A uploaded (blocking write), the kernel(s), the blocking
// download of C. total = the run's wall time; gpu = the device time of its kernels from the queue's
// profiling timestamps (start to end of each launch, summed). Both are averaged over the timed runs.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_env.h"
#include "bench/gemm_speed.h"

namespace tilellm::cli {

struct GpuGemmConfig {
  int device = 0;
  std::string profile = "none";
  int precision = 0;
  std::vector<gemm::Mode> modes;
  std::vector<gemm::ShapeConfig> shapes;
  std::vector<int> ms;
  int warmup = 3, runs = 10;
};

struct GpuGemmRow {
  gemm::Mode mode;
  int M, K, N;
  bench::Stats total_ms, gpu_ms;
  double max_rel_err;
};

// What the header and every machine-readable row record about the device.
struct GpuDeviceInfo {
  std::string name, platform, driver, version, profile;
};

// The device's identification; throws when the device index does not exist or this build has no OpenCL.
GpuDeviceInfo opencl_device_info(int device, const std::string& profile);

// Runs every configuration: each is checked on random data against a double-precision reference over the
// exact device weights (a failure prints a CHECK FAILED line, counts in *failures and gets no number), then
// warmed up and timed. MNN's GPU line (and in text format a "#" line of statistics) goes to `prog` per row.
std::vector<GpuGemmRow> run_gemm_opencl(const GpuGemmConfig& c, FILE* prog, bool text, int* failures);

}  // namespace tilellm::cli
