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
#include "base/isa_target.h"

#if TILELLM_ISA_COMPILES(NEON)
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

TILELLM_ISA_REGION_BEGIN(NEONDOT)

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

TILELLM_ISA_REGION_END()
#endif

namespace tilellm::tiled_detail {
TILELLM_ISA_PROVIDER(Kernel, neon_tiled_kernel, NEON, neon_plain::kernel)
TILELLM_ISA_PROVIDER(Kernel, neon_tiled_k_kernel, NEON, neon_plain::k_kernel)
// Outside the target region: these must run on CPUs without the dot product instructions.
TILELLM_ISA_PROVIDER(Kernel, neondot_tiled_kernel, NEONDOT, neon_dot::kernel)
TILELLM_ISA_PROVIDER(Kernel, neondot_tiled_k_kernel, NEONDOT, neon_dot::k_kernel)
}  // namespace tilellm::tiled_detail
