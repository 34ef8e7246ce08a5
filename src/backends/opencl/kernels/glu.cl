// Gated linear unit: out = act(gate) * up over n floats, act SiLU or GELU (tanh form), both exact like the
// CPU's (glu.cpp). gate, up, out: [n]; out may be gate's buffer (each item reads before it writes). Global n
// rounded up to the preferred multiple; tail items return. The activations are common.cl's tl_silu_mul and
// tl_gelu_mul, which the fused decode kernel (quants.cl, TL_MATVEC_GLU_BLOCK32) uses too.
__kernel void glu_silu(__global const float* gate, __global const float* up, __global float* out, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  out[i] = tl_silu_mul(gate[i], up[i]);
}

__kernel void glu_gelu(__global const float* gate, __global const float* up, __global float* out, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  out[i] = tl_gelu_mul(gate[i], up[i]);
}
