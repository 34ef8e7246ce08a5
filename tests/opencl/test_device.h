// The OpenCL device the tests run on: index 0, or $TILELLM_TEST_OPENCL_DEVICE, so the same tests can be run
// on every device of a machine that has several (a GPU beside PoCL, say). A switch for tests only.
#pragma once

#include <cstdlib>

namespace tilellm::test {

inline int opencl_test_device() {
  const char* e = std::getenv("TILELLM_TEST_OPENCL_DEVICE");
  return e ? std::atoi(e) : 0;
}

}  // namespace tilellm::test
