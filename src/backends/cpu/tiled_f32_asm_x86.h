// The full-tile fp32 micro-kernel of tiled_f32_gemm.cpp in assembly: C[8 x 48] (+)= Ap[8 x kc] x W[kc x 48].
//
// Why assembly: GCC 12, given the kernel as intrinsics, keeps the 24 accumulators in an array on the stack
// and stores them every k in some of its forms; an asm statement cannot take them as operands either
// (30-operand limit), so the statement owns zmm0-23 (accumulator of row r, tile j in zmm(3r + j)), zmm24-28
// (the broadcast activations, taken in turn so that one broadcast need not wait for the FMAs of the one
// before) and zmm29-31 (the three weight vectors of one k), and does its own C loads and stores.
//
// Each activation is broadcast once into a register (vbroadcastss) for its three FMAs rather than folded
// into each FMA as an embedded broadcast (vfmadd231ps mem{1to16}): the folded form makes 24 broadcast loads
// + 3 weight loads + 4 prefetches = 31 loads per k for 12 cycles of FMAs, more than the load ports keep up
// with beside the FMA ports; the registers make it 15. Measured: +7% on the kernel alone with the weights
// streaming from L2 (single thread), +5% to +18% on gemm-speed's float cells at M = 32-512 (2 threads,
// alternating binaries); M = 8 (bound by L3 bandwidth) unchanged.
//
// Layouts: Ap is one packed panel, [kc][8] floats (the 8 rows of one k side by side); w points at tile 0's
// first k of the chunk, tile j is ts_bytes further, each tile [kc][16] floats, 64-byte aligned; C rows are
// ldc_bytes apart and all 48 channels are stored (partial tiles take the intrinsic kernel).
//
// The weights stream from L2 (tiled_f32_gemm.cpp's blocking keeps A's panel in L1 instead), so each k also
// prefetches the three weight streams 1 KiB (16 k) ahead: measured 10-15% faster than leaving it to the
// hardware prefetcher (single thread, K = 2560, N = 4096, M = 32 and 512; 256 and 2048 bytes were no better).
#pragma once

#if defined(__x86_64__)
#include <cstddef>

