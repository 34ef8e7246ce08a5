// Matrix-vector products y[t] = W x[t] for F32 weights; also the path of every type dequantized at load
// (K-quants, Q5_0, Q5_1, BF16: see docs/OPENCL.md).
// W: [n_out][n_in] floats (row_bytes = 4 n_in); x: [n_tok][n_in]; y: [n_tok][n_out].
// One work-group per (output row r, token t): item i sums elements i, i + L, ... (L = the local size, a power
// of two), then the group sums the partials (common.cl). scratch: __local float[L].
__kernel void matmul_f32(__global const uchar* w, ulong row_bytes, int n_in, int n_out,
                         __global const float* x, __global float* y, __local float* scratch) {
  const int r = get_group_id(0), t = get_group_id(1);
  const int lid = get_local_id(0), ls = get_local_size(0);
  __global const float* row = (__global const float*)(w + (ulong)r * row_bytes);
  __global const float* xt = x + (ulong)t * n_in;
  float acc = 0.0f;
  for (int i = lid; i < n_in; i += ls) acc += row[i] * xt[i];
  acc = tl_group_sum(acc, scratch);
  if (lid == 0) y[(ulong)t * n_out + r] = acc;
}
