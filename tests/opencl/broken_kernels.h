// Deliberately broken kernels for the self-check tests (the backend's test hook builds one in place of the
// real kernel of that name): shared by the self-check and program-cache tests.
#pragma once

namespace tilellm::test {

// RMSNorm that forgets to normalize: y = x * w (the real kernel's arguments, kernels/rmsnorm.cl).
inline constexpr const char* kBrokenRmsnorm = R"(
__kernel void rmsnorm(__global const float* x, __global const float* w, __global float* y, int n, float eps,
                      __local float* scratch, __global uint* yq) {
  const int row = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
  for (int i = lid; i < n; i += ls) y[(ulong)row * n + i] = x[(ulong)row * n + i] * w[i];
}
)";

}  // namespace tilellm::test
