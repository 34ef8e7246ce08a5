// GEMM kernels behind `tilellm gemm-speed` / `gemv-bw`: C[M,N] = A[M,K] x W^T, with W given as [N][K] (one
// row per output channel), in the four modes MNN's GemmSpeed measures on the CPU:
//   float   : fp32 weights and activations (MNN's x86 float path is fp32 at every precision setting);
//   int8b0  : W8A8. Weights asymmetric uint8 per output channel, one (scale, offset) over all of K;
//   int4b64 : W4A8. Weights asymmetric uint4, one (scale, offset) per 64 weights along K;
//   w4a8    : W4A8 with per-channel uint4 weights (one block spanning K).
// gemv-bw also runs 3- and 2-bit weights (block 64, same activations and math) for its low-bit rows.
// In the quantized modes the activations are quantized to int8 at run time, per row, symmetric:
//   sa[m] = max_k |A[m,k]| / 127,  qa[m,k] = clamp(round(A[m,k] / sa[m]), -127, 127)
// and a weight dequantizes as  w[n,k] = u[n,k] * scale[n,b] + offset[n,b]  (b = k / block, u unsigned), so
//   C[m,n] = sa[m] * sum_b ( scale[n,b] * sum_{k in b} u[n,k]*qa[m,k]  +  offset[n,b] * sum_{k in b} qa[m,k]
//   ).
// The inner sums are exact int32 (vpdpbusd takes the unsigned weight codes and the signed activations as
// they are); only the per-block float combination rounds. Scales and offsets are stored as fp16 (rounded at
// quantization time, so dequantize() returns exactly what the kernels use).
//
// Every kernel has a portable scalar path, always compiled; the AVX-512 VNNI path is picked at run time.
// Weights are packed once (outside any timed region) into 128-byte aligned buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/aligned.h"
#include "runtime/thread_pool.h"

namespace tilellm::gemm {

enum class Isa { kScalar, kAvx512Vnni };
// The best ISA this CPU runs (AVX512F/BW/VL + VNNI + FMA + F16C), else kScalar.
Isa best_isa();
const char* isa_name(Isa isa);

// Output channels are handled in tiles of 16 (one zmm of fp32 or int32 lanes); N is padded to a multiple.
inline constexpr int kTileN = 16;

// ---- float -------------------------------------------------------------------------------------------
// Whether pack_f32 also forms the Strassen-Winograd weight operands: kAuto where the products are large
// enough for it to pay (used for M at or above a threshold), kAlways for every M (tests), kNever.
enum class F32Strassen { kAuto, kAlways, kNever };

struct PackedF32 {
  int K = 0, N = 0, Np = 0;  // Np = N rounded up to kTileN
  AlignedBuffer w;           // float [Np/16][K][16]: 16 output channels side by side per k
  // One level of Strassen-Winograd (backends/cpu/gemm_f32_strassen.cpp). B = W^T [K][N] is split into
  // quadrants of Kh x Nh (Kh = ceil(K/2), Nh = ceil(N/2); a missing last row or column reads as zero) and the
  // seven weight-side operands B11, B21, B22, -T4, T1, T2, T3 are stored here one after the other, each
  // packed like w: [Nhp/16][Kh][16] floats, Nhp = Nh rounded up to kTileN. That is 7/4 of w's memory on top
  // of w: the weights are constants, so their sums are formed once rather than per call. Empty when not
  // formed.
  int Kh = 0, Nh = 0;
  int strassen_min_m = 0;  // gemm_f32 (AVX-512) takes the Strassen path for M >= this; 0: never
  AlignedBuffer sw;
};
PackedF32 pack_f32(const float* W, int K, int N, F32Strassen strassen = F32Strassen::kAuto);  // W: [N][K]
// C: [M][N]. pool may be null (single thread).
void gemm_f32(const PackedF32& p, const float* A, int M, float* C, ThreadPool* pool, Isa isa);

// ---- quantized weights ---------------------------------------------------------------------------------
struct QuantMatrix {
  int K = 0, N = 0;
  int Kp = 0;     // K padded: to the block, or (block 0) to the code group: 4 k (8-bit), 8 (4-bit), 16 (3, 2)
  int Np = 0;     // N padded to kTileN
  int bits = 8;   // 8, 4, 3 or 2
  int block = 0;  // k-values per (scale, offset) pair; equals Kp for per-channel ("block 0") modes
  int nblocks = 0;  // Kp / block
  // 8-bit codes: [Np/16][Kp/4][16 channels][4 k] uint8 (one zmm feeds vpdpbusd 16 channels x 4 k).
  // 4-bit codes: [Np/16][Kp/8][64 bytes]; byte j holds channel j/4: k = 8g + j%4 in the low nibble and
  //              k = 8g + 4 + j%4 in the high nibble, so (v & 15) and (v >> 4) are each an 8-bit group of 4.
  // 2-bit codes: [Np/16][Kp/16][64 bytes]; byte j holds channel j/4, k = 16g + 4s + j%4 in bits 2s, 2s+1
  //              (s = 0..3), so (v >> 2s) & 3 is an 8-bit group of 4.
  // 3-bit codes: [Np/16][Kp/16][96 bytes]: the low two bits as the 2-bit layout (64 bytes), then the third
  //              bit as four 64-bit masks (s = 0..3), bit j of mask s for the code at byte j, bits 2s, 2s+1.
  AlignedBuffer codes;
  // [Np/16][nblocks][2][16] fp16: the scales of 16 channels, then their offsets (64 bytes per block).
  AlignedBuffer params;

