// NVML loaded at run time (runtime/telemetry/nvml.h) through a fake libnvidia-ml.so.1 (fake_nvml.c): the
// library is opened by name, its entry points resolved, and every reading lands in its channel with its
// unit converted; a library that is not there is reported absent with the reason.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/telemetry/nvml.h"

namespace tilellm::telemetry {
namespace {

struct NvmlEnv {
  explicit NvmlEnv(const char* path) { setenv("TILELLM_NVML_LIBRARY", path, 1); }
  ~NvmlEnv() { unsetenv("TILELLM_NVML_LIBRARY"); }
};

TEST(Nvml, a_library_loaded_at_run_time_gives_every_reading) {
  NvmlEnv env(TILELLM_FAKE_NVML);
  NvmlSensors n(0);
  ASSERT_TRUE(n.present()) << n.status().detail;
  EXPECT_NE(n.status().detail.find("Fake NVIDIA H200"), std::string::npos) << n.status().detail;
  EXPECT_NE(n.status().detail.find("throttle reasons"), std::string::npos) << n.status().detail;
  EXPECT_DOUBLE_EQ(n.power_limit_w(), 700.0);
  for (Channel c : {Channel::GpuPowerW, Channel::GpuEnergyJ, Channel::GpuTempC, Channel::GpuSmMhz,
                    Channel::GpuMemMhz, Channel::GpuUtilPct, Channel::GpuMemUtilPct})
    EXPECT_TRUE(n.has(c)) << channel_info(c).key;
  EXPECT_FALSE(n.has(Channel::CpuTempC));
  Sample a;
  a.t = 1.0;
  n.read(a);
  EXPECT_FLOAT_EQ(a.get(Channel::GpuPowerW), 312.5f);  // mW -> W
  EXPECT_FLOAT_EQ(a.get(Channel::GpuTempC), 67.0f);
  EXPECT_FLOAT_EQ(a.get(Channel::GpuSmMhz), 1755.0f);
  EXPECT_FLOAT_EQ(a.get(Channel::GpuMemMhz), 2619.0f);
  EXPECT_FLOAT_EQ(a.get(Channel::GpuUtilPct), 93.0f);
  EXPECT_FLOAT_EQ(a.get(Channel::GpuMemUtilPct), 71.0f);
  EXPECT_EQ(a.get(Channel::GpuEnergyJ), 0.0f);  // energy since the first read
  EXPECT_EQ(a.gpu_throttle, 0x24u);
  EXPECT_EQ(throttle_reason_names(a.gpu_throttle), "sw power cap, sw thermal slowdown");
  Sample b;
  b.t = 2.0;
  n.read(b);
  EXPECT_FLOAT_EQ(b.get(Channel::GpuEnergyJ), 2.0f);  // the counter advanced 2000 mJ
}

TEST(Nvml, a_device_index_it_lacks_is_absent_with_the_reason) {
  NvmlEnv env(TILELLM_FAKE_NVML);
  NvmlSensors n(3);
  EXPECT_FALSE(n.present());
  EXPECT_NE(n.status().detail.find("no NVML device 3 (1 devices)"), std::string::npos) << n.status().detail;
  Sample s;
  n.read(s);  // reads nothing, breaks nothing
  EXPECT_TRUE(std::isnan(s.get(Channel::GpuPowerW)));
}

TEST(Nvml, a_missing_library_is_absent_with_the_reason) {
  NvmlEnv env("/nonexistent/libnvidia-ml.so.1");
  NvmlSensors n(0);
  EXPECT_FALSE(n.present());
  EXPECT_NE(n.status().detail.find("/nonexistent/libnvidia-ml.so.1 not loaded"), std::string::npos)
      << n.status().detail;
  EXPECT_EQ(throttle_reason_names(0), "none");
  EXPECT_EQ(throttle_reason_names(0x1000), "0x1000");
}

}  // namespace
}  // namespace tilellm::telemetry
