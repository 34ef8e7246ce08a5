// Gated linear unit: out = act(gate) * up over n floats, act SiLU or GELU (tanh form), both exact like the
// CPU's (glu.cpp). gate, up, out: [n]; out may be gate's buffer (each item reads before it writes). Global n
// rounded up to the preferred multiple; tail items return.
__kernel void glu_silu(__global const float* gate, __global const float* up, __global float* out, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const float g = gate[i];
  out[i] = g / (1.0f + exp(-g)) * up[i];
}

// 0.5 x (1 + tanh z) written as x / (1 + e^(-2z)), as on the CPU: no cancellation for very negative z.
__kernel void glu_gelu(__global const float* gate, __global const float* up, __global float* out, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const float x = gate[i];
  const float z = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  out[i] = x / (1.0f + exp(-2.0f * z)) * up[i];
}
