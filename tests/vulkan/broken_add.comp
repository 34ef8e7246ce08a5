#version 450
// A deliberately broken add (the self-check test's replacement for shaders/add.comp, same bindings and push
// constants): it writes acc = x instead of acc += x.
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer A { float acc[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform P { uint n; } pc;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i >= pc.n) return;
  acc[i] = x[i];
}
