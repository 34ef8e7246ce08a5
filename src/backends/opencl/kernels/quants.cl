// GGML block formats as the device holds them, and their readers. Every weight is first formed exactly as
// the format defines it (the values of format/quants.h's dequantize_row) and then used in float arithmetic:
// the device computes the CPU backend's float path. Halves are read with vload_half, core OpenCL 1.2 (no
// cl_khr_fp16 needed).
//
// Block formats (Q4_0, Q4_1, Q8_0) are split per row at upload (opencl_backend.cpp), so that a block's codes
// are one aligned vector load: a device row of nb = n_in / 32 blocks is
//   [nb][QB bytes] codes, then [nb] parameters, padded to a multiple of 16 bytes (row_bytes);
//   QB = 16 (Q4_0, Q4_1) or 32 (Q8_0); parameters: half d (Q4_0, Q8_0) or half d, half m (Q4_1).
// With the buffer and every row 16-byte aligned, block b's codes start at a multiple of 16 bytes.
// The converted formats of --weights (format/asym_quant.h: quantize_row_asym, the same codes, fp16
// scales and offsets the CPU tiles hold; the device row is written at upload, opencl_backend.cpp):
//   INT4B64: [nb][16 bytes] codes as Q4_0's, then [ng = ceil(nb / 2)] (half d, half m), one pair per 64
//            weights (a 64-group is two 32-blocks sharing one pair; the last group is one block when
//            nb is odd), padded to a multiple of 16 bytes.
//   INT8B0:  [nb][32 bytes] codes (unsigned), then one (half d, half m) for the whole row, padded to 16.
//   KQ8:     the K-quants Q5_K, Q6_K and Q5_0 / Q5_1 at upload (format/quants.h row_code_groups):
//            [n][1 byte] signed codes, then [n / 16] (float scale, float offset), padded to 16 bytes;
//            scale * code + offset is the format's exact weight.
//   KQ4:     Q4_K at upload (its codes are 4-bit and its (scale, min) are per 32 weights): Q4_1's split row
//            with float parameters, [nb][16 bytes] codes as Q4_0's, then [nb] (float scale, float offset),
//            padded to 16 bytes: 0.75 bytes a weight where KQ8 takes 1.5.
// Weights (q = the stored integer):
//   Q4_0: w = d * (q - 8); element j < 16: low nibble of code byte j, j >= 16: high nibble of byte j - 16
//   Q4_1: w = d * q + m; nibbles as Q4_0
//   Q8_0: w = d * q, q the signed code byte j
//   INT4B64: w = d * q + m, (d, m) of group b / 2; nibbles as Q4_0
//   INT8B0: w = d * q + m, q the unsigned code byte j
//   KQ8: w = scale * q + offset, q the signed code byte j, (scale, offset) of group j / 16
//   KQ4: w = scale * q + offset, nibbles as Q4_0, (scale, offset) of block j / 32
//   F16: one half per element; F32: one float per element (rows as in the file).
// Element readers take (row, element i, n = elements per row).

// Small integer codes as floats without an int -> float conversion, which some GPUs (NVIDIA's among them)
// issue at a fraction of their FMA rate, making a decode matvec compute-bound on the conversions alone: for
// 0 <= n < 2^23 the float 2^23 + n has the bits 0x4B000000 | n, so as_float(0x4B000000 | n) - (2^23 + off)
// is n - off exactly. A shift and mask, an or and a subtract per weight, all full-rate.
float4 tl_codes4(uint4 n, float off) { return as_float4(n | 0x4B000000u) - (8388608.0f + off); }
// The four bytes of c (lowest-addressed first), or the low or high nibbles of c's bytes, as floats minus off.
float4 tl_bytes4(uint c, float off) { return tl_codes4(((uint4)(c) >> (uint4)(0, 8, 16, 24)) & 255u, off); }
float4 tl_lo4(uint c, float off) { return tl_codes4(((uint4)(c) >> (uint4)(0, 8, 16, 24)) & 15u, off); }
float4 tl_hi4(uint c, float off) { return tl_codes4(((uint4)(c) >> (uint4)(4, 12, 20, 28)) & 15u, off); }
// Signed bytes (Q8_0): flipping the sign bit makes each byte q + 128, unsigned.
float4 tl_sbytes4(uint c) { return tl_bytes4(c ^ 0x80808080u, 128.0f); }
// The same over 16 code bytes (one aligned uint4 load): bytes 0..15, or 16 low or high nibbles.
float16 tl_lo16(uint4 c, float off) {
  return (float16)(tl_lo4(c.x, off), tl_lo4(c.y, off), tl_lo4(c.z, off), tl_lo4(c.w, off));
}
float16 tl_hi16(uint4 c, float off) {
  return (float16)(tl_hi4(c.x, off), tl_hi4(c.y, off), tl_hi4(c.z, off), tl_hi4(c.w, off));
}
float16 tl_bytes16(uint4 c, float off) {
  return (float16)(tl_bytes4(c.x, off), tl_bytes4(c.y, off), tl_bytes4(c.z, off), tl_bytes4(c.w, off));
}
float16 tl_sbytes16(uint4 c) {
  return (float16)(tl_sbytes4(c.x), tl_sbytes4(c.y), tl_sbytes4(c.z), tl_sbytes4(c.w));
}

float tl_half(__global const uchar* p) { return vload_half(0, (__global const half*)p); }

float tl_f16_at(__global const uchar* row, int i, int n) { return vload_half(i, (__global const half*)row); }
float tl_f32_at(__global const uchar* row, int i, int n) { return ((__global const float*)row)[i]; }
// Elements 4c .. 4c+3 of a float row.
float4 tl_f16_at4(__global const uchar* row, int c) { return vload_half4(c, (__global const half*)row); }
float4 tl_f32_at4(__global const uchar* row, int c) { return vload4(c, (__global const float*)row); }
// A 32-weight block as read from its row, before any weight is formed (the tiled GEMM reads the next block
// into one of these while it multiplies the current one, and forms the weights after: gemm.cl): the code
// bytes (one or two uint4; the float formats: the 32 values' bits in eight) and the parameters' bits (a half
// d, a pair of halves (d, m), float pairs: per format below). Only the fields a format uses are live.
typedef struct {
  uint4 c[8];
  uint4 p;
} tl_raw32;

