// AVX-512 build of the x86 quantized-activation kernels (quants_q8_x86.inc): still 256-bit vectors, but
// EVEX-encoded, so the compiler has 32 vector registers (the K-quant kernels no longer spill) and three-input
// logic ops, and vpdpbusd (AVX512-VNNI) takes the int8 dot products. Picked at run time by quants_q8.cpp when
// the CPU has AVX512F/VL/BW and AVX512-VNNI (Ice Lake and later Xeons, Zen 4 and later).
//
// Same layout as quants_q8_avx2.cpp: headers before the target region, the probe after it.
#include <algorithm>
#include <cstring>

#include "base/fp16.h"
#include "base/isa_target.h"
#include "format/quants.h"
#include "format/quants_kernels.h"
#include "format/quants_q8.h"
#include "format/quants_q8_kernels.h"

#if TILELLM_ISA_COMPILES(AVX512VNNI)
#include <immintrin.h>

TILELLM_ISA_REGION_BEGIN(AVX512VNNI)

#define TILELLM_Q8_VNNI 2
#define TILELLM_Q8_ISA "avx512vnni"

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
TILELLM_ISA_PROVIDER(const Q8KernelTable*, avx512vnni_q8_kernels, AVX512VNNI, &kX86Kernels)
}  // namespace tilellm::q8_detail
