// Residual add: acc[i] += x[i] over n floats. Global n rounded up to the preferred multiple; tail items
// return.
__kernel void add(__global float* acc, __global const float* x, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  acc[i] += x[i];
}
