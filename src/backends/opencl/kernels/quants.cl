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
// Weights (q = the stored integer):
//   Q4_0: w = d * (q - 8); element j < 16: low nibble of code byte j, j >= 16: high nibble of byte j - 16
//   Q4_1: w = d * q + m; nibbles as Q4_0
//   Q8_0: w = d * q, q the signed code byte j
//   F16: one half per element; F32: one float per element (rows as in the file).
// Element readers take (row, element i, n = elements per row).

float tl_half(__global const uchar* p) { return vload_half(0, (__global const half*)p); }

float tl_f16_at(__global const uchar* row, int i, int n) { return vload_half(i, (__global const half*)row); }
float tl_f32_at(__global const uchar* row, int i, int n) { return ((__global const float*)row)[i]; }
// Elements 4c .. 4c+3 of a float row.
float4 tl_f16_at4(__global const uchar* row, int c) { return vload_half4(c, (__global const half*)row); }
float4 tl_f32_at4(__global const uchar* row, int c) { return vload4(c, (__global const float*)row); }
// Elements 32b .. 32b+31 of a float row (the tiled GEMM's block reader for F16 and F32; nb unused).
void tl_block_f16(__global const uchar* row, int b, int nb, float* w) {
  for (int c = 0; c < 8; ++c) vstore4(vload_half4(8 * b + c, (__global const half*)row), c, w);
}
void tl_block_f32(__global const uchar* row, int b, int nb, float* w) {
  for (int c = 0; c < 8; ++c) vstore4(vload4(8 * b + c, (__global const float*)row), c, w);
}

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

// The 32 exact weights of block b of a row of nb blocks, for the matmuls (each block is decoded once per tile
// of tokens). The codes are one aligned 16-byte load per 16 bytes (the split rows put block b's codes at a
// multiple of 16 bytes), not one load per byte.
void tl_block_q4_0(__global const uchar* row, int b, int nb, float* w) {
  const float d = vload_half(b, (__global const half*)(row + 16 * nb));
  const int16 q = convert_int16(as_uchar16(((__global const uint4*)row)[b]));
  vstore16(d * convert_float16((q & 15) - 8), 0, w);
  vstore16(d * convert_float16((q >> 4) - 8), 1, w);
}

void tl_block_q4_1(__global const uchar* row, int b, int nb, float* w) {
  __global const half* p = (__global const half*)(row + 16 * nb);
  const float d = vload_half(2 * b, p), m = vload_half(2 * b + 1, p);
  const int16 q = convert_int16(as_uchar16(((__global const uint4*)row)[b]));
  vstore16(d * convert_float16(q & 15) + m, 0, w);
  vstore16(d * convert_float16(q >> 4) + m, 1, w);
}

void tl_block_q8_0(__global const uchar* row, int b, int nb, float* w) {
  const float d = vload_half(b, (__global const half*)(row + 32 * nb));
  __global const uint4* c = (__global const uint4*)row + 2 * b;
  vstore16(d * convert_float16(as_char16(c[0])), 0, w);
  vstore16(d * convert_float16(as_char16(c[1])), 1, w);
}

