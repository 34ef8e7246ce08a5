// What the Vulkan tests share: whether there is a Vulkan device, the device index
// ($TILELLM_TEST_VULKAN_DEVICE, else 0) and the profiles every op test runs under.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/vulkan/device.h"

namespace tilellm::test {

inline bool have_vulkan() {
  static const bool have = !vulkan::list_devices().empty();
  return have;
}

inline int vulkan_test_device() {
  const char* e = std::getenv("TILELLM_TEST_VULKAN_DEVICE");
  return e ? std::atoi(e) : 0;
}

// "none" as the device is, "none-shared" the same with the subgroup reductions off, and the constrained
// profiles: powervr-cxt (subgroup 128, 32 KiB shared memory, no fp16 arithmetic), powervr-rogue (512
// invocations, 4 KiB shared memory: smaller local sizes, no subgroup arithmetic) and no-16bit.
inline std::vector<std::string> vulkan_test_profiles() {
  return {"none", "none-shared", "powervr-cxt", "powervr-rogue", "no-16bit"};
}

}  // namespace tilellm::test