namespace tilellm::f32gemm::detail {

// src: the tile's starting values, rows ldc_bytes apart like C's: C itself to accumulate, another matrix to
// add this product to it (Strassen-Winograd's chained quadrants), or null to start from zero. kc >= 1.
// pn: where to fetch one line into L2 per k, pn_step bytes apart (the weight block the caller runs next;
// tiled_f32_gemm.cpp), or null for none.
__attribute__((target("avx512f"))) inline void f32_micro_8x3_asm(const float* Ap, const float* w,
                                                                 size_t ts_bytes, long kc, float* C,
                                                                 size_t ldc_bytes, const float* src,
                                                                 const float* pn = nullptr,
                                                                 long pn_step = 0) {
  if (!pn) pn = Ap;  // nothing to fetch: the line is in L1 already
  float* c0 = C;     // rows 0-3: c0, c0 + ldc, c0 + 2 ldc, c0 + l3
  float* c4 = reinterpret_cast<float*>(reinterpret_cast<char*>(C) + 4 * ldc_bytes);  // rows 4-7
  const size_t l3 = 3 * ldc_bytes;
  const char* s0 = reinterpret_cast<const char*>(src);  // same row pattern as c0 / c4
  const char* s4 = src ? s0 + 4 * ldc_bytes : nullptr;
  __asm__ volatile(
      "test %[s0], %[s0]\n\t"
      "jnz 2f\n\t"
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vpxord %%zmm1, %%zmm1, %%zmm1\n\t"
      "vpxord %%zmm2, %%zmm2, %%zmm2\n\t"
      "vpxord %%zmm3, %%zmm3, %%zmm3\n\t"
      "vpxord %%zmm4, %%zmm4, %%zmm4\n\t"
      "vpxord %%zmm5, %%zmm5, %%zmm5\n\t"
      "vpxord %%zmm6, %%zmm6, %%zmm6\n\t"
      "vpxord %%zmm7, %%zmm7, %%zmm7\n\t"
      "vpxord %%zmm8, %%zmm8, %%zmm8\n\t"
      "vpxord %%zmm9, %%zmm9, %%zmm9\n\t"
      "vpxord %%zmm10, %%zmm10, %%zmm10\n\t"
      "vpxord %%zmm11, %%zmm11, %%zmm11\n\t"
      "vpxord %%zmm12, %%zmm12, %%zmm12\n\t"
      "vpxord %%zmm13, %%zmm13, %%zmm13\n\t"
      "vpxord %%zmm14, %%zmm14, %%zmm14\n\t"
      "vpxord %%zmm15, %%zmm15, %%zmm15\n\t"
      "vpxord %%zmm16, %%zmm16, %%zmm16\n\t"
      "vpxord %%zmm17, %%zmm17, %%zmm17\n\t"
      "vpxord %%zmm18, %%zmm18, %%zmm18\n\t"
      "vpxord %%zmm19, %%zmm19, %%zmm19\n\t"
      "vpxord %%zmm20, %%zmm20, %%zmm20\n\t"
      "vpxord %%zmm21, %%zmm21, %%zmm21\n\t"
      "vpxord %%zmm22, %%zmm22, %%zmm22\n\t"
      "vpxord %%zmm23, %%zmm23, %%zmm23\n\t"
      "jmp 1f\n\t"
      "2:\n\t"
      "vmovups (%[s0]), %%zmm0\n\t"
      "vmovups 64(%[s0]), %%zmm1\n\t"
      "vmovups 128(%[s0]), %%zmm2\n\t"
      "vmovups (%[s0],%[ldc],1), %%zmm3\n\t"
      "vmovups 64(%[s0],%[ldc],1), %%zmm4\n\t"
      "vmovups 128(%[s0],%[ldc],1), %%zmm5\n\t"
      "vmovups (%[s0],%[ldc],2), %%zmm6\n\t"
      "vmovups 64(%[s0],%[ldc],2), %%zmm7\n\t"
      "vmovups 128(%[s0],%[ldc],2), %%zmm8\n\t"
      "vmovups (%[s0],%[l3],1), %%zmm9\n\t"
      "vmovups 64(%[s0],%[l3],1), %%zmm10\n\t"
      "vmovups 128(%[s0],%[l3],1), %%zmm11\n\t"
      "vmovups (%[s4]), %%zmm12\n\t"
      "vmovups 64(%[s4]), %%zmm13\n\t"
      "vmovups 128(%[s4]), %%zmm14\n\t"
      "vmovups (%[s4],%[ldc],1), %%zmm15\n\t"
      "vmovups 64(%[s4],%[ldc],1), %%zmm16\n\t"
      "vmovups 128(%[s4],%[ldc],1), %%zmm17\n\t"
      "vmovups (%[s4],%[ldc],2), %%zmm18\n\t"
      "vmovups 64(%[s4],%[ldc],2), %%zmm19\n\t"
      "vmovups 128(%[s4],%[ldc],2), %%zmm20\n\t"
      "vmovups (%[s4],%[l3],1), %%zmm21\n\t"
      "vmovups 64(%[s4],%[l3],1), %%zmm22\n\t"
      "vmovups 128(%[s4],%[l3],1), %%zmm23\n\t"
      "1:\n\t"
      "prefetcht0 %c[pf](%[w])\n\t"
      "prefetcht0 %c[pf](%[w],%[ts],1)\n\t"
      "prefetcht0 %c[pf](%[w],%[ts],2)\n\t"
      "prefetcht1 (%[pn])\n\t"
      "add %[ps], %[pn]\n\t"
      "vmovaps (%[w]), %%zmm29\n\t"
      "vmovaps (%[w],%[ts],1), %%zmm30\n\t"
      "vmovaps (%[w],%[ts],2), %%zmm31\n\t"
      "vbroadcastss 0(%[a]), %%zmm24\n\t"
      "vfmadd231ps %%zmm24, %%zmm29, %%zmm0\n\t"
      "vfmadd231ps %%zmm24, %%zmm30, %%zmm1\n\t"
      "vfmadd231ps %%zmm24, %%zmm31, %%zmm2\n\t"
      "vbroadcastss 4(%[a]), %%zmm25\n\t"
      "vfmadd231ps %%zmm25, %%zmm29, %%zmm3\n\t"
      "vfmadd231ps %%zmm25, %%zmm30, %%zmm4\n\t"
      "vfmadd231ps %%zmm25, %%zmm31, %%zmm5\n\t"
      "vbroadcastss 8(%[a]), %%zmm26\n\t"
      "vfmadd231ps %%zmm26, %%zmm29, %%zmm6\n\t"
      "vfmadd231ps %%zmm26, %%zmm30, %%zmm7\n\t"
      "vfmadd231ps %%zmm26, %%zmm31, %%zmm8\n\t"
      "vbroadcastss 12(%[a]), %%zmm27\n\t"
      "vfmadd231ps %%zmm27, %%zmm29, %%zmm9\n\t"
      "vfmadd231ps %%zmm27, %%zmm30, %%zmm10\n\t"
      "vfmadd231ps %%zmm27, %%zmm31, %%zmm11\n\t"
      "vbroadcastss 16(%[a]), %%zmm28\n\t"
      "vfmadd231ps %%zmm28, %%zmm29, %%zmm12\n\t"
      "vfmadd231ps %%zmm28, %%zmm30, %%zmm13\n\t"
      "vfmadd231ps %%zmm28, %%zmm31, %%zmm14\n\t"
      "vbroadcastss 20(%[a]), %%zmm24\n\t"
      "vfmadd231ps %%zmm24, %%zmm29, %%zmm15\n\t"
      "vfmadd231ps %%zmm24, %%zmm30, %%zmm16\n\t"
      "vfmadd231ps %%zmm24, %%zmm31, %%zmm17\n\t"
      "vbroadcastss 24(%[a]), %%zmm25\n\t"
      "vfmadd231ps %%zmm25, %%zmm29, %%zmm18\n\t"
      "vfmadd231ps %%zmm25, %%zmm30, %%zmm19\n\t"
      "vfmadd231ps %%zmm25, %%zmm31, %%zmm20\n\t"
      "vbroadcastss 28(%[a]), %%zmm26\n\t"
      "vfmadd231ps %%zmm26, %%zmm29, %%zmm21\n\t"
      "vfmadd231ps %%zmm26, %%zmm30, %%zmm22\n\t"
      "vfmadd231ps %%zmm26, %%zmm31, %%zmm23\n\t"
      "add $64, %[w]\n\t"
      "add $32, %[a]\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      "vmovups %%zmm0, (%[c0])\n\t"
      "vmovups %%zmm1, 64(%[c0])\n\t"
      "vmovups %%zmm2, 128(%[c0])\n\t"
      "vmovups %%zmm3, (%[c0],%[ldc],1)\n\t"
      "vmovups %%zmm4, 64(%[c0],%[ldc],1)\n\t"
      "vmovups %%zmm5, 128(%[c0],%[ldc],1)\n\t"
      "vmovups %%zmm6, (%[c0],%[ldc],2)\n\t"
      "vmovups %%zmm7, 64(%[c0],%[ldc],2)\n\t"
      "vmovups %%zmm8, 128(%[c0],%[ldc],2)\n\t"
      "vmovups %%zmm9, (%[c0],%[l3],1)\n\t"
      "vmovups %%zmm10, 64(%[c0],%[l3],1)\n\t"
      "vmovups %%zmm11, 128(%[c0],%[l3],1)\n\t"
      "vmovups %%zmm12, (%[c4])\n\t"
      "vmovups %%zmm13, 64(%[c4])\n\t"
      "vmovups %%zmm14, 128(%[c4])\n\t"
      "vmovups %%zmm15, (%[c4],%[ldc],1)\n\t"
      "vmovups %%zmm16, 64(%[c4],%[ldc],1)\n\t"
      "vmovups %%zmm17, 128(%[c4],%[ldc],1)\n\t"
      "vmovups %%zmm18, (%[c4],%[ldc],2)\n\t"
      "vmovups %%zmm19, 64(%[c4],%[ldc],2)\n\t"
      "vmovups %%zmm20, 128(%[c4],%[ldc],2)\n\t"
      "vmovups %%zmm21, (%[c4],%[l3],1)\n\t"
      "vmovups %%zmm22, 64(%[c4],%[l3],1)\n\t"
      "vmovups %%zmm23, 128(%[c4],%[l3],1)\n\t"
      : [a] "+r"(Ap), [w] "+r"(w), [n] "+r"(kc), [pn] "+r"(pn)
      : [ts] "r"(ts_bytes), [c0] "r"(c0), [c4] "r"(c4), [ldc] "r"(ldc_bytes), [l3] "r"(l3), [s0] "r"(s0),
        [s4] "r"(s4), [pf] "i"(1024), [ps] "r"(pn_step)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
        "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "cc", "memory");
}

// The same for two tiles, C[8 x 32] (+)= Ap[8 x kc] x W[kc x 32]: the tail group where the channel count
// leaves two 16-channel tiles over a multiple of three (the Strassen quadrants of N = 1024, 4096 and 2560:
// 32, 128 and 80 tiles). Accumulator of row r, tile j in zmm(2r + j); broadcasts in zmm24-28; weight
// vectors in zmm29-30.
__attribute__((target("avx512f"))) inline void f32_micro_8x2_asm(const float* Ap, const float* w,
                                                                 size_t ts_bytes, long kc, float* C,
                                                                 size_t ldc_bytes, const float* src) {
  float* c0 = C;  // rows 0-3: c0, c0 + ldc, c0 + 2 ldc, c0 + l3
  float* c4 = reinterpret_cast<float*>(reinterpret_cast<char*>(C) + 4 * ldc_bytes);  // rows 4-7
  const size_t l3 = 3 * ldc_bytes;
  const char* s0 = reinterpret_cast<const char*>(src);  // same row pattern as c0 / c4
  const char* s4 = src ? s0 + 4 * ldc_bytes : nullptr;
  __asm__ volatile(
      "test %[s0], %[s0]\n\t"
      "jnz 2f\n\t"
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vpxord %%zmm1, %%zmm1, %%zmm1\n\t"
      "vpxord %%zmm2, %%zmm2, %%zmm2\n\t"
      "vpxord %%zmm3, %%zmm3, %%zmm3\n\t"
      "vpxord %%zmm4, %%zmm4, %%zmm4\n\t"
      "vpxord %%zmm5, %%zmm5, %%zmm5\n\t"
      "vpxord %%zmm6, %%zmm6, %%zmm6\n\t"
      "vpxord %%zmm7, %%zmm7, %%zmm7\n\t"
      "vpxord %%zmm8, %%zmm8, %%zmm8\n\t"
      "vpxord %%zmm9, %%zmm9, %%zmm9\n\t"
      "vpxord %%zmm10, %%zmm10, %%zmm10\n\t"
      "vpxord %%zmm11, %%zmm11, %%zmm11\n\t"
      "vpxord %%zmm12, %%zmm12, %%zmm12\n\t"
      "vpxord %%zmm13, %%zmm13, %%zmm13\n\t"
      "vpxord %%zmm14, %%zmm14, %%zmm14\n\t"
      "vpxord %%zmm15, %%zmm15, %%zmm15\n\t"
      "jmp 1f\n\t"
      "2:\n\t"
      "vmovups (%[s0]), %%zmm0\n\t"
      "vmovups 64(%[s0]), %%zmm1\n\t"
      "vmovups (%[s0],%[ldc],1), %%zmm2\n\t"
      "vmovups 64(%[s0],%[ldc],1), %%zmm3\n\t"
      "vmovups (%[s0],%[ldc],2), %%zmm4\n\t"
      "vmovups 64(%[s0],%[ldc],2), %%zmm5\n\t"
      "vmovups (%[s0],%[l3],1), %%zmm6\n\t"
      "vmovups 64(%[s0],%[l3],1), %%zmm7\n\t"
      "vmovups (%[s4]), %%zmm8\n\t"
      "vmovups 64(%[s4]), %%zmm9\n\t"
      "vmovups (%[s4],%[ldc],1), %%zmm10\n\t"
      "vmovups 64(%[s4],%[ldc],1), %%zmm11\n\t"
      "vmovups (%[s4],%[ldc],2), %%zmm12\n\t"
      "vmovups 64(%[s4],%[ldc],2), %%zmm13\n\t"
      "vmovups (%[s4],%[l3],1), %%zmm14\n\t"
      "vmovups 64(%[s4],%[l3],1), %%zmm15\n\t"
      "1:\n\t"
      "prefetcht0 %c[pf](%[w])\n\t"
      "prefetcht0 %c[pf](%[w],%[ts],1)\n\t"
      "vmovaps (%[w]), %%zmm29\n\t"
      "vmovaps (%[w],%[ts],1), %%zmm30\n\t"
      "vbroadcastss 0(%[a]), %%zmm24\n\t"
      "vfmadd231ps %%zmm24, %%zmm29, %%zmm0\n\t"
      "vfmadd231ps %%zmm24, %%zmm30, %%zmm1\n\t"
      "vbroadcastss 4(%[a]), %%zmm25\n\t"
      "vfmadd231ps %%zmm25, %%zmm29, %%zmm2\n\t"
      "vfmadd231ps %%zmm25, %%zmm30, %%zmm3\n\t"
      "vbroadcastss 8(%[a]), %%zmm26\n\t"
      "vfmadd231ps %%zmm26, %%zmm29, %%zmm4\n\t"
      "vfmadd231ps %%zmm26, %%zmm30, %%zmm5\n\t"
      "vbroadcastss 12(%[a]), %%zmm27\n\t"
      "vfmadd231ps %%zmm27, %%zmm29, %%zmm6\n\t"
      "vfmadd231ps %%zmm27, %%zmm30, %%zmm7\n\t"
      "vbroadcastss 16(%[a]), %%zmm28\n\t"
      "vfmadd231ps %%zmm28, %%zmm29, %%zmm8\n\t"
      "vfmadd231ps %%zmm28, %%zmm30, %%zmm9\n\t"
      "vbroadcastss 20(%[a]), %%zmm24\n\t"
      "vfmadd231ps %%zmm24, %%zmm29, %%zmm10\n\t"
      "vfmadd231ps %%zmm24, %%zmm30, %%zmm11\n\t"
      "vbroadcastss 24(%[a]), %%zmm25\n\t"
      "vfmadd231ps %%zmm25, %%zmm29, %%zmm12\n\t"
      "vfmadd231ps %%zmm25, %%zmm30, %%zmm13\n\t"
      "vbroadcastss 28(%[a]), %%zmm26\n\t"
      "vfmadd231ps %%zmm26, %%zmm29, %%zmm14\n\t"
      "vfmadd231ps %%zmm26, %%zmm30, %%zmm15\n\t"
      "add $64, %[w]\n\t"
      "add $32, %[a]\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      "vmovups %%zmm0, (%[c0])\n\t"
      "vmovups %%zmm1, 64(%[c0])\n\t"
      "vmovups %%zmm2, (%[c0],%[ldc],1)\n\t"
      "vmovups %%zmm3, 64(%[c0],%[ldc],1)\n\t"
      "vmovups %%zmm4, (%[c0],%[ldc],2)\n\t"
      "vmovups %%zmm5, 64(%[c0],%[ldc],2)\n\t"
      "vmovups %%zmm6, (%[c0],%[l3],1)\n\t"
      "vmovups %%zmm7, 64(%[c0],%[l3],1)\n\t"
      "vmovups %%zmm8, (%[c4])\n\t"
      "vmovups %%zmm9, 64(%[c4])\n\t"
      "vmovups %%zmm10, (%[c4],%[ldc],1)\n\t"
      "vmovups %%zmm11, 64(%[c4],%[ldc],1)\n\t"
      "vmovups %%zmm12, (%[c4],%[ldc],2)\n\t"
      "vmovups %%zmm13, 64(%[c4],%[ldc],2)\n\t"
      "vmovups %%zmm14, (%[c4],%[l3],1)\n\t"
      "vmovups %%zmm15, 64(%[c4],%[l3],1)\n\t"
      : [a] "+r"(Ap), [w] "+r"(w), [n] "+r"(kc)
      : [ts] "r"(ts_bytes), [c0] "r"(c0), [c4] "r"(c4), [ldc] "r"(ldc_bytes), [l3] "r"(l3), [s0] "r"(s0),
        [s4] "r"(s4), [pf] "i"(1024)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm12", "xmm13", "xmm14", "xmm15", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30",
        "cc", "memory");
}

}  // namespace tilellm::f32gemm::detail
#endif
