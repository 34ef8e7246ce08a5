// The CLI's device choice (tools/backend_args.h): without --device a command takes the chosen backend's first
// device that is not emulated on the CPU. A test-only backend, "two-devices", lists a CPU driver first and a
// GPU second, as an H100 host's OpenCL platforms do (device 0 a CPU driver, device 1 the GPU).
#include <gtest/gtest.h>

#include <string>

#include "backend_args.h"
#include "backends/registry.h"
#include "base/error.h"
#include "commands.h"

namespace tilellm::cli {
namespace {

BackendEntry two_devices() {
  BackendEntry e;
  e.name = "two-devices";
  e.mnn_type = 97;
  e.summary = "test only: a CPU driver, then a GPU";
  e.devices = [](const std::string&) {
    DeviceInfo cpu, gpu;
    cpu.name = "a CPU driver";
    cpu.emulated = true;
    gpu.name = "a GPU";
    return std::vector<DeviceInfo>{cpu, gpu};
  };
  // These tests only choose a device; a session on it would be an error of the test.
  e.make = [](const BackendParams&) -> std::unique_ptr<Backend> { fail("two-devices runs nothing"); };
  return e;
}
TILELLM_REGISTER_BACKEND(two_devices);

// The parsed arguments of `command_line` (run's backend options only).
BackendArgs parsed(const std::string& command_line) {
  CLI::App app;
  BackendArgs a;
  add_backend_args(&app, a);
  app.parse(command_line, false);
  return a;
}

TEST(BackendArgs, devices_marks_the_device_taken_without_device) {
  CLI::App app;
  register_devices(app);
  ::testing::internal::CaptureStdout();
  app.parse("devices --backend two-devices", false);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("  device 0: a CPU driver\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  device 1: a GPU (the default: taken without --device)\n"), std::string::npos) << out;
}

TEST(BackendArgs, without_device_the_first_device_not_emulated_on_the_cpu_is_taken) {
  const BackendArgs a = parsed("--backend two-devices");
  EXPECT_EQ(chosen_device(a), 1);
  EXPECT_EQ(device_name(a), "a GPU");
  EXPECT_EQ(backend_label(a), "two-devices:1+buffer");
  SessionOptions o;
  apply_backend_args(a, o);
  EXPECT_EQ(o.backend, "two-devices");
  EXPECT_EQ(o.device, 1);
}

TEST(BackendArgs, a_device_given_is_taken_as_given) {
  const BackendArgs a = parsed("--backend two-devices --device 0");
  EXPECT_EQ(chosen_device(a), 0);
  EXPECT_EQ(device_name(a), "a CPU driver");
  SessionOptions o;
  apply_backend_args(a, o);
  EXPECT_EQ(o.device, 0);
  EXPECT_THROW(parsed("--backend two-devices --device -1"), CLI::ValidationError);
}

// -ngl without --backend takes the first GPU backend with a device that is not emulated (cuda, vulkan,
// opencl, then the others: two-devices, where this machine's cuda, vulkan and opencl have no such device),
// and then that device. Before, a backend whose device 0 was emulated was passed over.
TEST(BackendArgs, ngl_takes_a_backend_whose_gpu_is_not_its_first_device) {
  const BackendArgs a = parsed("--n-gpu-layers 99");
  SessionOptions o;
  apply_backend_args(a, o);
  for (const char* earlier : {"cuda", "vulkan", "opencl"}) {
    if (o.backend == earlier) GTEST_SKIP() << earlier << " has a GPU here and comes first";
  }
  EXPECT_EQ(o.backend, "two-devices");
  EXPECT_EQ(o.device, 1);
  EXPECT_EQ(backend_label(a), "two-devices:1+buffer");
}

TEST(BackendArgs, the_host_backend_takes_device_zero) {
  const BackendArgs a = parsed("");
  EXPECT_EQ(chosen_device(a), 0);
  EXPECT_EQ(backend_label(a), "cpu");
  SessionOptions o;
  apply_backend_args(a, o);
  EXPECT_EQ(o.device, 0);
}

}  // namespace
}  // namespace tilellm::cli
