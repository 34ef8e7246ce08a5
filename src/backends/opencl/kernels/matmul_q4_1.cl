// Matrix products y[t] = W x[t] for Q4_1 weights (blocks of 32 weights, 20 bytes; see quants.cl).
// W: [n_out][row_bytes]; x: [n_tok][n_in]; y: [n_tok][n_out].
// One work-group per (output row r, tile of up to TL_MM_TILE tokens): item i decodes blocks i, i + L, i + 2L,
// ... of the row once into exact weights (L = the local size, a power of two) and dots each with every token
// of the tile; the group then sums each token's partials (common.cl). The token loop's trip count is the same
// for the whole group, so its barriers are uniform. scratch: __local float[L].
__kernel void matmul_q4_1(__global const uchar* w, ulong row_bytes, int n_in, int n_out, int n_tok,
                          __global const float* x, __global float* y, __local float* scratch) {
  const int r = get_group_id(0), t0 = get_group_id(1) * TL_MM_TILE;
  const int nt = min(TL_MM_TILE, n_tok - t0);
  const int lid = get_local_id(0), ls = get_local_size(0);
  __global const uchar* row = w + (ulong)r * row_bytes;
  float acc[TL_MM_TILE];
  for (int t = 0; t < TL_MM_TILE; ++t) acc[t] = 0.0f;
  for (int b = lid; b < n_in / 32; b += ls) {
    float wb[32];
    tl_block_q4_1(row + b * 20, wb);
    for (int t = 0; t < nt; ++t) {
      __global const float* xb = x + (ulong)(t0 + t) * n_in + b * 32;
      float s = 0.0f;
      for (int j = 0; j < 32; ++j) s += wb[j] * xb[j];
      acc[t] += s;
    }
  }
  for (int t = 0; t < nt; ++t) {
    const float s = tl_group_sum(acc[t], scratch);
    if (lid == 0) y[(ulong)(t0 + t) * n_out + r] = s;
  }
}
