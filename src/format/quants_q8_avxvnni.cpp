// AVX-VNNI build of the x86 quantized-activation kernels (quants_q8_x86.inc): the AVX2 kernels with vpdpbusd
// (VEX-encoded, 256-bit) for the int8 dot products of the 32-element formats, one instruction where AVX2
// needs vpmaddubsw + vpmaddwd. Picked at run time by quants_q8.cpp when the CPU has AVX-VNNI (Alder Lake and
// later client cores, Sapphire Rapids and later Xeons, Zen 5).
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

#if defined(__x86_64__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))
#include <cpuid.h>
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif

#define TILELLM_Q8_VNNI 1
#define TILELLM_Q8_ISA "avxvnni"

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

// Outside the target region. AVX-VNNI is CPUID leaf 7, sub-leaf 1, EAX bit 4; the rest as for AVX2
// (__builtin_cpu_supports("avx2") also checks that the OS saves the YMM registers).
const Q8KernelTable* avxvnni_q8_kernels() {
  return cpu_features().avx_vnni ? &kX86Kernels : nullptr;
}

}  // namespace tilellm::q8_detail

#else  // not x86-64, or a compiler without AVX-VNNI intrinsics

namespace tilellm::q8_detail {
const Q8KernelTable* avxvnni_q8_kernels() {
  return nullptr;
}
}  // namespace tilellm::q8_detail

#endif