// A half held as its 16 bits (the low ones of h) as a float: converted where the weights are formed, so that
// reading a block does not wait for its load.
float tl_half_bits(uint h) {
  const ushort s = (ushort)h;
  return vload_half(0, (const half*)&s);
}

// The block formats, per format FMT: tl_fetch_FMT(row, b, n_in, r) reads block b of a row of n_in / 32 blocks
// into r; tl_decode_FMT(r, w) writes its 32 exact weights to w. TL_BLOCK32 does both.
#define TL_BLOCK32(FMT, ROW, B, N_IN, W) \
  {                                      \
    tl_raw32 r_;                         \
    tl_fetch_##FMT(ROW, B, N_IN, &r_);   \
    tl_decode_##FMT(&r_, W);             \
  }

// The float formats read elements 32b .. 32b+31 (the last, partial block of a row whose length is not a
// multiple of 32: element by element, zeros past n_in) as floats at once, with their readers above.
#define TL_FETCH_FLOATS(FMT)                                                                         \
  void tl_fetch_##FMT(__global const uchar* row, int b, int n_in, tl_raw32* r) {                     \
    for (int c = 0; c < 8; ++c) {                                                                    \
      const int i = 32 * b + 4 * c;                                                                  \
      r->c[c] = as_uint4(i + 4 <= n_in ? tl_##FMT##_at4(row, 8 * b + c)                              \
                                       : (float4)(i < n_in ? tl_##FMT##_at(row, i, n_in) : 0.0f,     \
                                                  i + 1 < n_in ? tl_##FMT##_at(row, i + 1, n_in) : 0.0f, \
                                                  i + 2 < n_in ? tl_##FMT##_at(row, i + 2, n_in) : 0.0f, \
                                                  0.0f));                                            \
    }                                                                                                \
  }
TL_FETCH_FLOATS(f16)
TL_FETCH_FLOATS(f32)
void tl_decode_floats(const tl_raw32* r, float* w) {
  for (int c = 0; c < 8; ++c) vstore4(as_float4(r->c[c]), c, w);
}
void tl_decode_f16(const tl_raw32* r, float* w) { tl_decode_floats(r, w); }
void tl_decode_f32(const tl_raw32* r, float* w) { tl_decode_floats(r, w); }

float tl_q4_0_at(__global const uchar* row, int i, int n) {
  const int b = i / 32, j = i % 32;
  const int q = j < 16 ? (row[16 * b + j] & 15) : (row[16 * b + j - 16] >> 4);
  return vload_half(b, (__global const half*)(row + 16 * (n / 32))) * (float)(q - 8);
}

float tl_q4_1_at(__global const uchar* row, int i, int n) {
  const int b = i / 32, j = i % 32;
  const int q = j < 16 ? (row[16 * b + j] & 15) : (row[16 * b + j - 16] >> 4);
  __global const half* p = (__global const half*)(row + 16 * (n / 32));
  return vload_half(2 * b, p) * (float)q + vload_half(2 * b + 1, p);
}

float tl_q8_0_at(__global const uchar* row, int i, int n) {
  const int b = i / 32;
  return vload_half(b, (__global const half*)(row + 32 * (n / 32))) * (float)(char)row[i];
}

float tl_kq4_at(__global const uchar* row, int i, int n) {
  const int b = i / 32, j = i % 32;
  const int q = j < 16 ? (row[16 * b + j] & 15) : (row[16 * b + j - 16] >> 4);
  const float2 p = vload2(b, (__global const float*)(row + 16 * (n / 32)));
  return p.x * (float)q + p.y;
}

float tl_kq8_at(__global const uchar* row, int i, int n) {
  const float2 p = vload2(i / 16, (__global const float*)(row + n));
  return p.x * (float)((__global const char*)row)[i] + p.y;
}

// The block formats' codes are one aligned 16-byte load per 16 bytes (the split rows put block b's codes at
// a multiple of 16 bytes), not one load per byte; the parameters one load of their bits.
void tl_fetch_q4_0(__global const uchar* row, int b, int n_in, tl_raw32* r) {
  r->c[0] = ((__global const uint4*)row)[b];
  r->p.x = ((__global const ushort*)(row + 16 * (n_in / 32)))[b];  // half d
}
void tl_decode_q4_0(const tl_raw32* r, float* w) {
  const float d = tl_half_bits(r->p.x);
  vstore16(d * tl_lo16(r->c[0], 8.0f), 0, w);
  vstore16(d * tl_hi16(r->c[0], 8.0f), 1, w);
}

void tl_fetch_q4_1(__global const uchar* row, int b, int n_in, tl_raw32* r) {
  r->c[0] = ((__global const uint4*)row)[b];
  r->p.x = ((__global const uint*)(row + 16 * (n_in / 32)))[b];  // halves d (low), m (high)
}
void tl_decode_q4_1(const tl_raw32* r, float* w) {
  const float d = tl_half_bits(r->p.x), m = tl_half_bits(r->p.x >> 16);
  vstore16(d * tl_lo16(r->c[0], 0.0f) + m, 0, w);
  vstore16(d * tl_hi16(r->c[0], 0.0f) + m, 1, w);
}

void tl_fetch_q8_0(__global const uchar* row, int b, int n_in, tl_raw32* r) {
  r->c[0] = ((__global const uint4*)row)[2 * b];
  r->c[1] = ((__global const uint4*)row)[2 * b + 1];
  r->p.x = ((__global const ushort*)(row + 32 * (n_in / 32)))[b];  // half d
}
void tl_decode_q8_0(const tl_raw32* r, float* w) {
  const float d = tl_half_bits(r->p.x);
  vstore16(d * tl_sbytes16(r->c[0]), 0, w);
  vstore16(d * tl_sbytes16(r->c[1]), 1, w);
}

