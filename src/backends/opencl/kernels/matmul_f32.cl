// Matrix products y[t] = W x[t] for F32 weights: GGUF F32 matrices, BF16 ones (dequantized at load) and
// --weights f32 (docs/OPENCL.md). The K-quants and Q5_0 / Q5_1 have kernels of their own (matmul_kq4.cl,
// matmul_kq8.cl).
// W: [n_out][n_in] (floats, row_bytes = 4 n_in); x: [n_tok][n_in]; y: [n_tok][n_out].
// The tiled GEMM of gemm.cl, reading 32 consecutive F32 weights per block (the last block of a row
// whose length is not a multiple of 32 element by element). Where no tile fits the device (TL_GEMM 0), the
// row kernel below.
#if TL_GEMM
TL_GEMM_KERNEL(matmul_f32, f32)
#else
// One work-group per (output row r, tile of up to TL_MM_TILE tokens): item i reads elements i, i + L, ... of
// the row once (L = the local size, a power of two) and multiplies each with every token of the tile; the
// group then sums each token's partials (common.cl). scratch: __local float[L].
__kernel void matmul_f32(__global const uchar* w, ulong row_bytes, int n_in, int n_out, int n_tok,
                         __global const float* x, __global float* y, __local float* scratch) {
  const int r = get_group_id(0), t0 = get_group_id(1) * TL_MM_TILE;
  const int nt = min(TL_MM_TILE, n_tok - t0);
  const int lid = get_local_id(0), ls = get_local_size(0);
  __global const float* row = (__global const float*)(w + (ulong)r * row_bytes);
  float acc[TL_MM_TILE];
  for (int t = 0; t < TL_MM_TILE; ++t) acc[t] = 0.0f;
  for (int i = lid; i < n_in; i += ls) {
    const float wi = row[i];
    for (int t = 0; t < nt; ++t) acc[t] += wi * x[(ulong)(t0 + t) * n_in + i];
  }
  for (int t = 0; t < nt; ++t) {
    const float s = tl_group_sum(acc[t], scratch);
    if (lid == 0) y[(ulong)(t0 + t) * n_out + r] = s;
  }
}
#endif

// Decode (one token): the float-row matrix-vector product of common.cl (TL_MATVEC_FLOAT).
TL_MATVEC_FLOAT(matvec_f32, tl_f32_at4, tl_f32_at)