// The row kernel of the matrix product over rows of 32-weight blocks, for devices that cannot hold the tiled
// GEMM's smallest tile (gemm.cl: there TL_MATMUL_BLOCK32, which matmul_<format>.cl instantiate, is this).
// y[t] = W x[t]. W: [n_out][row_bytes]; x: [n_tok][n_in]; y: [n_tok][n_out].
// One work-group per (output row r, tile of up to TL_MM_TILE tokens): item i decodes blocks i, i + L, i + 2L,
// ... of the row once into exact weights (L = the local size, a power of two) and dots each with every token
// of the tile; the group then sums each token's partials (common.cl). The token loop's trip count is the same
// for the whole group, so its barriers are uniform. scratch: __local float[L].
#define TL_MATMUL_ROWS_BLOCK32(NAME, READ_BLOCK)                                                        \
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
      READ_BLOCK(row, b, n_in / 32, wb);                                                                  \
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
// matmul_q4_0.cl, matmul_q4_1.cl and matmul_q8_0.cl instantiate it with a reader of one quarter of a block.
// y = W x. W: [n_out][row_bytes]; x: [n_in]; y: [n_out].
// The unit of work is a quarter block (8 weights): item i takes quarters i, i + L, i + 2L, ... (L = the local
// size, a power of two). Quarter u of block b = u / 4 is two runs of 4 inputs, at e0 = 32b + LO * (u % 4) and
// e0 + HI (the nibble formats: 4i and 16 + 4i, the low and high nibbles of code bytes 4i .. 4i+3; Q8_0: 8i and
// 8i + 4), so adjacent items read adjacent code words and adjacent float4 of x: each load instruction of a
// SIMD group touches consecutive memory. One work-group per TL_MV_ROWS (4, common.cl) consecutive rows: each
// item loads its two float4 of x once and dots them with the four rows' quarters; one float4 reduction sums
// the four rows. Rows past n_out (the last group) repeat the last row and are not written.
// scratch: __local float4[L].
#define TL_MATVEC_BLOCK32(NAME, LO, HI, READ_QUARTER)                                                   \
  __kernel void NAME(__global const uchar* w, ulong row_bytes, int n_in, int n_out, __global const float* x, \
                     __global float* y, __local float4* scratch) {                                      \
    const int r0 = get_group_id(0) * TL_MV_ROWS;                                                          \
    const int lid = get_local_id(0), ls = get_local_size(0);                                              \
    const int nb = n_in / 32;                                                                             \
    float4 acc = (float4)(0.0f);                                                                          \
    for (int u = lid; u < nb * 4; u += ls) {                                                              \
      const int e0 = 32 * (u / 4) + (LO) * (u % 4);                                                       \
      const float4 x0 = vload4(0, x + e0), x1 = vload4(0, x + e0 + (HI));                                 \
      float s[TL_MV_ROWS];                                                                                \
      for (int rr = 0; rr < TL_MV_ROWS; ++rr) {                                                           \
        float4 w0, w1;                                                                                    \
        READ_QUARTER(w + (ulong)min(r0 + rr, n_out - 1) * row_bytes, u, nb, &w0, &w1);                    \
        const float4 p = w0 * x0 + w1 * x1;                                                               \
        s[rr] = (p.x + p.y) + (p.z + p.w);                                                                \
      }                                                                                                   \
      acc += (float4)(s[0], s[1], s[2], s[3]);                                                            \
    }                                                                                                     \
    acc = tl_group_sum4(acc, scratch);                                                                    \
    if (lid == 0) {                                                                                       \
      if (r0 < n_out) y[r0] = acc.x;                                                                      \
      if (r0 + 1 < n_out) y[r0 + 1] = acc.y;                                                              \
      if (r0 + 2 < n_out) y[r0 + 2] = acc.z;                                                              \
      if (r0 + 3 < n_out) y[r0 + 3] = acc.w;                                                              \
    }                                                                                                     \
  }

// Quarter readers for TL_MATVEC_BLOCK32: quarter u of a row of nb blocks as the exact weights of its two runs
// of 4 (the same values as tl_block_*), from one or two aligned 4-byte code loads.
void tl_quarter_q4_0(__global const uchar* row, int u, int nb, float4* w0, float4* w1) {
  const float d = vload_half(u / 4, (__global const half*)(row + 16 * nb));
  const int4 q = convert_int4(as_uchar4(((__global const uint*)row)[u]));
  *w0 = d * convert_float4((q & 15) - 8);
  *w1 = d * convert_float4((q >> 4) - 8);
}

void tl_quarter_q4_1(__global const uchar* row, int u, int nb, float4* w0, float4* w1) {
  __global const half* p = (__global const half*)(row + 16 * nb);
  const float d = vload_half(2 * (u / 4), p), m = vload_half(2 * (u / 4) + 1, p);
  const int4 q = convert_int4(as_uchar4(((__global const uint*)row)[u]));
  *w0 = d * convert_float4(q & 15) + m;
  *w1 = d * convert_float4(q >> 4) + m;
}

void tl_quarter_q8_0(__global const uchar* row, int u, int nb, float4* w0, float4* w1) {
  const float d = vload_half(u / 4, (__global const half*)(row + 32 * nb));
  const uint2 c = vload2(u, (__global const uint*)row);
  *w0 = d * convert_float4(as_char4(c.x));
  *w1 = d * convert_float4(as_char4(c.y));
}
