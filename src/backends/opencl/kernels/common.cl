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

float tl_group_max(float v, __local float* scratch) {
#if TL_SUBGROUPS
  const float s = sub_group_reduce_max(v);
  if (get_sub_group_local_id() == 0) scratch[get_sub_group_id()] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  float t = -INFINITY;
  const uint n = get_num_sub_groups();
  for (uint i = 0; i < n; ++i) t = fmax(t, scratch[i]);
  barrier(CLK_LOCAL_MEM_FENCE);
  return t;
#else
  const uint lid = get_local_id(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) scratch[lid] = fmax(scratch[lid], scratch[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float t = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return t;
#endif
}
