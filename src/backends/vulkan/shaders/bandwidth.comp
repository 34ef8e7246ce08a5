#version 450
// The Vulkan device's memory probes for `tilellm gemv-bw` (bandwidth.h): pure reads of a large buffer and a
// copy of it, timed by the runtime's timestamps. TL_MODE (specialization constant 1):
//   0 read, strided: invocation i sums vec4s i, i + G, i + 2G, ... (G = the invocations dispatched; adjacent
//     invocations read adjacent memory at each step) and writes one float, which keeps its reads alive;
//   1 read, pairs: invocation i sums vec4s i and i + G only (G about n4 / 2): many short invocations with two
//     loads in flight each (what finished a read of tens of MB soonest on the H200 under OpenCL);
//   2 copy: dst[i] = src[i] over the vec4s, strided as mode 0 (read + write bytes counted by the host).
// src: [n4] vec4; dst: [G] floats (modes 0, 1) or [n4] vec4s (mode 2). Groups cover G in (x, y).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer S { vec4 src[]; };
layout(std430, binding = 1) writeonly buffer D { float dst[]; };
layout(std430, binding = 1) writeonly buffer D4 { vec4 dst4[]; };
layout(push_constant) uniform P { uint n4; } pc;
layout(constant_id = 1) const uint TL_MODE = 0;

void main() {
  const uint g = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  const uint i = gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (TL_MODE == 2u) {
    for (uint k = i; k < pc.n4; k += g) dst4[k] = src[k];
    return;
  }
  vec4 acc = vec4(0.0);
  if (TL_MODE == 1u) {
    if (i < pc.n4) acc = src[i];
    if (i + g < pc.n4) acc += src[i + g];
  } else {
    for (uint k = i; k < pc.n4; k += g) acc += src[k];
  }
  dst[i] = (acc.x + acc.y) + (acc.z + acc.w);
}
