// The slices of a split-K prompt product (gemm.cl) into its output: y[i] = parts[0][i] + parts[1][i] + ...
// in slice order, over n = n_tok * n_out floats. parts: [n_splits][n]; y: [n]. Global n rounded up to the
// preferred multiple; tail items return.
__kernel void gemm_split_sum(__global const float* parts, int n_splits, int n, __global float* y) {
  const int i = get_global_id(0);
  if (i >= n) return;
  float s = parts[i];
  for (int z = 1; z < n_splits; ++z) s += parts[(ulong)z * n + i];
  y[i] = s;
}
