// Pure reads of a large buffer, for the bandwidth peak `tilellm gemv-bw` measures beside the matvec kernels;
// each item writes one float, which keeps its reads alive. The benchmark reports the better of the two
// access orders, as each suits one kind of device. src: [n4] float4; out: [G] floats (G = the global size).
// read_sum_strided: item i sums elements i, i + G, i + 2G, ... (adjacent items read adjacent memory at each
// step: coalesced loads on a GPU).
__kernel void read_sum_strided(__global const float4* src, ulong n4, __global float* out) {
  const ulong g = get_global_size(0);
  float4 acc = (float4)(0.0f);
  for (ulong i = get_global_id(0); i < n4; i += g) acc += src[i];
  out[get_global_id(0)] = (acc.x + acc.y) + (acc.z + acc.w);
}

// read_sum_blocked: item i sums its own contiguous run of ceil(n4 / G) elements (a CPU core streams it).
__kernel void read_sum_blocked(__global const float4* src, ulong n4, __global float* out) {
  const ulong g = get_global_size(0), chunk = (n4 + g - 1) / g, i0 = get_global_id(0) * chunk;
  const ulong i1 = min(i0 + chunk, n4);
  float4 acc = (float4)(0.0f);
  for (ulong i = i0; i < i1; ++i) acc += src[i];
  out[get_global_id(0)] = (acc.x + acc.y) + (acc.z + acc.w);
}

// read_sum_pairs: item i sums elements i and i + G only (G = the global size, about n4 / 2): many short
// items, each with two loads in flight, which on a GPU finishes a read of a few tens of MB sooner than
// items that loop (measured on an NVIDIA H200: docs/OPENCL.md).
__kernel void read_sum_pairs(__global const float4* src, ulong n4, __global float* out) {
  const ulong g = get_global_size(0), i = get_global_id(0);
  float4 acc = (float4)(0.0f);
  if (i < n4) acc = src[i];
  if (i + g < n4) acc += src[i + g];
  out[i] = (acc.x + acc.y) + (acc.z + acc.w);
}
