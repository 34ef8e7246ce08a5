// Device time of one kernel over the launches since timing began (or was last reset): what a backend that
// can time its kernels reports (Backend::kernel_times; the OpenCL backend with profiling on).
#pragma once

#include <cstdint>
#include <string>

namespace tilellm {

struct KernelTime {
  std::string name;
  int64_t calls = 0;
  double ns = 0;  // sum of (end - start) of its launches, from the device's timestamps
  // What the driver reports of the compiled kernel ("Register Count=40, ..."; Vulkan with
  // VK_KHR_pipeline_executable_properties); empty where it reports nothing.
  std::string driver_stats;
};

}  // namespace tilellm
