// Rotary position embedding from table rows (no trig on the device): pair i of every head turns by angle i of
// its token's position. Norm mode rotates (x[2i], x[2i+1]); Neox mode rotates (x[i], x[i + n_half]).
// x: [n_tok][n_heads][head_dim], rotated in place; cs: [n_tok][n_half][cos, sin], the table row of each
// token's position, gathered by the host. Global (n_half rounded up, n_heads, n_tok); tail items return.
__kernel void rope(__global float* x, __global const float* cs, int n_tok, int n_heads, int head_dim,
                   int n_half, int neox) {
  const int i = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
  if (i >= n_half || h >= n_heads || t >= n_tok) return;
  __global float* v = x + ((ulong)t * n_heads + h) * head_dim;
  const int i0 = neox ? i : 2 * i;
  const int i1 = neox ? i + n_half : 2 * i + 1;
  const float c = cs[((ulong)t * n_half + i) * 2], s = cs[((ulong)t * n_half + i) * 2 + 1];
  const float2 r = tl_rotate(v[i0], v[i1], c, s);
  v[i0] = r.x;
  v[i1] = r.y;
}
