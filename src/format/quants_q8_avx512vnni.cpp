// AVX-512 build of the x86 quantized-activation kernels (quants_q8_x86.inc): still 256-bit vectors, but
// EVEX-encoded, so the compiler has 32 vector registers (the K-quant kernels no longer spill) and three-input
// logic ops, and vpdpbusd (AVX512-VNNI) takes the int8 dot products. Picked at run time by quants_q8.cpp when
// the CPU has AVX512F/VL/BW and AVX512-VNNI (Ice Lake and later Xeons, Zen 4 and later).
//
// Same layout as quants_q8_avx2.cpp: headers before the target region, the probe after it.
#include <algorithm>
#include <cstring>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "format/quants.h"
#include "format/quants_kernels.h"
#include "format/quants_q8.h"
#include "format/quants_q8_kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
#endif

#define TILELLM_Q8_VNNI 2
#define TILELLM_Q8_ISA "avx512vnni"

namespace tilellm::q8_detail {
namespace {
#include "format/quants_q8_x86.inc"
}  // namespace
}  // namespace tilellm::q8_detail

#undef TILELLM_Q8_VNNI
#undef TILELLM_Q8_ISA

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace tilellm::q8_detail {

// Outside the target region: this must run on CPUs without AVX-512.
const Q8KernelTable* avx512vnni_q8_kernels() {
  return cpu_features().avx512_vnni ? &kX86Kernels : nullptr;
}

}  // namespace tilellm::q8_detail

#else  // not x86-64

namespace tilellm::q8_detail {
const Q8KernelTable* avx512vnni_q8_kernels() {
  return nullptr;
}
}  // namespace tilellm::q8_detail

#endif