  size_t code_bytes() const { return size_t(Np) * Kp * bits / 8; }
  size_t param_bytes() const { return size_t(Np) * nblocks * 2 * sizeof(uint16_t); }
  float dequantize(int n, int k) const;  // the weight the kernels use, for references
};

// Asymmetric min/max quantization of W [N][K]. block = 0 means one block over all of K (Int8-Block0, W4A8);
// block > 0 must divide K and be a multiple of 8 (throws tilellm::Error otherwise).
QuantMatrix quantize_int8(const float* W, int K, int N, int block);  // gemm_int8b0.cpp
QuantMatrix quantize_int4(const float* W, int K, int N, int block);  // gemm_int4b64.cpp
// 3 and 2 bits (gemm_lowbit.cpp): block > 0 must divide K and be a multiple of 16.
QuantMatrix quantize_int3(const float* W, int K, int N, int block);
QuantMatrix quantize_int2(const float* W, int K, int N, int block);
// One of the four above by bit width (8, 4, 3, 2; throws tilellm::Error otherwise).
QuantMatrix quantize_bits(const float* W, int K, int N, int bits, int block);  // gemm_w4a8.cpp

// Run-time activation quantization (see the top of this file), sized for a matrix with Kp / block.
struct QuantActs {
  int M = 0, Kp = 0, block = 0, nblocks = 0;
  AlignedBuffer q;       // int8 [M][Kp], zero past K
  AlignedBuffer sums;    // int32 [M][nblocks]: sum of q over each block
  AlignedBuffer scales;  // float [M]: sa
  void resize(int M, const QuantMatrix& w);
};
// isa: kScalar runs the portable row quantizer (tests compare it with the vector one); the codes are the
// same.
void quantize_acts(const float* A, int M, int K, QuantActs& out, ThreadPool* pool,
                   Isa isa = best_isa());  // gemm_w4a8.cpp

// C [M][N] from quantized weights and activations (any bit width).
void gemm_quant(const QuantMatrix& w, const QuantActs& a, float* C, ThreadPool* pool, Isa isa);

// Kernels per bit width (gemm_int8b0.cpp, gemm_int4b64.cpp, gemm_lowbit.cpp): rows [m0,m1) x channel tiles
// [t0,t1).
void gemm_q8_tiles(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1,
                   Isa isa);
void gemm_q4_tiles(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1,
                   Isa isa);
void gemm_q3_tiles(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1,
                   Isa isa);  // gemm_lowbit.cpp, as gemm_q2_tiles
void gemm_q2_tiles(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1,
                   Isa isa);

}  // namespace tilellm::gemm
