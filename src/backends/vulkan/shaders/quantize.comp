#version 450
// The input of one-token integer products rounded to int8 per block of 32 (matvec_q8.comp reads it): as
// the CUDA kernels and backends/q8_round.h round it, operation for operation (d = max|x| / 127, q =
// round(x * (1 / d)) half away from zero, s = d * sum q per half of 16), so that the host's reference
// multiplies by exactly these values. One invocation a block.
// x: [n] floats (n a multiple of 32). q: [n / 4] words of codes (4 a word, lowest byte first), then
// [n / 32] floats d, then [n / 32] pairs (s of elements 0..15, s of 16..31) — word offsets 0, n / 4, 9 n / 32.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) writeonly buffer Q { uint q[]; };
layout(std430, binding = 1) writeonly buffer QF { float qf[]; };
layout(push_constant) uniform P { uint n; } pc;

// x / 127 and 1 / x correctly rounded (the host's and CUDA's IEEE division; a Vulkan division may be off
// by 2.5 ulp): an estimate and one fused correction.
float div127(float x) {
  precise float e = x * (1.0 / 127.0);
  precise float r = fma(-e, 127.0, x);
  precise float res = fma(r, 1.0 / 127.0, e);
  return res;
}
float reciprocal(float x) {
  precise float r = 1.0 / x;
  precise float e = fma(-x, r, 1.0);
  precise float res = fma(r, e, r);
  return res;
}
// round(v) half away from zero (C's roundf; GLSL's round may take either way at .5).
int round_away(float v) {
  const float a = abs(v), t = trunc(a);
  const int k = int(t) + (a - t >= 0.5 ? 1 : 0);
  return v < 0.0 ? -k : k;
}

void main() {
  const uint b = gl_GlobalInvocationID.x, nb = pc.n / 32u;
  if (b >= nb) return;
  vec4 v[8];
  float amax = 0.0;
  [[unroll]] for (uint k = 0; k < 8u; ++k) {
    v[k] = x4[8u * b + k];
    const vec4 a = abs(v[k]);
    amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
  }
  const float d = div127(amax);
  const float id = d != 0.0 ? reciprocal(d) : 0.0;
  ivec2 sum = ivec2(0);
  [[unroll]] for (uint k = 0; k < 8u; ++k) {
    precise const vec4 s = v[k] * id;
    const ivec4 c = ivec4(round_away(s.x), round_away(s.y), round_away(s.z), round_away(s.w));
    sum[k / 4u] += c.x + c.y + c.z + c.w;
    q[8u * b + k] = uint(c.x & 255) | uint(c.y & 255) << 8 | uint(c.z & 255) << 16 | uint(c.w & 255) << 24;
  }
  qf[8u * nb + b] = d;
  qf[9u * nb + 2u * b] = d * float(sum.x);
  qf[9u * nb + 2u * b + 1u] = d * float(sum.y);
}
