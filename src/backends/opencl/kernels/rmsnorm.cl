// RMSNorm: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for rows of n floats.
// x, y: [n_rows][n]; w: [n]. One work-group per row: item i sums the squares of the float4 chunks i, i + L,
// ... (L = the local size, a power of two) and of one of the last n % 4 elements, the group sums them
// (common.cl), then each item scales the same elements. The host gives a decode row (one row of n_embd) up to
// one chunk per item: on an NVIDIA H200 a 4096-float row took 11 us with 256 items walking 16 elements each,
// a chain of dependent loads. scratch: __local float[L].
// y may be x's buffer: every item reads its elements before writing them, after the reduction's barriers.
// yq: null, or (one row, n % 32 == 0, y not x's buffer, integer products built) y also rounded as
// quantize_q8 rounds it into yq's row of TL_Q8_ROW(n / 32) words (gemm_q8.cl), so that decode's first
// product needs no rounding launch of its own: item i rounds blocks i, i + L, ... from the values it
// computes again as y's writers did (float4 steps: the same products, element by element).
__kernel void rmsnorm(__global const float* x, __global const float* w, __global float* y, int n, float eps,
                      __local float* scratch, __global uint* yq) {
  const int row = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
  __global const float* xr = x + (ulong)row * n;
  __global float* yr = y + (ulong)row * n;
  const int n4 = n / 4;
  float s = 0.0f;
  for (int c = lid; c < n4; c += ls) {
    const float4 v = vload4(c, xr);
    s += dot(v, v);
  }
  if (4 * n4 + lid < n) s += xr[4 * n4 + lid] * xr[4 * n4 + lid];
  s = tl_group_sum(s, scratch);
  const float scale = 1.0f / sqrt(s / (float)n + eps);
  for (int c = lid; c < n4; c += ls) vstore4(vload4(c, xr) * scale * vload4(c, w), c, yr);
  if (4 * n4 + lid < n) yr[4 * n4 + lid] = xr[4 * n4 + lid] * scale * w[4 * n4 + lid];
#if TL_GEMM && TL_Q8_GEMM
  if (yq) {
    const int nb = n / 32;
    for (int b = lid; b < nb; b += ls) {
      float f[32];  // the values y holds, 16 loads issued before the first product
      for (int k = 0; k < 8; ++k) vstore4(vload4(k, xr + 32 * b) * scale * vload4(k, w + 32 * b), k, f);
      tl_q8_round_block(f, yq + (ulong)row * TL_Q8_ROW(nb), b, nb);
    }
  }
#endif
}

// The residual add and the next RMSNorm in one pass (Backend::add_rmsnorm): acc[r] += x[r], then
// y[r] = rmsnorm(acc[r]) * w, with rmsnorm's work split and summation order, so y equals an add followed by
// rmsnorm. Each item rereads only the acc elements it wrote itself. y must not alias acc or x.
__kernel void add_rmsnorm(__global float* acc, __global const float* x, __global const float* w,
                          __global float* y, int n, float eps, __local float* scratch) {
  const int row = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
  __global float* ar = acc + (ulong)row * n;
  __global const float* xr = x + (ulong)row * n;
  __global float* yr = y + (ulong)row * n;
  const int n4 = n / 4;
  float s = 0.0f;
  for (int c = lid; c < n4; c += ls) {
    const float4 v = vload4(c, ar) + vload4(c, xr);
    vstore4(v, c, ar);
    s += dot(v, v);
  }
  if (4 * n4 + lid < n) {
    const float v = ar[4 * n4 + lid] + xr[4 * n4 + lid];
    ar[4 * n4 + lid] = v;
    s += v * v;
  }
  s = tl_group_sum(s, scratch);
  const float scale = 1.0f / sqrt(s / (float)n + eps);
  for (int c = lid; c < n4; c += ls) vstore4(vload4(c, ar) * scale * vload4(c, w), c, yr);
  if (4 * n4 + lid < n) yr[4 * n4 + lid] = ar[4 * n4 + lid] * scale * w[4 * n4 + lid];
}

// The scale a product left to its readers (quants.cl, "The RMSNorm around decode's products"), applied where
// something else reads the norm's output: y[i] *= scale[0] for the n floats of y.
__kernel void rms_scale(__global float* y, __global const float* scale, int n) {
  const int i = get_global_id(0);
  if (i < n) y[i] *= scale[0];
}
