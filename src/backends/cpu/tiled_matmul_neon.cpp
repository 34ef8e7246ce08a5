// ARM builds of the tiled matmul kernels (tiled_matmul_neon.inc): "neon", ARMv8-A Advanced SIMD, which every
// AArch64 CPU has; and "neondot", the same with the ARMv8.2 dot product instructions, picked at run time by
// tiled_matmul.cpp when the CPU reports them (cpu_features().neon_dotprod).
//
// The library is built for baseline ARMv8-A: the dot product copy is compiled between the target pragmas
// below. Headers are included before that region so that no inline function shared with other files is
// compiled for +dotprod here; the CPU probes are defined after it. On other architectures this file only
// defines the probes, returning nullptr.
#include <algorithm>
#include <cstring>

#include "backends/cpu/tiled_matmul_kernels.h"
#include "base/cpu_features.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#define TILELLM_TILED_DOTPROD 0

namespace tilellm::tiled_detail {
namespace neon_plain {
namespace {
#include "backends/cpu/tiled_matmul_neon.inc"
// After it: the K-quant kernels use its helpers.
#include "backends/cpu/tiled_matmul_k_neon.inc"
}  // namespace
}  // namespace neon_plain
}  // namespace tilellm::tiled_detail

#undef TILELLM_TILED_DOTPROD

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#else
#pragma GCC push_options
// GCC's arm_neon.h defines the dot product intrinsics for armv8.2-a+dotprod, and an always-inline intrinsic
// only inlines into a function whose target includes its own. The dot product is an ARMv8.2 extension, so
// every CPU that has it implements ARMv8.2.
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif

#define TILELLM_TILED_DOTPROD 1

namespace tilellm::tiled_detail {
namespace neon_dot {
namespace {
#include "backends/cpu/tiled_matmul_neon.inc"
// After it: the K-quant kernels use its helpers.
#include "backends/cpu/tiled_matmul_k_neon.inc"
}  // namespace
}  // namespace neon_dot
}  // namespace tilellm::tiled_detail

#undef TILELLM_TILED_DOTPROD

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace tilellm::tiled_detail {

Kernel neon_tiled_kernel() {
  return cpu_features().neon ? neon_plain::kernel : nullptr;
}
Kernel neon_tiled_k_kernel() {
  return cpu_features().neon ? neon_plain::k_kernel : nullptr;
}

// Outside the target region: these must run on CPUs without the dot product instructions.
Kernel neondot_tiled_kernel() {
  return cpu_features().neon_dotprod ? neon_dot::kernel : nullptr;
}
Kernel neondot_tiled_k_kernel() {
  return cpu_features().neon_dotprod ? neon_dot::k_kernel : nullptr;
}

}  // namespace tilellm::tiled_detail

#else  // not AArch64

namespace tilellm::tiled_detail {

Kernel neon_tiled_kernel() {
  return nullptr;
}
Kernel neondot_tiled_kernel() {
  return nullptr;
}
Kernel neon_tiled_k_kernel() {
  return nullptr;
}
Kernel neondot_tiled_k_kernel() {
  return nullptr;
}

}  // namespace tilellm::tiled_detail

#endif
