// GGML block formats, read byte-wise from a row in global memory (blocks are 18, 20 or 34 bytes, so only
// 2-byte alignment holds; the halves are read with vload_half, core OpenCL 1.2, no cl_khr_fp16 needed).
// Every weight is first formed exactly as the format defines it (the values of format/quants.h's
// dequantize_row) and then used in float arithmetic: the device computes the CPU backend's float path.
//
// Layouts (per block of 32 weights; q = stored unsigned integer, d/m = halves):
//   Q4_0 (18 B): half d; uchar qs[16]        w = d * (q - 8); element j < 16: low nibble of qs[j], j >= 16:
//                                            high nibble of qs[j - 16]
//   Q4_1 (20 B): half d; half m; uchar qs[16] w = d * q + m; nibbles as Q4_0
//   Q8_0 (34 B): half d; char qs[32]          w = d * qs[j]
//   F16: one half per element; F32: one float per element.

float tl_half(__global const uchar* p) { return vload_half(0, (__global const half*)p); }

float tl_f16_at(__global const uchar* row, int i) { return vload_half(i, (__global const half*)row); }
float tl_f32_at(__global const uchar* row, int i) { return ((__global const float*)row)[i]; }
// Elements 4c .. 4c+3 of a float row.
float4 tl_f16_at4(__global const uchar* row, int c) { return vload_half4(c, (__global const half*)row); }
float4 tl_f32_at4(__global const uchar* row, int c) { return vload4(c, (__global const float*)row); }

float tl_q4_0_at(__global const uchar* row, int i) {
  __global const uchar* b = row + (i / 32) * 18;
  const int j = i % 32;
  const int q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
  return tl_half(b) * (float)(q - 8);
}

float tl_q4_1_at(__global const uchar* row, int i) {
  __global const uchar* b = row + (i / 32) * 20;
  const int j = i % 32;
  const int q = j < 16 ? (b[4 + j] & 15) : (b[4 + j - 16] >> 4);
  return tl_half(b) * (float)q + tl_half(b + 2);
}

float tl_q8_0_at(__global const uchar* row, int i) {
  __global const uchar* b = row + (i / 32) * 34;
  return tl_half(b) * (float)(char)b[2 + i % 32];
}

// The 32 exact weights of one block, for the matmuls (each block is decoded once per tile of tokens).
void tl_block_q4_0(__global const uchar* b, float* w) {
  const float d = tl_half(b);
  for (int j = 0; j < 16; ++j) {
    const int q = b[2 + j];
    w[j] = d * (float)((q & 15) - 8);
    w[j + 16] = d * (float)((q >> 4) - 8);
  }
}

void tl_block_q4_1(__global const uchar* b, float* w) {
  const float d = tl_half(b), m = tl_half(b + 2);
  for (int j = 0; j < 16; ++j) {
    const int q = b[4 + j];
    w[j] = d * (float)(q & 15) + m;
    w[j + 16] = d * (float)(q >> 4) + m;
  }
}

void tl_block_q8_0(__global const uchar* b, float* w) {
  const float d = tl_half(b);
  for (int j = 0; j < 32; ++j) w[j] = d * (float)(char)b[2 + j];
}

// The matrix product over rows of 32-weight blocks, written once for every block format; matmul_q4_0.cl,
// matmul_q4_1.cl and matmul_q8_0.cl each instantiate it with their block size and reader.
// y[t] = W x[t]. W: [n_out][row_bytes]; x: [n_tok][n_in]; y: [n_tok][n_out].
// One work-group per (output row r, tile of up to TL_MM_TILE tokens): item i decodes blocks i, i + L, i + 2L,
// ... of the row once into exact weights (L = the local size, a power of two) and dots each with every token
// of the tile; the group then sums each token's partials (common.cl). The token loop's trip count is the same
// for the whole group, so its barriers are uniform. scratch: __local float[L].
#define TL_MATMUL_BLOCK32(NAME, BLOCK_BYTES, READ_BLOCK)                                                \
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
      READ_BLOCK(row + b * (BLOCK_BYTES), wb);                                                            \
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
// matmul_q4_0.cl, matmul_q4_1.cl and matmul_q8_0.cl instantiate it with their block size and a reader that
// forms a block's 32 exact weights as eight float4 (elements 4i .. 4i+3 in w[i]) with whole-vector loads.
// y = W x. W: [n_out][row_bytes]; x: [n_in]; y: [n_out].
// One work-group per TL_MV_ROWS (4, common.cl) consecutive rows: item i takes blocks i, i + L, i + 2L, ... (L = the
// local size, a power of two), loads the block's 32 inputs once and dots them with the four rows' blocks, so
// x is read once per four rows; the group then sums the four partials with one float4 reduction. Rows past
// n_out (the last group) repeat the last row and are not written. scratch: __local float4[L].
#define TL_MATVEC_BLOCK32(NAME, BLOCK_BYTES, READ_BLOCK4)                                               \
  __kernel void NAME(__global const uchar* w, ulong row_bytes, int n_in, int n_out, __global const float* x, \
                     __global float* y, __local float4* scratch) {                                      \
    const int r0 = get_group_id(0) * TL_MV_ROWS;                                                          \
    const int lid = get_local_id(0), ls = get_local_size(0);                                              \
    float4 acc = (float4)(0.0f);                                                                          \
    for (int b = lid; b < n_in / 32; b += ls) {                                                           \
      float4 xv[8], wv[8];                                                                                \
      for (int i = 0; i < 8; ++i) xv[i] = vload4(b * 8 + i, x);                                           \
      float s[TL_MV_ROWS];                                                                                \
      for (int rr = 0; rr < TL_MV_ROWS; ++rr) {                                                           \
        READ_BLOCK4(w + (ulong)min(r0 + rr, n_out - 1) * row_bytes + b * (BLOCK_BYTES), wv);              \
        float4 p = wv[0] * xv[0];                                                                         \
        for (int i = 1; i < 8; ++i) p += wv[i] * xv[i];                                                   \
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

// Block readers for TL_MATVEC_BLOCK32: the same exact weights as tl_block_*, as float4 from vector loads.
void tl_block4_q4_0(__global const uchar* b, float4* w) {
  const float d = tl_half(b);
  for (int i = 0; i < 4; ++i) {
    const int4 q = convert_int4(vload4(0, b + 2 + 4 * i));
    w[i] = d * convert_float4((q & 15) - 8);
    w[i + 4] = d * convert_float4((q >> 4) - 8);
  }
}

void tl_block4_q4_1(__global const uchar* b, float4* w) {
  const float d = tl_half(b), m = tl_half(b + 2);
  for (int i = 0; i < 4; ++i) {
    const int4 q = convert_int4(vload4(0, b + 4 + 4 * i));
    w[i] = d * convert_float4(q & 15) + m;
    w[i + 4] = d * convert_float4(q >> 4) + m;
  }
}

void tl_block4_q8_0(__global const uchar* b, float4* w) {
  const float d = tl_half(b);
  for (int i = 0; i < 8; ++i) w[i] = d * convert_float4(vload4(0, (__global const char*)(b + 2 + 4 * i)));
}
