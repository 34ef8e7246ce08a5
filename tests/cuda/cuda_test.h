// What the CUDA tests share: whether there is a CUDA device this build can run on (a machine without one
// skips every test that needs it: CI builds this program and runs it without a GPU), and the device index
// ($TILELLM_TEST_CUDA_DEVICE, else 0).
#pragma once

#include <cstdlib>

#include "backends/cuda/device.h"

namespace tilellm::test {

inline bool have_cuda() {
  static const bool have = cuda::unavailable().empty();
  return have;
}

inline int cuda_test_device() {
  const char* e = std::getenv("TILELLM_TEST_CUDA_DEVICE");
  return e ? std::atoi(e) : 0;
}

#define SKIP_WITHOUT_CUDA() \
  if (!::tilellm::test::have_cuda()) GTEST_SKIP() << "no CUDA device: " << ::tilellm::cuda::unavailable()

}  // namespace tilellm::test
