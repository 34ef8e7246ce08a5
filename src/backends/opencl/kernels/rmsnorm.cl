// RMSNorm: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for rows of n floats.
// x, y: [n_rows][n]; w: [n]. One work-group per row: each item sums squares of elements lid, lid + L, ...,
// the group sums them (common.cl), then each item scales its elements. scratch: __local float[L].
// y may be x's buffer: every item reads its elements before writing them, after the reduction's barriers.
__kernel void rmsnorm(__global const float* x, __global const float* w, __global float* y, int n, float eps,
                      __local float* scratch) {
  const int row = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
  __global const float* xr = x + (ulong)row * n;
  __global float* yr = y + (ulong)row * n;
  float s = 0.0f;
  for (int i = lid; i < n; i += ls) s += xr[i] * xr[i];
  s = tl_group_sum(s, scratch);
  const float scale = 1.0f / sqrt(s / (float)n + eps);
  for (int i = lid; i < n; i += ls) yr[i] = xr[i] * scale * w[i];
}
