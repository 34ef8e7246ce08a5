// The rounding of a one-token product's input to int8 per block of 32, as the CUDA kernels and
// backends/q8_round.h do it, operation for operation (d = max|x| / 127, q = round(x * (1 / d)) half away
// from zero, s = d * sum q per half of 16), so that the host's reference multiplies by exactly these values.
// Written by quantize.comp, and by rmsnorm.comp for the products that read its output; read by
// matvec_q8.comp. Layout of the rounded input of n floats, in 32-bit words: [n / 4] code words (4 codes a
// word, lowest byte first), then [n / 32] floats d, then [n / 32] pairs (s of elements 0..15, of 16..31).
// The including shader declares `q8w` (uint) and `q8f` (float) over the same buffer.

// x / 127 and 1 / x correctly rounded (the host's and CUDA's IEEE division; a Vulkan division may be off
// by 2.5 ulp): an estimate and one fused correction.
float tl_div127(float x) {
  precise float e = x * (1.0 / 127.0);
  precise float r = fma(-e, 127.0, x);
  precise float res = fma(r, 1.0 / 127.0, e);
  return res;
}
float tl_reciprocal(float x) {
  precise float r = 1.0 / x;
  precise float e = fma(-x, r, 1.0);
  precise float res = fma(r, e, r);
  return res;
}
// round(v) half away from zero (C's roundf; GLSL's round may take either way at .5).
int tl_round_away(float v) {
  const float a = abs(v), t = trunc(a);
  const int k = int(t) + (a - t >= 0.5 ? 1 : 0);
  return v < 0.0 ? -k : k;
}

// Block b (of nb) of the rounded input from its 32 floats v.
void tl_q8_store(vec4 v[8], uint b, uint nb) {
  float amax = 0.0;
  [[unroll]] for (uint k = 0; k < 8u; ++k) {
    const vec4 a = abs(v[k]);
    amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
  }
  const float d = tl_div127(amax);
  const float id = d != 0.0 ? tl_reciprocal(d) : 0.0;
  ivec2 sum = ivec2(0);
  [[unroll]] for (uint k = 0; k < 8u; ++k) {
    precise const vec4 s = v[k] * id;
    const ivec4 c = ivec4(tl_round_away(s.x), tl_round_away(s.y), tl_round_away(s.z), tl_round_away(s.w));
    sum[k / 4u] += c.x + c.y + c.z + c.w;
    q8w[8u * b + k] = uint(c.x & 255) | uint(c.y & 255) << 8 | uint(c.z & 255) << 16 | uint(c.w & 255) << 24;
  }
  q8f[8u * nb + b] = d;
  q8f[9u * nb + 2u * b] = d * float(sum.x);
  q8f[9u * nb + 2u * b + 1u] = d * float(sum.y);
}
