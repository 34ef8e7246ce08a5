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
