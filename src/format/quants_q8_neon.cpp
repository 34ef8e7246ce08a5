// ARM builds of the quantized-activation kernels (quants_q8_neon.inc): "neon", ARMv8-A Advanced SIMD, which
// every AArch64 CPU has; and "neondot", the same with the ARMv8.2 dot product instructions, picked at run
// time by quants_q8.cpp when the CPU reports them (cpu_features().neon_dotprod).
//
// The library is built for baseline ARMv8-A: the dot product copy is compiled between the target pragmas
// below. Headers are included before that region so that no inline function shared with other files is
// compiled for +dotprod here; the CPU probes are defined after it. On other architectures this file only
// defines the probes, returning nullptr.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "format/quants.h"
#include "format/quants_kernels.h"
#include "format/quants_q8.h"
#include "format/quants_q8_kernels.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#define TILELLM_Q8_DOTPROD 0
#define TILELLM_Q8_ISA "neon"

namespace tilellm::q8_detail {
namespace neon_plain {
namespace {
#include "format/quants_q8_neon.inc"
}  // namespace
}  // namespace neon_plain
}  // namespace tilellm::q8_detail

#undef TILELLM_Q8_DOTPROD
#undef TILELLM_Q8_ISA

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#else
#pragma GCC push_options
// GCC's arm_neon.h defines the dot product intrinsics for armv8.2-a+dotprod, and an always-inline intrinsic
// only inlines into a function whose target includes its own. The dot product is an ARMv8.2 extension, so
// every CPU that has it implements ARMv8.2.
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif

#define TILELLM_Q8_DOTPROD 1
#define TILELLM_Q8_ISA "neondot"

namespace tilellm::q8_detail {
namespace neon_dot {
namespace {
#include "format/quants_q8_neon.inc"
}  // namespace
}  // namespace neon_dot
}  // namespace tilellm::q8_detail

#undef TILELLM_Q8_DOTPROD
#undef TILELLM_Q8_ISA

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace tilellm::q8_detail {

const Q8KernelTable* neon_q8_kernels() {
  return cpu_features().neon ? &neon_plain::kNeonKernels : nullptr;
}

// Outside the target region: this must run on CPUs without the dot product instructions.
const Q8KernelTable* neondot_q8_kernels() {
  return cpu_features().neon_dotprod ? &neon_dot::kNeonKernels : nullptr;
}

}  // namespace tilellm::q8_detail

#else  // not AArch64

namespace tilellm::q8_detail {
const Q8KernelTable* neon_q8_kernels() {
  return nullptr;
}
const Q8KernelTable* neondot_q8_kernels() {
  return nullptr;
}
}  // namespace tilellm::q8_detail

#endif
