// The image weight path (--gpu-memory image): matrix products whose weight rows are read from a 2D image
// through the texture path (the seed's Tile-GEMM "Path C"), for F16, Q4_0, Q4_1, Q8_0 and KQ4 (Q4_K).
//
// Image layout (opencl_backend.h, DeviceWeight; image_weight.h plans it): CL_RGBA, CL_UNSIGNED_INT32, so one
// texel is 16 bytes, read whole with read_imageui through a nearest, unnormalized, clamp-to-edge sampler. A
// matrix row holds exactly the bytes of the buffer path's device row (quants.cl: for the block formats the
// codes, then the parameters; F16: the halves), zero-padded to a multiple of 128 bytes (8 texels), so every
// row starts on a 128-byte boundary of the image. A row of T texels occupies L = ceil(T / W) image lines of
// W texels (W: the image width, a multiple of 8; L = 1 unless T exceeds the device's image2d_max_width):
//   texel t (bytes 16t .. 16t + 15) of matrix row r is at  x = t % W,  y = r * L + t / W.
// In texels, with nb = n_in / 32 blocks:
//   Q4_0: block b's 16 code bytes are texel b; its half d is half (b % 8) of texel nb + b / 8.
//   Q4_1: codes as Q4_0; its half d and half m are word (b % 4) of texel nb + b / 4 (d low, m high).
//   Q8_0: block b's 32 code bytes are texels 2b, 2b + 1; its half d is half (b % 8) of texel 2 nb + b / 8.
//   KQ4 (Q4_K): block b's 16 code bytes are texel b; its float scale and offset are words 2 (b % 2) and
//         2 (b % 2) + 1 of texel nb + b / 2.
//   F16: elements 8t .. 8t + 7 are texel t.
// Weights are formed exactly as the buffer kernels form them (quants.cl) and used in float arithmetic, so the
// products differ from the buffer path's only in summation order.
//
// Both kernels work in units of 32 weights of a row (a block; for F16 four texels, the last unit of a row
// whose n_in is not a multiple of 32 reading zeros for the inputs past n_in: the padding texels hold zero
// halves, and the inputs there are never read).

__constant sampler_t tl_nearest =
    CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP_TO_EDGE | CLK_FILTER_NEAREST;

// Texel t of the matrix row whose first image line is y0.
uint4 tl_texel(read_only image2d_t w, int width, int y0, int t) {
  return read_imageui(w, tl_nearest, (int2)(t % width, y0 + t / width));
}

