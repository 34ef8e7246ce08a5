// The MNN GemmSpeed vocabulary of `tilellm gemm-speed` and `gemv-bw` (tools/mnn_gemm.h): test names,
// argument parsing, the GPU-mode bitmask and MNN's exact output lines.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "mnn_gemm.h"

namespace tilellm::gemm {
namespace {

// ---- MNN vocabulary ------------------------------------------------------------------------------------

TEST(GemmSpeedArgs, test_names_map_to_mnn_modes_in_order) {
  EXPECT_EQ(*modes_for_test("speed/GemmSpeedAll"),
            (std::vector<Mode>{Mode::kFloat, Mode::kInt8B0, Mode::kInt4B64}));
  EXPECT_EQ(*modes_for_test("speed/GemmSpeedFloat"), std::vector<Mode>{Mode::kFloat});
  EXPECT_EQ(*modes_for_test("speed/GemmSpeedInt8"), std::vector<Mode>{Mode::kInt8B0});
  EXPECT_EQ(*modes_for_test("speed/GemmSpeedInt4"), std::vector<Mode>{Mode::kInt4B64});
  EXPECT_EQ(*modes_for_test("GemmSpeedInt4A8"), std::vector<Mode>{Mode::kInt4A8});
  EXPECT_FALSE(modes_for_test("speed/GemmSpeedInt2").has_value());
  EXPECT_EQ(int(Mode::kInt4B64), 1);
  EXPECT_EQ(int(Mode::kInt8B0), 2);
}

TEST(GemmSpeedArgs, int4b64_skips_k_not_multiple_of_64_and_maxm_limits_m) {
  EXPECT_FALSE(config_runs({2561, 4096, 0}, 8, Mode::kInt4B64));
  EXPECT_TRUE(config_runs({2561, 4096, 0}, 8, Mode::kInt8B0));
  EXPECT_TRUE(config_runs({2561, 4096, 0}, 8, Mode::kFloat));
  EXPECT_TRUE(config_runs({2560, 4096, 0}, 512, Mode::kInt4B64));
  EXPECT_TRUE(config_runs({2560, 4096, 32}, 32, Mode::kFloat));
  EXPECT_FALSE(config_runs({2560, 4096, 32}, 128, Mode::kFloat));
}

TEST(GemmSpeedArgs, backend_and_precision_accept_mnn_numbers_and_names) {
  EXPECT_EQ(parse_backend("0"), kCpu);
  EXPECT_EQ(parse_backend("1"), kMetal);
  EXPECT_EQ(parse_backend("2"), kCuda);
  EXPECT_EQ(parse_backend("3"), kOpenCL);
  EXPECT_EQ(parse_backend("7"), kVulkan);
  EXPECT_EQ(parse_backend("opencl"), kOpenCL);
  EXPECT_THROW(parse_backend("4"), Error);
  EXPECT_THROW(parse_backend("gpu"), Error);
  EXPECT_EQ(parse_precision("0"), 0);
  EXPECT_EQ(parse_precision("2"), 2);
  EXPECT_EQ(parse_precision("low"), 2);
  EXPECT_THROW(parse_precision("3"), Error);
}

TEST(GemmSpeedArgs, cpu_threads_come_from_the_named_option_first_and_must_be_positive) {
  EXPECT_EQ(cpu_threads(-1, -1), 1);  // neither given: MNN's default
  EXPECT_EQ(cpu_threads(-1, 2), 2);   // MNN's positional form
  EXPECT_EQ(cpu_threads(3, 2), 3);    // --threads wins
  EXPECT_THROW(cpu_threads(0, -1), Error);
  EXPECT_THROW(cpu_threads(-1, 0), Error);
  EXPECT_THROW(cpu_threads(-1, -2), Error);
  EXPECT_THROW(cpu_threads(5000, -1), Error);
}

TEST(GemmSpeedArgs, gpu_mode_bitmask_is_parsed_and_validated) {
  const GpuMode g = parse_gpu_mode(68);
  EXPECT_EQ(g.memory, kMemoryBuffer);
  EXPECT_EQ(g.tuning, kTuningWide);
  const GpuMode f = parse_gpu_mode(80);
  EXPECT_EQ(f.memory, kMemoryBuffer);
  EXPECT_EQ(f.tuning, kTuningFast);
  const GpuMode d = parse_gpu_mode(0);  // OpenCL's defaults
  EXPECT_EQ(d.memory, kMemoryImage);
  EXPECT_EQ(d.tuning, kTuningWide);
  EXPECT_EQ(parse_gpu_mode(129).tuning, kTuningNone);
  EXPECT_THROW(parse_gpu_mode(32), Error);   // unknown bit
  EXPECT_THROW(parse_gpu_mode(256), Error);  // unknown bit
  EXPECT_THROW(parse_gpu_mode(192), Error);  // BUFFER and IMAGE
  EXPECT_THROW(parse_gpu_mode(6), Error);    // HEAVY and WIDE
  EXPECT_THROW(parse_gpu_mode(-1), Error);
  EXPECT_EQ(parse_tuning("fast") | parse_gpu_memory("buffer"), 80);
  EXPECT_THROW(parse_tuning("fastest"), Error);
  EXPECT_THROW(parse_gpu_memory("texture"), Error);
}

TEST(GemmSpeedArgs, shape_flag_takes_k_n_and_optional_max_m) {
  const ShapeConfig a = parse_shape("2560,4096");
  EXPECT_EQ(a.K, 2560);
  EXPECT_EQ(a.N, 4096);
  EXPECT_EQ(a.maxM, 0);
  const ShapeConfig b = parse_shape("896,4864,32");
  EXPECT_EQ(b.maxM, 32);
  EXPECT_THROW(parse_shape("2560"), Error);
  EXPECT_THROW(parse_shape("2560,0"), Error);
  EXPECT_THROW(parse_shape("2560,4096x"), Error);
  EXPECT_THROW(parse_shape("2560,4096,8,1"), Error);
}

TEST(GemmSpeedOutput, cpu_line_is_mnn_printf_format) {
  // The line from MNN's docs: M=32 K=2560 N=4096 at 3.768 ms (MNN printed 178.11 from its unrounded avg).
  char expect[256];
  std::snprintf(expect, sizeof expect, "  %-28s  M=%-5d K=%-5d N=%-5d  avg=%.3f ms  %.2f GFLOPS\n",
                "float-gemm", 32, 2560, 4096, 3.768, 2.0 * 32 * 2560 * 4096 / (3.768 * 1e6));
  EXPECT_EQ(cpu_line("float-gemm", 32, 2560, 4096, 3.768), expect);
  EXPECT_EQ(cpu_line("float-gemm", 32, 2560, 4096, 3.768),
            "  float-gemm                    M=32    K=2560  N=4096   avg=3.768 ms  178.10 GFLOPS\n");
}

TEST(GemmSpeedOutput, gpu_line_is_mnn_printf_format) {
  EXPECT_EQ(
      gpu_line("int4b64-gemm", 32, 2560, 4096, 1.633, 0.745),
      "  int4b64-gemm                  M=32    K=2560  N=4096   total=1.633 ms (410.95 GFLOPS)  gpu=0.745 ms "
      "(900.79 GFLOPS)\n");
}

TEST(GemmSpeedOutput, header_lines_are_mnns) {
  // GemmSpeed.cpp's banners, printBackendConfig and shape labels, as its MNN_PRINT formats make them.
  EXPECT_EQ(test_banner({Mode::kFloat}), "\n===== Float Conv1x1 GEMM Speed =====\n");
  EXPECT_EQ(test_banner({Mode::kInt8B0}), "\n===== Int8-Block0 Conv1x1 GEMM Speed =====\n");
  EXPECT_EQ(test_banner({Mode::kInt4B64}), "\n===== Int4-Block64 Conv1x1 GEMM Speed =====\n");
  EXPECT_EQ(test_banner(*modes_for_test("speed/GemmSpeedAll")), "\n===== All GEMM Speed Benchmark =====\n");
  EXPECT_EQ(backend_config_lines(kCpu, 2, 2), "Backend: CPU (type=0), precision=2, numthread=2\n");
  EXPECT_EQ(backend_config_lines(kOpenCL, 2, 68),
            "Backend: OpenCL (type=3), precision=2, numthread=68\n  OpenCL memory mode: BUFFER\n");
  EXPECT_EQ(backend_config_lines(kOpenCL, 0, 4),
            "Backend: OpenCL (type=3), precision=0, numthread=4\n  OpenCL memory mode: IMAGE\n");
  EXPECT_EQ(backend_config_lines(kOpenCL, 0, 0), "Backend: OpenCL (type=3), precision=0, numthread=0\n");
  EXPECT_EQ(backend_config_lines(kVulkan, 2, 0), "Backend: Vulkan (type=7), precision=2, numthread=0\n");
  EXPECT_EQ(backend_config_lines(kMetal, 0, 0), "Backend: Metal (type=1), precision=0, numthread=0\n");
  EXPECT_EQ(backend_config_lines(kCuda, 0, 0), "Backend: CUDA (type=2), precision=0, numthread=0\n");
  EXPECT_EQ(shape_label({2560, 4096, 0}, false), "--- K=2560 N=4096 ---\n");
  EXPECT_EQ(shape_label({9728, 2560, 0}, true), "\n--- K=9728 N=2560 ---\n");
}

}  // namespace
}  // namespace tilellm::gemm
