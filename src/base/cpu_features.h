// What the CPU this process runs on can execute, read once. The ISA levels the kernels dispatch on follow
// from these flags (base/cpu_isa.h; the library itself is compiled for the baseline ISA), and benchmarks
// print them.
#pragma once

#include <string>

namespace tilellm {

struct CpuFeatures {
  bool avx2_fma_f16c = false;  // AVX2 + FMA + F16C, with the OS saving the YMM state
  bool avx_vnni = false;       // AVX-VNNI (256-bit vpdpbusd without AVX-512), on top of the above
  bool avx512_vnni = false;   // AVX-512 F/VL/BW + VNNI, with the OS saving the ZMM state, on top of the above
  bool avx512_bf16 = false;   // AVX512_BF16
  bool neon = false;          // ARMv8 Advanced SIMD
  bool neon_dotprod = false;  // ARMv8.2 dot product
  std::string model;          // CPU model name (e.g. from /proc/cpuinfo), "" if unknown
};

const CpuFeatures& cpu_features();

}  // namespace tilellm
