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

#include "base/fp16.h"
#include "base/isa_target.h"
#include "format/quants.h"
#include "format/quants_kernels.h"
#include "format/quants_q8.h"
#include "format/quants_q8_kernels.h"

#if TILELLM_ISA_COMPILES(NEON)
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

TILELLM_ISA_REGION_BEGIN(NEONDOT)

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

TILELLM_ISA_REGION_END()
#endif

namespace tilellm::q8_detail {
TILELLM_ISA_PROVIDER(const Q8KernelTable*, neon_q8_kernels, NEON, &neon_plain::kNeonKernels)
// Outside the target region: this must run on CPUs without the dot product instructions.
TILELLM_ISA_PROVIDER(const Q8KernelTable*, neondot_q8_kernels, NEONDOT, &neon_dot::kNeonKernels)
}  // namespace tilellm::q8_detail
