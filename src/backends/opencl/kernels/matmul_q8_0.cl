// Matrix-vector products y[t] = W x[t] for Q8_0 weights (blocks of 32 weights, 34 bytes; see quants.cl).
// W: [n_out][row_bytes]; x: [n_tok][n_in]; y: [n_tok][n_out].
// One work-group per (output row r, token t): item i dots blocks i, i + L, i + 2L, ... of the row with x[t]
// (L = the local size, a power of two), then the group sums the partials (common.cl). scratch: __local
// float[L].
__kernel void matmul_q8_0(__global const uchar* w, ulong row_bytes, int n_in, int n_out,
                          __global const float* x, __global float* y, __local float* scratch) {
  const int r = get_group_id(0), t = get_group_id(1);
  const int lid = get_local_id(0), ls = get_local_size(0);
  __global const uchar* row = w + (ulong)r * row_bytes;
  __global const float* xt = x + (ulong)t * n_in;
  float acc = 0.0f;
  for (int b = lid; b < n_in / 32; b += ls) acc += tl_dot_q8_0(row + b * 34, xt + b * 32);
  acc = tl_group_sum(acc, scratch);
  if (lid == 0) y[(ulong)t * n_out + r] = acc;
}
