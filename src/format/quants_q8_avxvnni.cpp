// AVX-VNNI build of the x86 quantized-activation kernels (quants_q8_x86.inc): the AVX2 kernels with vpdpbusd
// (VEX-encoded, 256-bit) for the int8 dot products of the 32-element formats, one instruction where AVX2
// needs vpmaddubsw + vpmaddwd. Picked at run time by quants_q8.cpp when the CPU has AVX-VNNI (Alder Lake and
// later client cores, Sapphire Rapids and later Xeons, Zen 5).
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

#if TILELLM_ISA_COMPILES(AVXVNNI)
#include <immintrin.h>

TILELLM_ISA_REGION_BEGIN(AVXVNNI)

#define TILELLM_Q8_VNNI 1
#define TILELLM_Q8_ISA "avxvnni"

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
TILELLM_ISA_PROVIDER(const Q8KernelTable*, avxvnni_q8_kernels, AVXVNNI, &kX86Kernels)
}  // namespace tilellm::q8_detail