uint tl_word(uint4 v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// The two halves of a 32-bit word (little-endian: the lower-addressed half first), exactly, as floats.
float2 tl_halves2(uint u) { return vload_half2(0, (const __private half*)&u); }
float8 tl_halves8(uint4 v) { return vload_half8(0, (const __private half*)&v); }

// Unit b (weights 32b .. 32b + 31) of a row as 8 float4: o[k] = weights 4k .. 4k + 3 of the unit.
void tl_img_unit_q4_0(read_only image2d_t w, int width, int y0, int b, int n_in, float4* o) {
  const int nb = n_in / 32;
  const uint4 c = tl_texel(w, width, y0, b);
  const float2 h = tl_halves2(tl_word(tl_texel(w, width, y0, nb + b / 8), (b % 8) / 2));
  const float d = (b & 1) ? h.y : h.x;
  const uint words[4] = {c.x, c.y, c.z, c.w};
  for (int k = 0; k < 4; ++k) {
    o[k] = d * tl_lo4(words[k], 8.0f);
    o[k + 4] = d * tl_hi4(words[k], 8.0f);
  }
}

void tl_img_unit_q4_1(read_only image2d_t w, int width, int y0, int b, int n_in, float4* o) {
  const int nb = n_in / 32;
  const uint4 c = tl_texel(w, width, y0, b);
  const float2 dm = tl_halves2(tl_word(tl_texel(w, width, y0, nb + b / 4), b % 4));
  const uint words[4] = {c.x, c.y, c.z, c.w};
  for (int k = 0; k < 4; ++k) {
    o[k] = dm.x * tl_lo4(words[k], 0.0f) + dm.y;
    o[k + 4] = dm.x * tl_hi4(words[k], 0.0f) + dm.y;
  }
}

void tl_img_unit_kq4(read_only image2d_t w, int width, int y0, int b, int n_in, float4* o) {
  const int nb = n_in / 32;
  const uint4 c = tl_texel(w, width, y0, b);
  const uint4 p = tl_texel(w, width, y0, nb + b / 2);
  const float d = as_float(tl_word(p, 2 * (b % 2))), m = as_float(tl_word(p, 2 * (b % 2) + 1));
  const uint words[4] = {c.x, c.y, c.z, c.w};
  for (int k = 0; k < 4; ++k) {
    o[k] = d * tl_lo4(words[k], 0.0f) + m;
    o[k + 4] = d * tl_hi4(words[k], 0.0f) + m;
  }
}

void tl_img_unit_q8_0(read_only image2d_t w, int width, int y0, int b, int n_in, float4* o) {
  const int nb = n_in / 32;
  const uint4 c0 = tl_texel(w, width, y0, 2 * b), c1 = tl_texel(w, width, y0, 2 * b + 1);
  const float2 h = tl_halves2(tl_word(tl_texel(w, width, y0, 2 * nb + b / 8), (b % 8) / 2));
  const float d = (b & 1) ? h.y : h.x;
  const uint words[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
  for (int k = 0; k < 8; ++k) o[k] = d * tl_sbytes4(words[k]);
}

void tl_img_unit_f16(read_only image2d_t w, int width, int y0, int b, int n_in, float4* o) {
  for (int k = 0; k < 4; ++k) {
    const float8 h = tl_halves8(tl_texel(w, width, y0, 4 * b + k));
    o[2 * k] = h.lo;
    o[2 * k + 1] = h.hi;
  }
}

// Inputs 32b .. 32b + 31 of x as 8 float4, zero past n_in.
void tl_x_unit(__global const float* x, int b, int n_in, float4* xv) {
  if (32 * b + 32 <= n_in) {
    for (int k = 0; k < 8; ++k) xv[k] = vload4(k, x + 32 * b);
  } else {
    for (int k = 0; k < 8; ++k) {
      const int e = 32 * b + 4 * k;
      xv[k] = (float4)(e < n_in ? x[e] : 0.0f, e + 1 < n_in ? x[e + 1] : 0.0f, e + 2 < n_in ? x[e + 2] : 0.0f,
                       e + 3 < n_in ? x[e + 3] : 0.0f);
    }
  }
}

float tl_dot_unit(const float4* w, const float4* x) {
  float4 p = w[0] * x[0];
  for (int k = 1; k < 8; ++k) p += w[k] * x[k];
  return (p.x + p.y) + (p.z + p.w);
}

// Decode (one token): y = W x. W: the image above (width W, L lines per row); x: [n_in]; y: [n_out].
// One work-group per TL_MV_ROWS (4, common.cl) consecutive rows: item i takes units i, i + S, ... (S = the
// local size, a power of two), loads that unit of x once and dots it with the four rows' units; one float4
// reduction sums the four rows. Rows past n_out (the last group) repeat the last row and are not written.
// scratch: __local float4[S].
#define TL_MATVEC_IMAGE(NAME, READ_UNIT)                                                                 \
  __kernel void NAME(read_only image2d_t w, int width, int lines, int n_in, int n_out,                   \
                     __global const float* x, __global float* y, __local float4* scratch) {             \
    const int r0 = get_group_id(0) * TL_MV_ROWS;                                                          \
    const int lid = get_local_id(0), ls = get_local_size(0);                                              \
    float4 acc = (float4)(0.0f);                                                                          \
    for (int b = lid; b < (n_in + 31) / 32; b += ls) {                                                    \
      float4 xv[8];                                                                                       \
      tl_x_unit(x, b, n_in, xv);                                                                          \
      float s[TL_MV_ROWS];                                                                                \
      for (int rr = 0; rr < TL_MV_ROWS; ++rr) {                                                           \
        float4 wv[8];                                                                                     \
        READ_UNIT(w, width, min(r0 + rr, n_out - 1) * lines, b, n_in, wv);                                \
        s[rr] = tl_dot_unit(wv, xv);                                                                      \
      }                                                                                                   \
      acc += (float4)(s[0], s[1], s[2], s[3]);                                                            \
    }                                                                                                     \
    acc = tl_group_sum4(acc, scratch);                                                                    \
    if (lid == 0) {                                                                                       \
      if (r0 < n_out) y[r0] = acc.x;                                                                      \
      if (r0 + 1 < n_out) y[r0 + 1] = acc.y;                                                              \
      if (r0 + 2 < n_out) y[r0 + 2] = acc.z;                                                              \
      if (r0 + 3 < n_out) y[r0 + 3] = acc.w;                                                              \
    }                                                                                                     \
  }

// Prompts (several tokens): y[t] = W x[t]. x: [n_tok][n_in]; y: [n_tok][n_out].
// One work-group per (output row r, tile of up to TL_MM_TILE tokens): item i reads units i, i + S, ... of the
// row from the image once and dots each with every token of the tile; the group then sums each token's
// partials. The token loop's trip count is the same for the whole group, so its barriers are uniform.
// scratch: __local float[S].
#define TL_MATMUL_IMAGE(NAME, READ_UNIT)                                                                 \
  __kernel void NAME(read_only image2d_t w, int width, int lines, int n_in, int n_out, int n_tok,        \
                     __global const float* x, __global float* y, __local float* scratch) {              \
    const int r = get_group_id(0), t0 = get_group_id(1) * TL_MM_TILE;                                     \
    const int nt = min(TL_MM_TILE, n_tok - t0);                                                           \
    const int lid = get_local_id(0), ls = get_local_size(0);                                              \
    float acc[TL_MM_TILE];                                                                                \
    for (int t = 0; t < TL_MM_TILE; ++t) acc[t] = 0.0f;                                                   \
    for (int b = lid; b < (n_in + 31) / 32; b += ls) {                                                    \
      float4 wv[8];                                                                                       \
      READ_UNIT(w, width, r * lines, b, n_in, wv);                                                        \
      for (int t = 0; t < nt; ++t) {                                                                      \
        float4 xv[8];                                                                                     \
        tl_x_unit(x + (ulong)(t0 + t) * n_in, b, n_in, xv);                                               \
        acc[t] += tl_dot_unit(wv, xv);                                                                    \
      }                                                                                                   \
    }                                                                                                     \
    for (int t = 0; t < nt; ++t) {                                                                        \
      const float s = tl_group_sum(acc[t], scratch);                                                      \
      if (lid == 0) y[(ulong)(t0 + t) * n_out + r] = s;                                                   \
    }                                                                                                     \
  }

TL_MATVEC_IMAGE(matvec_image_f16, tl_img_unit_f16)
TL_MATVEC_IMAGE(matvec_image_q4_0, tl_img_unit_q4_0)
TL_MATVEC_IMAGE(matvec_image_q4_1, tl_img_unit_q4_1)
TL_MATVEC_IMAGE(matvec_image_q8_0, tl_img_unit_q8_0)
TL_MATVEC_IMAGE(matvec_image_kq4, tl_img_unit_kq4)

TL_MATMUL_IMAGE(matmul_image_f16, tl_img_unit_f16)
TL_MATMUL_IMAGE(matmul_image_q4_0, tl_img_unit_q4_0)
TL_MATMUL_IMAGE(matmul_image_q4_1, tl_img_unit_q4_1)
TL_MATMUL_IMAGE(matmul_image_q8_0, tl_img_unit_q8_0)
TL_MATMUL_IMAGE(matmul_image_kq4, tl_img_unit_kq4)
