// Random test data for the OpenCL tests (../gpu_common/random_weights.h) and whether there is a device.
#pragma once

#include "../gpu_common/random_weights.h"
#include "backends/opencl/device.h"

namespace tilellm::test {

inline bool have_device() {
  static const bool have = !opencl::list_devices().empty();
  return have;
}

}  // namespace tilellm::test