void tl_fetch_int4b64(__global const uchar* row, int b, int n_in, tl_raw32* r) {
  r->c[0] = ((__global const uint4*)row)[b];
  r->p.x = ((__global const uint*)(row + 16 * (n_in / 32)))[b / 2];  // halves d, m of the 64-group
}
void tl_decode_int4b64(const tl_raw32* r, float* w) { tl_decode_q4_1(r, w); }

void tl_fetch_int8b0(__global const uchar* row, int b, int n_in, tl_raw32* r) {
  r->c[0] = ((__global const uint4*)row)[2 * b];
  r->c[1] = ((__global const uint4*)row)[2 * b + 1];
  r->p.x = ((__global const uint*)(row + 32 * (n_in / 32)))[0];  // halves d, m of the row
}
void tl_decode_int8b0(const tl_raw32* r, float* w) {
  const float d = tl_half_bits(r->p.x), m = tl_half_bits(r->p.x >> 16);
  vstore16(d * tl_bytes16(r->c[0], 0.0f) + m, 0, w);
  vstore16(d * tl_bytes16(r->c[1], 0.0f) + m, 1, w);
}

void tl_fetch_kq4(__global const uchar* row, int b, int n_in, tl_raw32* r) {
  r->c[0] = ((__global const uint4*)row)[b];
  r->p.xy = ((__global const uint2*)(row + 16 * (n_in / 32)))[b];  // floats scale, offset
}
void tl_decode_kq4(const tl_raw32* r, float* w) {
  const float2 p = as_float2(r->p.xy);
  vstore16(p.x * tl_lo16(r->c[0], 0.0f) + p.y, 0, w);
  vstore16(p.x * tl_hi16(r->c[0], 0.0f) + p.y, 1, w);
}

void tl_fetch_kq8(__global const uchar* row, int b, int n_in, tl_raw32* r) {
  r->c[0] = ((__global const uint4*)row)[2 * b];
  r->c[1] = ((__global const uint4*)row)[2 * b + 1];
  r->p = ((__global const uint4*)(row + n_in))[b];  // (scale, offset) of both 16-groups, floats
}
void tl_decode_kq8(const tl_raw32* r, float* w) {
  const float4 p = as_float4(r->p);
  vstore16(p.x * tl_sbytes16(r->c[0]) + p.y, 0, w);
  vstore16(p.z * tl_sbytes16(r->c[1]) + p.w, 1, w);
}

// The row kernel of the matrix product over rows of 32-weight blocks, for devices that cannot hold the tiled
// GEMM's smallest tile (gemm.cl: there TL_MATMUL_BLOCK32, which matmul_<format>.cl instantiate, is this).
// y[t] = W x[t]. W: [n_out][row_bytes]; x: [n_tok][n_in]; y: [n_tok][n_out].
// One work-group per (output row r, tile of up to TL_MM_TILE tokens): item i decodes blocks i, i + L, i + 2L,
// ... of the row once into exact weights (L = the local size, a power of two) and dots each with every token
// of the tile; the group then sums each token's partials (common.cl). The token loop's trip count is the same
// for the whole group, so its barriers are uniform. scratch: __local float[L].
#define TL_MATMUL_ROWS_BLOCK32(NAME, FMT)                                                                 \
  __kernel void NAME(__global const uchar* w, ulong row_bytes, int n_in, int n_out, int n_tok,           \
                     __global const float* x, __global float* y, __local float* scratch) {              \
    const int r = get_group_id(0), t0 = get_group_id(1) * TL_MM_TILE;                                     \
    const int nt = min(TL_MM_TILE, n_tok - t0);                                                           \
    const int lid = get_local_id(0), ls = get_local_size(0);                                              \
    __global const uchar* row = w + (ulong)r * row_bytes;                                                 \
    float acc[TL_MM_TILE];                                                                                \
    for (int t = 0; t < TL_MM_TILE; ++t) acc[t] = 0.0f;                                                   \
    for (int b = lid; b < n_in / 32; b += ls) {                                                           \
      float wb[32];                                                                                       \
      TL_BLOCK32(FMT, row, b, n_in, wb)                                                                   \
      for (int t = 0; t < nt; ++t) {                                                                      \
        __global const float* xb = x + (ulong)(t0 + t) * n_in + b * 32;                                   \
        float s = 0.0f;                                                                                   \
        for (int j = 0; j < 32; ++j) s += wb[j] * xb[j];                                                  \
        acc[t] += s;                                                                                      \
      }                                                                                                   \
    }                                                                                                     \
    for (int t = 0; t < nt; ++t) {                                                                        \
      const float s = tl_group_sum(acc[t], scratch);                                                      \
      if (lid == 0) y[(ulong)(t0 + t) * n_out + r] = s;                                                   \
    }                                                                                                     \
  }

