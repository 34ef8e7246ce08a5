// AVX2 + FMA + F16C build of the x86 quantized-activation kernels (quants_q8_x86.inc), picked at run time by
// quants_q8.cpp when the CPU has these instructions.
//
// The library is built for baseline x86-64: the kernels are compiled between the target pragmas below (as in
// quants_avx2.cpp). Headers are included before the region so that no inline function shared with other
// files is compiled for AVX2 here; the CPU probe is defined after it, so it runs on any x86-64.
#include <algorithm>
#include <cstring>

#include "base/fp16.h"
#include "base/isa_target.h"
#include "format/quants.h"
#include "format/quants_kernels.h"
#include "format/quants_q8.h"
#include "format/quants_q8_kernels.h"

#if TILELLM_ISA_COMPILES(AVX2)
#include <immintrin.h>

TILELLM_ISA_REGION_BEGIN(AVX2)

#define TILELLM_Q8_VNNI 0
#define TILELLM_Q8_ISA "avx2"

namespace tilellm::q8_detail {
namespace {
#include "format/quants_q8_x86.inc"
}  // namespace
}  // namespace tilellm::q8_detail

#undef TILELLM_Q8_VNNI
#undef TILELLM_Q8_ISA

TILELLM_ISA_REGION_END()
#endif

namespace tilellm::q8_detail {
// Outside the target region: this must run on CPUs without the ISA.
TILELLM_ISA_PROVIDER(const Q8KernelTable*, avx2_q8_kernels, AVX2, &kX86Kernels)
}  // namespace tilellm::q8_detail
