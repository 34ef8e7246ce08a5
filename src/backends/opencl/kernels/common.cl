// Helpers every TileLLM OpenCL program starts with (after the generated header, which defines TL_SUBGROUPS,
// TL_FP16 for the device and profile, and the backend's constants TL_KV_F16 and TL_MM_TILE).
//
// Work-group reductions. Every work-item of the group must call them (they contain barriers) and every one
// gets the result. `scratch` is __local float[get_local_size(0)].
//  - Shared-memory path (always available): a tree over scratch; the local size must be a power of two (the
//    host picks it so).
//  - Subgroup path (TL_SUBGROUPS, only when the device has cl_khr_subgroups): each subgroup reduces in
//    registers, its first item writes one partial, and the partials are combined from scratch in subgroup
//    order. It works for any subgroup size up to the group size (so up to 128).

// The CPU reference is compiled without floating-point contraction; turning it off here keeps elementwise
// results (RoPE's a*c - b*s, GLU, the quantized weight w = d*q + m) bit-comparable with it.
#pragma OPENCL FP_CONTRACT OFF

// RoPE's turn of the pair (a, b) by the angle with cosine c and sine s (rope.cl, kv_store.cl).
float2 tl_rotate(float a, float b, float c, float s) { return (float2)(a * c - b * s, a * s + b * c); }

// The gated feed-forward's activations times up, as the CPU computes them (glu.cpp): SiLU g / (1 + e^-g);
// GELU (tanh form) 0.5 g (1 + tanh z) written as g / (1 + e^(-2z)), no cancellation for very negative z.
float tl_silu_mul(float g, float u) { return g / (1.0f + exp(-g)) * u; }
float tl_gelu_mul(float g, float u) {
  const float z = 0.7978845608028654f * (g + 0.044715f * g * g * g);
  return g / (1.0f + exp(-2.0f * z)) * u;
}
// act: 0 SiLU, 1 GELU-tanh (a kernel argument where one kernel serves both).
float tl_glu(float g, float u, int act) { return act ? tl_gelu_mul(g, u) : tl_silu_mul(g, u); }

float tl_group_sum(float v, __local float* scratch) {
#if TL_SUBGROUPS
  const float s = sub_group_reduce_add(v);
  if (get_sub_group_local_id() == 0) scratch[get_sub_group_id()] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  float t = 0.0f;
  const uint n = get_num_sub_groups();
  for (uint i = 0; i < n; ++i) t += scratch[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  return t;
#else
  const uint lid = get_local_id(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) scratch[lid] += scratch[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float t = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return t;
#endif
}

// Four sums at once (the matvec kernels' four rows): scratch is __local float4[get_local_size(0)].
float4 tl_group_sum4(float4 v, __local float4* scratch) {
#if TL_SUBGROUPS
  const float4 s = (float4)(sub_group_reduce_add(v.x), sub_group_reduce_add(v.y), sub_group_reduce_add(v.z),
                            sub_group_reduce_add(v.w));
  if (get_sub_group_local_id() == 0) scratch[get_sub_group_id()] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  float4 t = (float4)(0.0f);
  const uint n = get_num_sub_groups();
  for (uint i = 0; i < n; ++i) t += scratch[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  return t;
#else
  const uint lid = get_local_id(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) scratch[lid] += scratch[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float4 t = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return t;
#endif
}

// The matrix-vector product (decode: one token) for float rows (F32, F16), written once; matmul_f32.cl and
// matmul_f16.cl instantiate it with a 4-element and a 1-element reader of a row.
// y = W x. W: [n_out][row_bytes]; x: [n_in]; y: [n_out].
// One work-group per TL_MV_ROWS (4) consecutive rows: item i takes the 4-element chunks i, i + L, ... (L = the
// local size, a power of two) of the four rows, so each chunk of x is read once per four rows; the last
// n_in % 4 elements go one per item. One float4 reduction sums the four rows' partials. Rows past n_out (the
// last group) repeat the last row and are not written. scratch: __local float4[L].
#define TL_MV_ROWS 4
#define TL_MATVEC_FLOAT(NAME, LOAD4, LOAD1)                                                             \
  __kernel void NAME(__global const uchar* w, ulong row_bytes, int n_in, int n_out, __global const float* x, \
                     __global float* y, __local float4* scratch) {                                      \
    const int r0 = get_group_id(0) * TL_MV_ROWS;                                                          \
    const int lid = get_local_id(0), ls = get_local_size(0);                                              \
    __global const uchar* rows[TL_MV_ROWS];                                                               \
    for (int rr = 0; rr < TL_MV_ROWS; ++rr) rows[rr] = w + (ulong)min(r0 + rr, n_out - 1) * row_bytes;    \
    float4 acc = (float4)(0.0f);                                                                          \
    for (int c = lid; c < n_in / 4; c += ls) {                                                            \
      const float4 xv = vload4(c, x);                                                                     \
      float s[TL_MV_ROWS];                                                                                \
      for (int rr = 0; rr < TL_MV_ROWS; ++rr) {                                                           \
        const float4 p = LOAD4(rows[rr], c) * xv;                                                         \
        s[rr] = (p.x + p.y) + (p.z + p.w);                                                                \
      }                                                                                                   \
      acc += (float4)(s[0], s[1], s[2], s[3]);                                                            \
    }                                                                                                     \
    for (int i = n_in / 4 * 4 + lid; i < n_in; i += ls) {                                                 \
      const float xi = x[i];                                                                              \
      acc += (float4)(LOAD1(rows[0], i, n_in), LOAD1(rows[1], i, n_in), LOAD1(rows[2], i, n_in), LOAD1(rows[3], i, n_in)) * xi;   \
    }                                                                                                     \
    acc = tl_group_sum4(acc, scratch);                                                                    \
    if (lid == 0) {                                                                                       \
      if (r0 < n_out) y[r0] = acc.x;                                                                      \
      if (r0 + 1 < n_out) y[r0 + 1] = acc.y;                                                              \
      if (r0 + 2 < n_out) y[r0 + 2] = acc.z;                                                              \
      if (r0 + 3 < n_out) y[r0 + 3] = acc.w;                                                              \
    }                                                                                                     \
  }