// The matrix-vector product (decode: one token) over rows of 32-weight blocks, for every block format;
// matmul_<format>.cl instantiate it with the format's name FMT: tl_raw_FMT loads a half block's codes and
// parameters, tl_w16_FMT converts them (the readers below).
// y = W x. W: [n_out][row_bytes]; x: [n_in]; y: [n_out].
// The unit of work is a half block (16 weights): item i takes units i, i + L, i + 2L, ... (L = the local size,
// a power of two). Unit u of block b = u / 2 is two runs of 8 inputs, at e0 = 32b + LO * (u % 2) and e0 + HI
// (the nibble formats: 8h and 16 + 8h, the low and high nibbles of code bytes 8h .. 8h+7; Q8_0: 16h and
// 16h + 8), read from one 8- or 16-byte code load, so adjacent items read adjacent code words and adjacent
// float4 of x. One work-group per TL_MVB_ROWS (4) consecutive rows of one of up to three matrices: each item
// loads its four float4 of x once and dots them with the rows' codes (tl_w16_dot). Measured on an NVIDIA H200
// (docs/OPENCL.md), half blocks (8-byte loads) streamed a Llama-7B-shaped Q4_0 decode's matrices at ~1 TB/s
// where quarter blocks over 4 rows (4-byte loads) reached 0.68 and whole blocks per item 0.66-0.83; 4 rows
// beat 2 (x read once for more rows; 64 items better than 128), 8 rows fell back to 0.72; the same split
// forming each weight as d * code before the products, with vloadn reads, ran 2.4x slower. Rows past n_out
// (the last group) repeat the last row and are not written. scratch: __local float4[L].
#define TL_MVB_ROWS 4
// The unit loop both decode kernels share: item lid's units u of the group's four rows P0..P3 (row pointers),
// accumulated into acc (float4: one lane per row) as tl_w16_dot over the unit's four float4 of x (x0, x1 at
// e0; x2, x3 at e0 + HI). A row's own parameters (INT8B0's one (d, m)) are read once (tl_rowp_FMT).
// With TL_MVB_PREFETCH_FMT the loop is software-pipelined: the next unit's codes, parameters and x are
// loaded (tl_raw_FMT) before the current unit is converted (tl_w16_FMT) and summed, so every item keeps a
// unit's loads in flight while it computes; the last unit's "next" is itself again (in bounds, never used).
// Either way the sums are the same, unit by unit in the same order. Measured on an NVIDIA H200 (docs/
// OPENCL.md): a loop that only XORs the same loads streams at 1.5-2x the speed of the computing one, and
// prefetching one unit ahead took 3-10% off the 4-bit formats' large matrices but made INT8B0's 10-20%
// slower (twice the registers for a 16-byte unit), so the 4-bit formats prefetch and the 8-bit ones do not.
// TL_MV_UNROLL (the generated header; --cl-matvec-unroll) U > 0 replaces both: an item loads U units (its
// units u, u + L, ..., u + (U - 1) L) before it converts any, so a row of 4096 inputs over 64 items is one
// trip to memory instead of four dependent ones; units past the row load the last unit again (in bounds,
// never summed). The sums are the same, in the same order, whatever U.
#ifndef TL_MV_UNROLL
#define TL_MV_UNROLL 0
#endif
#define TL_MV_U (TL_MV_UNROLL > 0 ? TL_MV_UNROLL : 1)  // an array size even where the loop is not used
#define TL_MVB_UNITS(LO, HI, FMT, P0, P1, P2, P3)                                                         \
  {                                                                                                       \
    const int n_units = nb * 2, step = get_local_size(0);                                                 \
    const float2 pa = tl_rowp_##FMT(P0, nb), pb = tl_rowp_##FMT(P1, nb);                                  \
    const float2 pc = tl_rowp_##FMT(P2, nb), pd = tl_rowp_##FMT(P3, nb);                                  \
    if (TL_MV_UNROLL > 0) {                                                                               \
      for (int u0 = get_local_id(0); u0 < n_units; u0 += TL_MV_U * step) {                                \
        tl_raw16 ra[TL_MV_U], rb[TL_MV_U], rc[TL_MV_U], rd[TL_MV_U];                                      \
        float4 x0[TL_MV_U], x1[TL_MV_U], x2[TL_MV_U], x3[TL_MV_U];                                        \
        for (int i = 0; i < TL_MV_U; ++i) {                                                               \
          const int uc = min(u0 + i * step, n_units - 1);                                                 \
          ra[i] = tl_raw_##FMT(P0, uc, nb, pa), rb[i] = tl_raw_##FMT(P1, uc, nb, pb);                     \
          rc[i] = tl_raw_##FMT(P2, uc, nb, pc), rd[i] = tl_raw_##FMT(P3, uc, nb, pd);                     \
          __global const float4* xv = (__global const float4*)x + tl_unit_e0(uc, LO) / 4;                  \
          x0[i] = xv[0], x1[i] = xv[1], x2[i] = xv[(HI) / 4], x3[i] = xv[(HI) / 4 + 1];                   \
        }                                                                                                 \
        for (int i = 0; i < TL_MV_U; ++i) {                                                               \
          if (u0 + i * step >= n_units) break;                                                            \
          const float sx = dot(x0[i] + x1[i], (float4)(1.0f)) + dot(x2[i] + x3[i], (float4)(1.0f));       \
          acc += (float4)(tl_w16_dot(tl_w16_##FMT(ra[i]), x0[i], x1[i], x2[i], x3[i], sx),                \
                          tl_w16_dot(tl_w16_##FMT(rb[i]), x0[i], x1[i], x2[i], x3[i], sx),                \
                          tl_w16_dot(tl_w16_##FMT(rc[i]), x0[i], x1[i], x2[i], x3[i], sx),                \
                          tl_w16_dot(tl_w16_##FMT(rd[i]), x0[i], x1[i], x2[i], x3[i], sx));               \
        }                                                                                                 \
      }                                                                                                   \
    } else if (TL_MVB_PREFETCH_##FMT) {                                                                   \
      int u = get_local_id(0);                                                                            \
      const int uc = min(u, n_units - 1);                                                                 \
      tl_raw16 ra = tl_raw_##FMT(P0, uc, nb, pa), rb = tl_raw_##FMT(P1, uc, nb, pb);                      \
      tl_raw16 rc = tl_raw_##FMT(P2, uc, nb, pc), rd = tl_raw_##FMT(P3, uc, nb, pd);                      \
      __global const float4* xv = (__global const float4*)x + tl_unit_e0(uc, LO) / 4;                      \
      float4 x0 = xv[0], x1 = xv[1], x2 = xv[(HI) / 4], x3 = xv[(HI) / 4 + 1];                            \
      for (; u < n_units; u += step) {                                                                    \
        const int un = min(u + step, n_units - 1);                                                        \
        const tl_raw16 next_a = tl_raw_##FMT(P0, un, nb, pa), next_b = tl_raw_##FMT(P1, un, nb, pb);    \
        const tl_raw16 next_c = tl_raw_##FMT(P2, un, nb, pc), next_d = tl_raw_##FMT(P3, un, nb, pd);    \
        __global const float4* xn = (__global const float4*)x + tl_unit_e0(un, LO) / 4;                    \
        const float4 n0 = xn[0], n1 = xn[1], n2 = xn[(HI) / 4], n3 = xn[(HI) / 4 + 1];                    \
        const float sx = dot(x0 + x1, (float4)(1.0f)) + dot(x2 + x3, (float4)(1.0f));                     \
        acc += (float4)(tl_w16_dot(tl_w16_##FMT(ra), x0, x1, x2, x3, sx),                                 \
                        tl_w16_dot(tl_w16_##FMT(rb), x0, x1, x2, x3, sx),                                 \
                        tl_w16_dot(tl_w16_##FMT(rc), x0, x1, x2, x3, sx),                                 \
                        tl_w16_dot(tl_w16_##FMT(rd), x0, x1, x2, x3, sx));                                \
        ra = next_a, rb = next_b, rc = next_c, rd = next_d;                                               \
        x0 = n0, x1 = n1, x2 = n2, x3 = n3;                                                               \
      }                                                                                                   \
    } else {                                                                                              \
      for (int u = get_local_id(0); u < n_units; u += step) {                                             \
        __global const float4* xv = (__global const float4*)x + tl_unit_e0(u, LO) / 4;                    \
        const float4 x0 = xv[0], x1 = xv[1], x2 = xv[(HI) / 4], x3 = xv[(HI) / 4 + 1];                    \
        const float sx = dot(x0 + x1, (float4)(1.0f)) + dot(x2 + x3, (float4)(1.0f));                     \
        acc += (float4)(tl_w16_dot(tl_w16_##FMT(tl_raw_##FMT(P0, u, nb, pa)), x0, x1, x2, x3, sx),        \
                        tl_w16_dot(tl_w16_##FMT(tl_raw_##FMT(P1, u, nb, pb)), x0, x1, x2, x3, sx),        \
                        tl_w16_dot(tl_w16_##FMT(tl_raw_##FMT(P2, u, nb, pc)), x0, x1, x2, x3, sx),        \
                        tl_w16_dot(tl_w16_##FMT(tl_raw_##FMT(P3, u, nb, pd)), x0, x1, x2, x3, sx));       \
      }                                                                                                   \
    }                                                                                                     \
  }

// The RMSNorm around decode's products (OpenclBackend::matmul_add_rmsnorm), in the products themselves so
// that the step launches no norm kernel:
//  - A product that ends a block (the output and down products; one matrix) adds its rows into the residual
//    res, writes them times the next norm's weight res_g to y, and one sum of squares of its group's rows to
//    res_part[1 + group]; the group that finishes last (a counter, res_count, counted up with an atomic and
//    set back to 0 by that group for the next launch) sums the partials in group order, so the same sum
//    whoever is last, and writes the norm's scale 1 / sqrt(sum / n + eps) to res_part[0] (tl_mvb_residual).
//    res = 0: the product writes its sums to y.
//  - A product that reads such a y (q/k/v, gate/up) multiplies its dot products by that scale, x_scale[0]:
//    the norm of the rows times the weights, with the scale taken out of the sum. x_scale = 0: no scale.
// The partials reach the last group through global memory within one launch, where OpenCL 1.2 orders
// nothing between work-groups (a last-group sum of plain stores gave wrong results in some runs on an H200:
// docs/PERF.md 2026-11-30 17:08). So every exchange is an atomic, performed where all groups see it, and
// nothing relies on the order of two of them: a slot holds TL_NORM_EMPTY (a NaN pattern, never written as
// a partial: a NaN sum goes as the canonical NaN) until its group's partial arrives; the last group swaps each slot back to empty, taking its
// value, and waits on a slot still empty (its writer has already counted itself, so the value is on its
// way). The buffer starts with every slot empty (the host fills it), and each launch leaves it so.
#define TL_NORM_EMPTY ((int)0xfff0dead)
//
// yq (the integer decode products, gemm_q8.cl; 0: none): the residual product and the gate/up kernel also
// round their output y for the integer products that read it next, each block of 32 rows by the group that
// completes it (tl_q8_hand_in), so that those need no rounding launch of their own.
#if TL_GEMM && TL_Q8_GEMM
void tl_q8_hand_in(const float* v, int rows, int r0, int n, __global int* xch, __global int* count,
                   __global uint* yq, __local float* scratch);
#define TL_Q8_HAND_IN(V, ROWS, R0, N, XCH, COUNT, YQ, SCRATCH) \
  if (YQ) tl_q8_hand_in(V, ROWS, R0, N, XCH, COUNT, YQ, SCRATCH)
#else
#define TL_Q8_HAND_IN(V, ROWS, R0, N, XCH, COUNT, YQ, SCRATCH)
#endif
//
// The group's four row sums t (rows r0.. of n_out): to y, or (res) into the residual, y = res * res_g, the
// sum of the rows' squares into slot 1 + g of res_part, and the scale by the last group; with yq, y's
// rounding (above). Every item calls it; scratch is __local float[L].
void tl_mvb_residual(float4 t, int r0, int n_out, __global float* y, __global float* res,
                     __global const float* res_g, __global float* res_part, __global int* res_count,
                     float eps, __local float* scratch, __global uint* yq, __global int* yq_xch,
                     __global int* yq_count) {
  const int lid = get_local_id(0), g = get_group_id(0), groups = get_num_groups(0);
  const float v[4] = {t.x, t.y, t.z, t.w};
  if (!res) {
    if (lid == 0) {
      for (int k = 0; k < TL_MVB_ROWS && r0 + k < n_out; ++k) y[r0 + k] = v[k];
    }
    return;
  }
  __local int* last = (__local int*)scratch;
  __global int* slots = (__global int*)(res_part + 1);
  float yv[TL_MVB_ROWS] = {0.0f};
  if (lid == 0) {
    float sq = 0.0f;
    for (int k = 0; k < TL_MVB_ROWS && r0 + k < n_out; ++k) {
      const float h = res[r0 + k] + v[k];
      res[r0 + k] = h;
      yv[k] = h * res_g[r0 + k];
      y[r0 + k] = yv[k];
      sq += h * h;
    }
    atomic_xchg(slots + g, as_int(sq) == TL_NORM_EMPTY ? as_int(NAN) : as_int(sq));
    last[0] = atomic_inc(res_count) == groups - 1;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int is_last = last[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // before tl_group_sum reuses scratch
  TL_Q8_HAND_IN(yv, TL_MVB_ROWS, r0, n_out, yq_xch, yq_count, yq, scratch);
  if (!is_last) return;
  float s = 0.0f;
  for (int i = lid; i < groups; i += get_local_size(0)) {
    int bits = atomic_xchg(slots + i, TL_NORM_EMPTY);
    while (bits == TL_NORM_EMPTY) bits = atomic_xchg(slots + i, TL_NORM_EMPTY);
    s += as_float(bits);
  }
  s = tl_group_sum(s, scratch);
  if (lid == 0) {
    res_part[0] = 1.0f / sqrt(s / (float)n_out + eps);
    atomic_xchg(res_count, 0);  // for the next launch
  }
}

// Decode's q/k/v products with RoPE and the KV write (OpenclBackend::matmul_rope_kv_store): matrices 0, 1,
// 2 of the launch are q, k, v of one token. A group's four rows lie in one head (head_dim % 4 == 0) and
// hold two of Norm mode's rotated pairs (2i, 2i + 1), so item 0 turns them as rope_kv_store does (the same
// table row cs [n_half][cos, sin] and tl_rotate), writes q and k rotated and v, and the k and v rows into
// the cache at position pos as kv_store does: [K|V][pos < n_ctx][kv_dim] from layer_off, kv_dim = the k and
// v matrices' rows. cs = 0: the rows go to y as they are.
#if TL_KV_F16
#define TL_MVB_KV __global half*
#define TL_MVB_KV_PUT(val, p) vstore_half_rte((val), 0, (p))
#else
#define TL_MVB_KV __global float*
#define TL_MVB_KV_PUT(val, p) (*(p) = (val))
#endif
void tl_mvb_rope_kv(float4 t, int r0, int n_out, int mi, __global float* y, __global const float* cs,
                    int head_dim, int n_half, TL_MVB_KV cache, ulong layer_off, int n_ctx, int pos) {
  float v[4] = {t.x, t.y, t.z, t.w};
  if (mi < 2) {
    for (int p = 0; p < TL_MVB_ROWS; p += 2) {
      const int i = ((r0 + p) % head_dim) / 2;
      if (i < n_half) {
        const float2 e = tl_rotate(v[p], v[p + 1], cs[2 * i], cs[2 * i + 1]);
        v[p] = e.x;
        v[p + 1] = e.y;
      }
    }
  }
  TL_MVB_KV row = cache + layer_off + (ulong)pos * n_out + (mi == 2 ? (ulong)n_ctx * n_out : 0);
  for (int k = 0; k < TL_MVB_ROWS && r0 + k < n_out; ++k) {
    y[r0 + k] = v[k];
    if (mi > 0) TL_MVB_KV_PUT(v[k], row + r0 + k);
  }
}
#undef TL_MVB_KV_PUT

// TL_MATVEC_KERNEL(NAME, XT, UNITS, LO, HI, FMT): the kernel around a unit loop UNITS(LO, HI, FMT, P0, P1, P2, P3) that
// accumulates the group's four rows into acc, x an array of XT: TL_MATVEC_BLOCK32 (float x, TL_MVB_UNITS) and
// the integer decode of gemm_q8.cl (x rounded to int8, TL_MVQ_UNITS) share it.
// (OpenCL C has no variadic macros: UNITS takes LO, HI and FMT, the integer loop ignoring LO and HI.)
#define TL_MATVEC_BLOCK32(NAME, LO, HI, FMT) TL_MATVEC_KERNEL(NAME, float, TL_MVB_UNITS, LO, HI, FMT)
#define TL_MATVEC_KERNEL(NAME, XT, UNITS, LO, HI, FMT)                                                     \
  __kernel void NAME(__global const uchar* w0, __global const uchar* w1, __global const uchar* w2,         \
                     ulong row_bytes, int n_in, int n0, int n1, int n2, __global const XT* x,             \
                     __global float* y0, __global float* y1, __global float* y2, __local float4* scratch, \
                     __global const float* x_scale, __global float* res, __global const float* res_g,     \
                     __global float* res_part, __global int* res_count, float res_eps,                    \
                     __global const float* rope_cs, int head_dim, int n_half, TL_MVB_KV cache,            \
                     ulong layer_off, int n_ctx, __global const int* pos, __global uint* yq,              \
                     __global int* yq_xch, __global int* yq_count) {                                      \
    /* Up to three matrices of one format over the same x in one launch (decode's q, k, v or gate, up): */ \
    /* groups [0, g0) take (w0, y0), the next g1 (w1, y1), the rest (w2, y2); unused ones have n = 0. */  \
    /* The norm and RoPE arguments: above; res only with one matrix, rope_cs with q, k, v. */            \
    const int g0 = (n0 + TL_MVB_ROWS - 1) / TL_MVB_ROWS, g1 = (n1 + TL_MVB_ROWS - 1) / TL_MVB_ROWS;       \
    int g = get_group_id(0), n_out = n0, mi = 0;                                                          \
    __global const uchar* w = w0;                                                                         \
    __global float* y = y0;                                                                               \
    if (g >= g0 + g1) {                                                                                   \
      g -= g0 + g1, n_out = n2, w = w2, y = y2, mi = 2;                                                   \
    } else if (g >= g0) {                                                                                 \
      g -= g0, n_out = n1, w = w1, y = y1, mi = 1;                                                        \
    }                                                                                                     \
    const float scale = x_scale ? x_scale[0] : 1.0f;                                                      \
    const int r0 = g * TL_MVB_ROWS;                                                                       \
    const int nb = n_in / 32;                                                                             \
    __global const uchar* row0 = w + (ulong)r0 * row_bytes;                                               \
    __global const uchar* row1 = w + (ulong)min(r0 + 1, n_out - 1) * row_bytes;                          \
    __global const uchar* row2 = w + (ulong)min(r0 + 2, n_out - 1) * row_bytes;                          \
    __global const uchar* row3 = w + (ulong)min(r0 + 3, n_out - 1) * row_bytes;                          \
    float4 acc = (float4)(0.0f);                                                                          \
    UNITS(LO, HI, FMT, row0, row1, row2, row3)                                                           \
    const float4 t = tl_group_sum4(acc, scratch) * scale;                                                 \
    if (rope_cs) {                                                                                        \
      if (get_local_id(0) == 0)                                                                           \
        tl_mvb_rope_kv(t, r0, n_out, mi, y, rope_cs, head_dim, n_half, cache, layer_off, n_ctx, pos[0]);  \
    } else {                                                                                              \
      tl_mvb_residual(t, r0, n_out, y, res, res_g, res_part, res_count, res_eps, (__local float*)scratch,  \
                      yq, yq_xch, yq_count);                                                              \
    }                                                                                                     \
  }

// Decode's gated feed-forward input in one launch: y = act(Wg x) * (Wu x) (act 0 SiLU, 1 GELU-tanh, the
// formulas of glu.cl), Wg and Wu of one format and shape. A group takes rows r0, r0 + 1 of both matrices,
// so each x load serves four rows; with the matvec's local size (the host uses one rule for both) the sums
// are those of TL_MATVEC_BLOCK32 (same units, order and reduction), so y equals that kernel's two outputs
// put through the glu kernel. The norm arguments as TL_MATVEC_BLOCK32's (a scaled x), yq (y's rounding) as
// tl_mvb_residual's.
#define TL_MATVEC_GLU_BLOCK32(NAME, LO, HI, FMT) TL_MATVEC_GLU_KERNEL(NAME, float, TL_MVB_UNITS, LO, HI, FMT)
#define TL_MATVEC_GLU_KERNEL(NAME, XT, UNITS, LO, HI, FMT)                                                 \
  __kernel void NAME(__global const uchar* wg, __global const uchar* wu, ulong row_bytes, int n_in,        \
                     int n_out, __global const XT* x, __global float* y, int act,                         \
                     __local float4* scratch, __global const float* x_scale, __global uint* yq,           \
                     __global int* yq_xch, __global int* yq_count) {                                      \
    const float scale = x_scale ? x_scale[0] : 1.0f;                                                      \
    const int r0 = get_group_id(0) * 2;                                                                   \
    const int nb = n_in / 32;                                                                             \
    const ulong o0 = (ulong)r0 * row_bytes, o1 = (ulong)min(r0 + 1, n_out - 1) * row_bytes;               \
    float4 acc = (float4)(0.0f);                                                                          \
    UNITS(LO, HI, FMT, wg + o0, wg + o1, wu + o0, wu + o1)                                               \
    const float4 t = tl_group_sum4(acc, scratch) * scale;                                                 \
    const float yv[2] = {tl_glu(t.x, t.z, act), tl_glu(t.y, t.w, act)};                                   \
    if (get_local_id(0) == 0) {                                                                           \
      y[r0] = yv[0];                                                                                      \
      if (r0 + 1 < n_out) y[r0 + 1] = yv[1];                                                              \
    }                                                                                                     \
    TL_Q8_HAND_IN(yv, 2, r0, n_out, yq_xch, yq_count, yq, (__local float*)scratch);                        \
  }

// Half-block readers for TL_MATVEC_BLOCK32 (tl_raw_FMT, then tl_w16_FMT): unit u of a row of nb blocks as
// its codes (w0, w1 the run at e0, w2, w3 the run at e0 + HI) and the (d, m) that make them the exact weights
// of TL_BLOCK32. Rows are 16-byte aligned and a block's codes start at a multiple of 16 bytes, so the code
// loads are aligned: they are typed vector loads (uint2, uint4), as are x's float4 (x is a whole buffer and e0
// a multiple of 8), because vloadn promises the compiler only element alignment and it may split it into
// scalar loads.
typedef struct {
  float4 w0, w1, w2, w3;  // the codes as floats, offset removed for the symmetric formats (q - 8, or q)
  float d, m;             // weight = d * code + m (m = 0 for Q4_0, Q8_0)
} tl_w16;

// sum over the unit of weight * x, as d * sum(code * x) + m * sum(x): each weight d * code + m is exact in
// float (a half times a small integer), so this is the dot product of the exact weights, summed in another
// order. sx: the sum of the unit's 16 inputs.
float tl_w16_dot(tl_w16 w, float4 x0, float4 x1, float4 x2, float4 x3, float sx) {
  return w.d * (dot(w.w0, x0) + dot(w.w1, x1) + dot(w.w2, x2) + dot(w.w3, x3)) + w.m * sx;
}

// A unit as loaded, before conversion (the decode loop loads the next unit while it converts this one):
// the code bytes (the 4-bit formats' 8 in c.xy, the 8-bit formats' 16 in c) and the unit's (d, m).
typedef struct {
  uint4 c;
  float2 p;
} tl_raw16;

// The first input of unit u: block u / 2, then LO (8 or 16) more for the second half.
int tl_unit_e0(int u, int lo) { return 32 * (u / 2) + lo * (u % 2); }

// The 4-bit formats' half block u: code bytes 8u .. 8u + 7 (low nibbles first, Q4_0's order), minus `off`.
tl_w16 tl_nibbles16(tl_raw16 r, float off) {
  tl_w16 w;
  w.w0 = tl_lo4(r.c.x, off);
  w.w1 = tl_lo4(r.c.y, off);
  w.w2 = tl_hi4(r.c.x, off);
  w.w3 = tl_hi4(r.c.y, off);
  w.d = r.p.x;
  w.m = r.p.y;
  return w;
}
// The 8-bit formats' 16 code bytes, signed (Q8_0, KQ8) or unsigned (INT8B0).
tl_w16 tl_sbytes16_w(tl_raw16 r) {
  tl_w16 w;
  w.w0 = tl_sbytes4(r.c.x);
  w.w1 = tl_sbytes4(r.c.y);
  w.w2 = tl_sbytes4(r.c.z);
  w.w3 = tl_sbytes4(r.c.w);
  w.d = r.p.x;
  w.m = r.p.y;
  return w;
}
tl_w16 tl_ubytes16_w(tl_raw16 r) {
  tl_w16 w;
  w.w0 = tl_bytes4(r.c.x, 0.0f);
  w.w1 = tl_bytes4(r.c.y, 0.0f);
  w.w2 = tl_bytes4(r.c.z, 0.0f);
  w.w3 = tl_bytes4(r.c.w, 0.0f);
  w.d = r.p.x;
  w.m = r.p.y;
  return w;
}

tl_raw16 tl_raw_nibbles(__global const uchar* row, int u, float d, float m) {
  tl_raw16 r;
  const uint2 c = ((__global const uint2*)row)[u];
  r.c = (uint4)(c.x, c.y, 0u, 0u);
  r.p = (float2)(d, m);
  return r;
}
tl_raw16 tl_raw_bytes(__global const uchar* row, int u, float d, float m) {
  tl_raw16 r;
  r.c = ((__global const uint4*)row)[u];
  r.p = (float2)(d, m);
  return r;
}

// tl_rowp_FMT: the parameters a whole row shares, read once per row (only INT8B0 has such; the others
// return zeros, unused); tl_raw_FMT takes them.
// TL_MVB_PREFETCH_FMT: whether TL_MVB_UNITS pipelines the format's loads (see there).
#define TL_MVB_PREFETCH_q4_0 1
#define TL_MVB_PREFETCH_q4_1 1
#define TL_MVB_PREFETCH_int4b64 1
#define TL_MVB_PREFETCH_q8_0 0
#define TL_MVB_PREFETCH_kq4 1
#define TL_MVB_PREFETCH_kq8 0
#define TL_MVB_PREFETCH_int8b0 0

float2 tl_rowp_q4_0(__global const uchar* row, int nb) { return (float2)(0.0f); }
tl_raw16 tl_raw_q4_0(__global const uchar* row, int u, int nb, float2 rowp) {
  return tl_raw_nibbles(row, u, vload_half(u / 2, (__global const half*)(row + 16 * nb)), 0.0f);
}
tl_w16 tl_w16_q4_0(tl_raw16 r) { return tl_nibbles16(r, 8.0f); }

float2 tl_rowp_q4_1(__global const uchar* row, int nb) { return (float2)(0.0f); }
tl_raw16 tl_raw_q4_1(__global const uchar* row, int u, int nb, float2 rowp) {
  __global const half* p = (__global const half*)(row + 16 * nb);
  return tl_raw_nibbles(row, u, vload_half(2 * (u / 2), p), vload_half(2 * (u / 2) + 1, p));
}
tl_w16 tl_w16_q4_1(tl_raw16 r) { return tl_nibbles16(r, 0.0f); }

float2 tl_rowp_int4b64(__global const uchar* row, int nb) { return (float2)(0.0f); }
tl_raw16 tl_raw_int4b64(__global const uchar* row, int u, int nb, float2 rowp) {
  __global const half* p = (__global const half*)(row + 16 * nb);  // one (d, m) per 64 weights: 4 units
  return tl_raw_nibbles(row, u, vload_half(2 * (u / 4), p), vload_half(2 * (u / 4) + 1, p));
}
tl_w16 tl_w16_int4b64(tl_raw16 r) { return tl_nibbles16(r, 0.0f); }

float2 tl_rowp_q8_0(__global const uchar* row, int nb) { return (float2)(0.0f); }
tl_raw16 tl_raw_q8_0(__global const uchar* row, int u, int nb, float2 rowp) {
  return tl_raw_bytes(row, u, vload_half(u / 2, (__global const half*)(row + 32 * nb)), 0.0f);
}
tl_w16 tl_w16_q8_0(tl_raw16 r) { return tl_sbytes16_w(r); }

// KQ4's unit u: Q4_1's half block with the block's float (scale, offset).
float2 tl_rowp_kq4(__global const uchar* row, int nb) { return (float2)(0.0f); }
tl_raw16 tl_raw_kq4(__global const uchar* row, int u, int nb, float2 rowp) {
  const float2 p = ((__global const float2*)(row + 16 * nb))[u / 2];
  return tl_raw_nibbles(row, u, p.x, p.y);
}
tl_w16 tl_w16_kq4(tl_raw16 r) { return tl_nibbles16(r, 0.0f); }

// KQ8's unit u is its (scale, offset) group u: 16 contiguous signed codes, Q8_0's halves.
float2 tl_rowp_kq8(__global const uchar* row, int nb) { return (float2)(0.0f); }
tl_raw16 tl_raw_kq8(__global const uchar* row, int u, int nb, float2 rowp) {
  const float2 p = ((__global const float2*)(row + 32 * nb))[u];
  return tl_raw_bytes(row, u, p.x, p.y);
}
tl_w16 tl_w16_kq8(tl_raw16 r) { return tl_sbytes16_w(r); }

// INT8B0's (d, m) is one per row: read once per row, not per unit.
float2 tl_rowp_int8b0(__global const uchar* row, int nb) {
  __global const half* p = (__global const half*)(row + 32 * nb);
  return (float2)(vload_half(0, p), vload_half(1, p));
}
tl_raw16 tl_raw_int8b0(__global const uchar* row, int u, int nb, float2 rowp) {
  return tl_raw_bytes(row, u, rowp.x, rowp.y);
}
tl_w16 tl_w16_int8b0(tl_raw16 r) { return tl_ubytes16_w(r); }
