// Helpers every TileLLM compute shader includes first (after its "#version 450"): the local size (specialization
// constant 0, chosen by the host from the device's capabilities) and the work-group reductions.
//
// Reductions: every invocation of the group calls them (they contain barriers) and every one gets the
// result. tl_red is shared float[gl_WorkGroupSize.x * TL_RED_WIDTH] (TL_RED_WIDTH sums at once, defined
// by the shader before this file; 1 by default).
//  - Shared-memory path (TL_SUBGROUPS 0, always built): a tree over tl_red; the local size is a power of
//    two (the host picks it so).
//  - Subgroup path (TL_SUBGROUPS 1, only used where compute shaders have subgroup arithmetic): each
//    subgroup reduces in registers, one invocation per subgroup writes its partial, and the partials are
//    summed in subgroup order. It holds for any subgroup size from 1 up to the group size (4 ... 128).
// Only 32-bit storage is used (weights are read as 32-bit words and unpacked in the shader), so every
// shader runs on a device without 16- or 8-bit storage.

#extension GL_EXT_control_flow_attributes : enable
#if TL_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;

#ifndef TL_RED_WIDTH
#define TL_RED_WIDTH 1
#endif
shared float tl_red[gl_WorkGroupSize.x * TL_RED_WIDTH];

// Sums v[k] for k < count (<= TL_RED_WIDTH; a specialization constant expression) over the group into v.
// The loops run to the literal TL_RED_WIDTH with k < count inside, so they unroll whatever count is.
void tl_group_sums(inout float v[TL_RED_WIDTH], uint count) {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
#if TL_SUBGROUPS
  [[unroll]] for (uint k = 0; k < TL_RED_WIDTH; ++k) {
    if (k < count) {
      const float s = subgroupAdd(v[k]);
      if (subgroupElect()) tl_red[k * ls + gl_SubgroupID] = s;
    }
  }
  barrier();
  [[unroll]] for (uint k = 0; k < TL_RED_WIDTH; ++k) {
    if (k < count) {
      float t = 0.0;
      for (uint i = 0; i < gl_NumSubgroups; ++i) t += tl_red[k * ls + i];
      v[k] = t;
    }
  }
  barrier();
#else
  [[unroll]] for (uint k = 0; k < TL_RED_WIDTH; ++k) {
    if (k < count) tl_red[k * ls + lid] = v[k];
  }
  barrier();
  for (uint s = ls / 2; s > 0; s >>= 1) {
    if (lid < s) {
      [[unroll]] for (uint k = 0; k < TL_RED_WIDTH; ++k) {
        if (k < count) tl_red[k * ls + lid] += tl_red[k * ls + lid + s];
      }
    }
    barrier();
  }
  [[unroll]] for (uint k = 0; k < TL_RED_WIDTH; ++k) {
    if (k < count) v[k] = tl_red[k * ls];
  }
  barrier();
#endif
}

float tl_group_sum(float x) {
  float v[TL_RED_WIDTH];
  v[0] = x;
  tl_group_sums(v, 1u);
  return v[0];
}

// The maximum over the group (attention's running max): the same two paths.
float tl_group_max(float x) {
  const uint lid = gl_LocalInvocationID.x, ls = gl_WorkGroupSize.x;
#if TL_SUBGROUPS
  const float s = subgroupMax(x);
  if (subgroupElect()) tl_red[gl_SubgroupID] = s;
  barrier();
  float t = tl_red[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) t = max(t, tl_red[i]);
  barrier();
  return t;
#else
  tl_red[lid] = x;
  barrier();
  for (uint s = ls / 2; s > 0; s >>= 1) {
    if (lid < s) tl_red[lid] = max(tl_red[lid], tl_red[lid + s]);
    barrier();
  }
  const float t = tl_red[0];
  barrier();
  return t;
#endif
}

// The gated feed-forward's activations times up, as the CPU computes them (glu.cpp): SiLU g / (1 + e^-g);
// GELU (tanh form) 0.5 g (1 + tanh z) written as g / (1 + e^(-2z)), no cancellation for very negative z.
float tl_silu_mul(float g, float u) { return g / (1.0 + exp(-g)) * u; }
float tl_gelu_mul(float g, float u) {
  const float z = 0.7978845608028654 * (g + 0.044715 * g * g * g);
  return g / (1.0 + exp(-2.0 * z)) * u;
}

// The coordinates of texel i of an image whose rows are w texels wide laid out line after line: (i % w,
// i / w), with the quotient through a float reciprocal (an integer division by a non-constant is a long
// instruction sequence on GPUs; on the H200 the decode matvec took 16% longer with it): for i < 2^32 and
// images of at most 2^16 lines the estimate is within one of the quotient, and the remainder's sign and
// size correct it.
ivec2 tl_texel_coord(uint i, uint w) {
  uint y = uint(float(i) * (1.0 / float(w)));
  int x = int(i - y * w);
  y = x < 0 ? y - 1u : x >= int(w) ? y + 1u : y;
  x = x < 0 ? x + int(w) : x >= int(w) ? x - int(w) : x;
  return ivec2(x, int(y));
}
