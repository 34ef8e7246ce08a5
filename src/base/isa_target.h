// The per-ISA file scaffolding of the CPU kernels, written once. The library is built for the baseline ISA
// (x86-64, or ARMv8-A); a file of kernels for one ISA compiles them inside a region whose functions all
// carry that ISA's target attribute, and defines its provider outside the region, so the probe itself runs
// on any CPU of the architecture:
//
//   #include ...                                 // headers first: no shared inline function is compiled
//   #if TILELLM_ISA_COMPILES(AVX2)                // for the ISA here
//   #include <immintrin.h>
//   TILELLM_ISA_REGION_BEGIN(AVX2)
//   namespace ... { kernels ...; const KernelTable kTable = {...}; }
//   TILELLM_ISA_REGION_END()
//   #endif
//   TILELLM_ISA_PROVIDER(const KernelTable*, avx2_kernels, AVX2, &kTable)   // null off x86 or without AVX2
//
// ISAs (base/cpu_isa.h names them): AVX2 (AVX2 + FMA + F16C), AVXVNNI (the same + AVX-VNNI), AVX512VNNI
// (AVX-512 F/BW/VL/VNNI on top of AVX2), NEON (ARMv8-A Advanced SIMD: the baseline, no region needed),
// NEONDOT (+ the ARMv8.2 dot product). A single function takes TILELLM_ISA_FN(ISA) instead of a region.
#pragma once

#include "base/cpu_isa.h"

#define TILELLM_ISA_STR_AVX2 "avx2,fma,f16c"
#define TILELLM_ISA_STR_AVXVNNI "avx2,fma,f16c,avxvnni"
#define TILELLM_ISA_STR_AVX512VNNI "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"
// GCC's arm_neon.h defines the dot product intrinsics for armv8.2-a+dotprod, and an always-inline intrinsic
// only inlines into a function whose target includes its own; the dot product is an ARMv8.2 extension, so
// every CPU that has it implements ARMv8.2. (NEON is the AArch64 baseline: it takes no region.)
#if defined(__clang__)
#define TILELLM_ISA_STR_NEONDOT "dotprod"
#else
#define TILELLM_ISA_STR_NEONDOT "arch=armv8.2-a+dotprod"
#endif

#define TILELLM_ISA_ENUM_AVX2 ::tilellm::CpuIsa::Avx2
#define TILELLM_ISA_ENUM_AVXVNNI ::tilellm::CpuIsa::AvxVnni
#define TILELLM_ISA_ENUM_AVX512VNNI ::tilellm::CpuIsa::Avx512Vnni
#define TILELLM_ISA_ENUM_NEON ::tilellm::CpuIsa::Neon
#define TILELLM_ISA_ENUM_NEONDOT ::tilellm::CpuIsa::NeonDot

#if defined(__x86_64__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))
#define TILELLM_ISA_ARCH_AVX2 1
#define TILELLM_ISA_ARCH_AVXVNNI 1
#define TILELLM_ISA_ARCH_AVX512VNNI 1
#else
#define TILELLM_ISA_ARCH_AVX2 0
#define TILELLM_ISA_ARCH_AVXVNNI 0
#define TILELLM_ISA_ARCH_AVX512VNNI 0
#endif
#if defined(__aarch64__)
#define TILELLM_ISA_ARCH_NEON 1
#define TILELLM_ISA_ARCH_NEONDOT 1
#else
#define TILELLM_ISA_ARCH_NEON 0
#define TILELLM_ISA_ARCH_NEONDOT 0
#endif

// Whether this build compiles kernels for the ISA (its architecture, and a compiler that has them).
#define TILELLM_ISA_COMPILES(ISA) TILELLM_ISA_ARCH_##ISA

// _Pragma of the text after its macros are expanded (the ISA's target string).
#define TILELLM_ISA_PRAGMA_STR(x) _Pragma(#x)
#define TILELLM_ISA_PRAGMA(x) TILELLM_ISA_PRAGMA_STR(x)
#if defined(__clang__)
#define TILELLM_ISA_REGION_BEGIN(ISA) \
  TILELLM_ISA_PRAGMA(                 \
      clang attribute push(__attribute__((target(TILELLM_ISA_STR_##ISA))), apply_to = function))
#define TILELLM_ISA_REGION_END() TILELLM_ISA_PRAGMA(clang attribute pop)
#else
#define TILELLM_ISA_REGION_BEGIN(ISA) \
  TILELLM_ISA_PRAGMA(GCC push_options) TILELLM_ISA_PRAGMA(GCC target(TILELLM_ISA_STR_##ISA))
#define TILELLM_ISA_REGION_END() TILELLM_ISA_PRAGMA(GCC pop_options)
#endif

// One function compiled for the ISA (outside any region); always-inline helpers take TILELLM_ISA_HOT.
#define TILELLM_ISA_FN(ISA) __attribute__((target(TILELLM_ISA_STR_##ISA)))
#define TILELLM_ISA_HOT(ISA) TILELLM_ISA_FN(ISA) inline __attribute__((always_inline))

// Defines `Type name()`: `value` when this build compiles the ISA and this CPU runs it, else null (value is
// not compiled where the ISA is not).
#define TILELLM_ISA_PROVIDER(Type, name, ISA, value) \
  Type name() {                                      \
    return TILELLM_ISA_PROVIDED_##ISA(value);        \
  }
#define TILELLM_ISA_PROVIDED_IF(compiles, ISA, value) TILELLM_ISA_PROVIDED_IF_##compiles(ISA, value)
#define TILELLM_ISA_PROVIDED_IF_1(ISA, value) \
  (::tilellm::cpu_isa_supported(TILELLM_ISA_ENUM_##ISA) ? (value) : nullptr)
#define TILELLM_ISA_PROVIDED_IF_0(ISA, value) nullptr
#define TILELLM_ISA_PROVIDED_X(compiles, ISA, value) TILELLM_ISA_PROVIDED_IF(compiles, ISA, value)
#define TILELLM_ISA_PROVIDED_AVX2(value) TILELLM_ISA_PROVIDED_X(TILELLM_ISA_ARCH_AVX2, AVX2, value)
#define TILELLM_ISA_PROVIDED_AVXVNNI(value) TILELLM_ISA_PROVIDED_X(TILELLM_ISA_ARCH_AVXVNNI, AVXVNNI, value)
#define TILELLM_ISA_PROVIDED_AVX512VNNI(value) \
  TILELLM_ISA_PROVIDED_X(TILELLM_ISA_ARCH_AVX512VNNI, AVX512VNNI, value)
#define TILELLM_ISA_PROVIDED_NEON(value) TILELLM_ISA_PROVIDED_X(TILELLM_ISA_ARCH_NEON, NEON, value)
#define TILELLM_ISA_PROVIDED_NEONDOT(value) TILELLM_ISA_PROVIDED_X(TILELLM_ISA_ARCH_NEONDOT, NEONDOT, value)
