#version 450
// Residual add: acc[i] += x[i] over n floats. Groups cover n in (x, y) rows of groups (a long vector needs
// more groups than one dimension allows on some devices); tail invocations return.
#include "common.glsl"

layout(std430, binding = 0) buffer A { float acc[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform P { uint n; } pc;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i >= pc.n) return;
  acc[i] += x[i];
}
