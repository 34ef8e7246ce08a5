// AVX2 + FMA + F16C build of the tiled matmul kernels (tiled_matmul_x86.inc), for x86 CPUs without AVX-512:
// vpmaddubsw + vpmaddwd for the int8 products.
// Headers before the target region, the probe after it (it runs on any x86-64).
#include <algorithm>
#include <cstring>

#include "backends/cpu/tiled_matmul_kernels.h"
#include "base/cpu_features.h"

#if defined(__x86_64__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#define TILELLM_TILED_VNNI 0

namespace tilellm::tiled_detail {
namespace {
#include "backends/cpu/tiled_matmul_x86.inc"
// After it: the K-quant kernels use its helpers.
#include "backends/cpu/tiled_matmul_k_x86.inc"
}  // namespace
}  // namespace tilellm::tiled_detail

#undef TILELLM_TILED_VNNI

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace tilellm::tiled_detail {

Kernel avx2_tiled_kernel() {
  return cpu_features().avx2_fma_f16c ? kernel : nullptr;
}

Kernel avx2_tiled_k_kernel() {
  return cpu_features().avx2_fma_f16c ? k_kernel : nullptr;
}

}  // namespace tilellm::tiled_detail

#else  // not x86-64, or a compiler without these intrinsics

namespace tilellm::tiled_detail {

Kernel avx2_tiled_kernel() {
  return nullptr;
}

Kernel avx2_tiled_k_kernel() {
  return nullptr;
}

}  // namespace tilellm::tiled_detail

#endif
