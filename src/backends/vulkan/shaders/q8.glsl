// The rounding of a one-token product's input to int8 per block of 32, as the CUDA kernels and
// backends/q8_round.h do it, operation for operation (d = max|x| / 127, q = round(x * (1 / d)) half away
// from zero, s = d * sum q per half of 16), so that the host's reference multiplies by exactly these values.
// Written by quantize.comp, and by rmsnorm.comp for the products that read its output; read by
// matvec_q8.comp. Layout of the rounded input of n floats, in 32-bit words: [n / 4] code words (4 codes a
// word, lowest byte first), then [n / 32] floats d, then [n / 32] pairs (s of elements 0..15, of 16..31).
// The including shader declares `q8w` (uint) and `q8f` (float) over the same buffer.

// x / 127 and 1 / x correctly rounded (the host's and CUDA's IEEE division; a Vulkan division may be off by
// 2.5 ulp) with additions and multiplications alone, which Vulkan rounds correctly: a driver may round an
// fma twice (lavapipe does), so a correction through fma is not exact everywhere. Each takes an estimate
// within a few ulps and, of it and its neighbours, the one whose residual (x - 127 y, 1 - x y) is smallest:
// the quotient nearest the exact one (neither is ever exactly halfway between two floats).
float tl_ulp_step(float y, int k) { return uintBitsToFloat(uint(int(floatBitsToUint(y)) + k)); }
// |x - 127 y| for y within a few ulps of x / 127 (x >= 0), exactly: 128 y is exact, and x - 128 y and then
// + y subtract values within a factor of two of each other (Sterbenz).
float tl_residual127(float x, float y) {
  precise float t = x - 128.0 * y;
  precise float r = t + y;
  return abs(r);
}
float tl_div127(float x) {
  precise float q = x * (1.0 / 127.0);
  float best = q, best_r = tl_residual127(x, q);
  for (int k = -1; k <= 1; k += 2) {
    const float y = tl_ulp_step(q, k), r = tl_residual127(x, y);
    if (r < best_r) best = y, best_r = r;
  }
  return best;
}
// a * b = p + e exactly (Dekker's product: a and b split into halves of 12 bits, whose products are exact).
void tl_split(float a, out float hi, out float lo) {
  precise float t = 4097.0 * a;
  precise float h = t - (t - a);
  hi = h;
  lo = a - h;
}
// |1 - x y| for y within a few ulps of 1 / x: 1 - p is exact (Sterbenz); subtracting e rounds once, which
// cannot reorder two candidates (their residuals differ by more than that rounding moves either).
float tl_residual_recip(float x, float xh, float xl, float y) {
  float yh, yl;
  tl_split(y, yh, yl);
  precise float p = x * y;
  precise float e = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl;
  precise float r = (1.0 - p) - e;
  return abs(r);
}
float tl_reciprocal(float x) {
  float xh, xl;
  tl_split(x, xh, xl);
  const float r0 = 1.0 / x;
  float best = r0, best_r = tl_residual_recip(x, xh, xl, r0);
  for (int k = -3; k <= 3; ++k) {
    if (k == 0) continue;
    const float y = tl_ulp_step(r0, k), r = tl_residual_recip(x, xh, xl, y);
    if (r < best_r) best = y, best_r = r;
  }
  return best;
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
