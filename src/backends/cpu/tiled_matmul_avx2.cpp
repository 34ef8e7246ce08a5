// AVX2 + FMA + F16C build of the tiled matmul kernels (tiled_matmul_x86.inc), for x86 CPUs without AVX-512:
// vpmaddubsw + vpmaddwd for the int8 products.
// Headers before the target region, the probe after it (it runs on any x86-64).
#include <algorithm>
#include <cstring>

#include "backends/cpu/tiled_matmul_kernels.h"
#include "base/isa_target.h"

#if TILELLM_ISA_COMPILES(AVX2)
#include <immintrin.h>

TILELLM_ISA_REGION_BEGIN(AVX2)

#define TILELLM_TILED_VNNI 0

namespace tilellm::tiled_detail {
namespace {
#include "backends/cpu/tiled_matmul_x86.inc"
// After it: the K-quant kernels use its helpers.
#include "backends/cpu/tiled_matmul_k_x86.inc"
}  // namespace
}  // namespace tilellm::tiled_detail

#undef TILELLM_TILED_VNNI

TILELLM_ISA_REGION_END()
#endif

namespace tilellm::tiled_detail {
TILELLM_ISA_PROVIDER(Kernel, avx2_tiled_kernel, AVX2, kernel)
TILELLM_ISA_PROVIDER(Kernel, avx2_tiled_k_kernel, AVX2, k_kernel)
}  // namespace tilellm::tiled_detail
