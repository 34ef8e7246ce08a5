// AVX2 + FMA + F16C build of the x86 quantized-activation kernels (quants_q8_x86.inc), picked at run time by
// quants_q8.cpp when the CPU has these instructions.
//
// The library is built for baseline x86-64: the kernels are compiled between the target pragmas below (as in
// quants_avx2.cpp). Headers are included before the region so that no inline function shared with other
// files is compiled for AVX2 here; the CPU probe is defined after it, so it runs on any x86-64.
#include <algorithm>
#include <cstring>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "format/quants.h"
#include "format/quants_kernels.h"
#include "format/quants_q8.h"
#include "format/quants_q8_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#define TILELLM_Q8_VNNI 0
#define TILELLM_Q8_ISA "avx2"

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

// Outside the target region: this must run on CPUs without AVX.
const Q8KernelTable* avx2_q8_kernels() {
  return cpu_features().avx2_fma_f16c ? &kX86Kernels : nullptr;
}

}  // namespace tilellm::q8_detail

#else  // not x86

namespace tilellm::q8_detail {
const Q8KernelTable* avx2_q8_kernels() {
  return nullptr;
}
}  // namespace tilellm::q8_detail

#endif
