// The prompt's matrix products in integers (--activations q8, the default, on a device with a dot product
// of four 8-bit integers): the input rounded to int8 per block of 32 as the CUDA and Vulkan backends round
// it (backends/q8_round.h), each weight block's codes dotted with the rounded block in 32-bit integers,
// four products an instruction, and the block's sum scaled once. Every program gets this file after
// common.cl, quants.cl and gemm.cl, whose tile (TL_GEMM_*) and fetchers it shares; it is empty unless the
// header sets TL_Q8_GEMM. matmul_q8.cl holds the rounding kernel and the formats' kernels.
//
// Rounded input (matmul_q8.cl's quantize_q8), per token a row of nb = n_in / 32 blocks in TL_Q8_ROW(nb)
// 32-bit words (10 nb rounded up to a multiple of 4, so that every row's codes are 16-byte aligned):
//   [nb][8] code words (4 codes a word, lowest byte first, element order), then [nb] floats d, then [nb]
//   floats s = d * (sum of the block's codes); element k of block b is d q (as round_activations_q8).
// The weights as the dot products take them (tl_q8w_FMT): 8 words of codes c in element order (unsigned:
// 4-bit codes and INT8B0's bytes; signed: Q8_0's) and (d, m) with w = d c + m (Q4_0: m = -8 d). So block
// b of row r and token t adds dw dx (sum c q) + m s: the integer sum exact, a few float roundings a block.
//
// TL_Q8_DOT picks the dot product: 2, PTX's dp4a through NVIDIA's inline assembly (the capability probe,
// device.cpp, built it; not volatile: a pure function of its operands, which the compiler may schedule);
// 1, cl_khr_integer_dot_product's dot; 0, four multiply-adds of integers (tests on devices with neither).
#if TL_GEMM && TL_Q8_GEMM

#define TL_Q8_ROW(nb) ((10 * (nb) + 3) & ~3)

#if TL_Q8_DOT == 2
int tl_dot_ss(uint a, uint b, int c) {
  int r;
  asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
int tl_dot_su(uint a, uint b, int c) {
  int r;
  asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
#elif TL_Q8_DOT == 1
#pragma OPENCL EXTENSION cl_khr_integer_dot_product : enable
int tl_dot_ss(uint a, uint b, int c) { return c + dot(as_char4(a), as_char4(b)); }
int tl_dot_su(uint a, uint b, int c) { return c + dot(as_char4(a), as_uchar4(b)); }
#else
int tl_dot_ss(uint a, uint b, int c) {
  const int4 p = convert_int4(as_char4(a)) * convert_int4(as_char4(b));
  return c + p.x + p.y + p.z + p.w;
}
int tl_dot_su(uint a, uint b, int c) {
  const int4 p = convert_int4(as_char4(a)) * convert_int4(as_uchar4(b));
  return c + p.x + p.y + p.z + p.w;
}
#endif

// x / 127 and 1 / x correctly rounded. With TL_EXACT_DIV the program is built with
// -cl-fp32-correctly-rounded-divide-sqrt; else OpenCL's division may be off by 2.5 ulp, and the quotient is
// the one of the estimate and its neighbours whose residual is smallest (never exactly halfway between two
// floats), with additions and multiplications alone (FP_CONTRACT is off: common.cl).
#if TL_EXACT_DIV
float tl_div127(float x) { return x / 127.0f; }
float tl_reciprocal(float x) { return 1.0f / x; }
#else
float tl_ulp_step(float y, int k) { return as_float(as_int(y) + k); }
// |x - 127 y| exactly for y within a few ulps of x / 127: 128 y is exact, and both subtractions are of
// values within a factor of two (Sterbenz).
float tl_residual127(float x, float y) { return fabs((x - 128.0f * y) + y); }
float tl_div127(float x) {
  const float q = x / 127.0f;
  float best = q, best_r = tl_residual127(x, q);
  for (int k = -2; k <= 2; ++k) {
    const float y = tl_ulp_step(q, k), r = tl_residual127(x, y);
    if (k != 0 && r < best_r) best = y, best_r = r;
  }
  return best;
}
// a = hi + lo, halves of 12 bits whose products are exact (Dekker).
void tl_split(float a, float* hi, float* lo) {
  const float t = 4097.0f * a;
  *hi = t - (t - a);
  *lo = a - *hi;
}
// |1 - x y| for y near 1 / x: 1 - x y as p + e exactly, one rounding after.
float tl_residual_recip(float x, float xh, float xl, float y) {
  float yh, yl;
  tl_split(y, &yh, &yl);
  const float p = x * y;
  const float e = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl;
  return fabs((1.0f - p) - e);
}
float tl_reciprocal(float x) {
  float xh, xl;
  tl_split(x, &xh, &xl);
  const float r0 = 1.0f / x;
  float best = r0, best_r = tl_residual_recip(x, xh, xl, r0);
  for (int k = -3; k <= 3; ++k) {
    const float y = tl_ulp_step(r0, k), r = tl_residual_recip(x, xh, xl, y);
    if (k != 0 && r < best_r) best = y, best_r = r;
  }
  return best;
}
#endif

// The weight formats' codes and (d, m) as the dot products take them, from a block as read (quants.cl).
// 4-bit codes: word i < 4 holds weights 4i .. 4i + 3 in its bytes' low nibbles, word i + 4 weights
// 16 + 4i ... in their high nibbles (quants.cl's split rows).
void tl_q8w_nibbles(const tl_raw32* r, uint c[8]) {
  const uint4 lo = r->c[0] & 0x0F0F0F0Fu, hi = (r->c[0] >> 4) & 0x0F0F0F0Fu;
  c[0] = lo.x, c[1] = lo.y, c[2] = lo.z, c[3] = lo.w;
  c[4] = hi.x, c[5] = hi.y, c[6] = hi.z, c[7] = hi.w;
}
void tl_q8w_bytes(const tl_raw32* r, uint c[8]) {
  c[0] = r->c[0].x, c[1] = r->c[0].y, c[2] = r->c[0].z, c[3] = r->c[0].w;
  c[4] = r->c[1].x, c[5] = r->c[1].y, c[6] = r->c[1].z, c[7] = r->c[1].w;
}
float2 tl_half_pair(uint p) { return (float2)(tl_half_bits(p), tl_half_bits(p >> 16)); }
float2 tl_q8w_q4_0(const tl_raw32* r, uint c[8]) {
  tl_q8w_nibbles(r, c);
  const float d = tl_half_bits(r->p.x);
  return (float2)(d, -8.0f * d);
}
float2 tl_q8w_q4_1(const tl_raw32* r, uint c[8]) {
  tl_q8w_nibbles(r, c);
  return tl_half_pair(r->p.x);
}
float2 tl_q8w_int4b64(const tl_raw32* r, uint c[8]) { return tl_q8w_q4_1(r, c); }
float2 tl_q8w_kq4(const tl_raw32* r, uint c[8]) {
  tl_q8w_nibbles(r, c);
  return as_float2(r->p.xy);
}
float2 tl_q8w_q8_0(const tl_raw32* r, uint c[8]) {
  tl_q8w_bytes(r, c);
  return (float2)(tl_half_bits(r->p.x), 0.0f);
}
float2 tl_q8w_int8b0(const tl_raw32* r, uint c[8]) {
  tl_q8w_bytes(r, c);
  return tl_half_pair(r->p.x);
}
// Whether a format's codes are signed bytes.
#define TL_Q8S_q4_0 0
#define TL_Q8S_q4_1 0
#define TL_Q8S_int4b64 0
#define TL_Q8S_kq4 0
#define TL_Q8S_q8_0 1
#define TL_Q8S_int8b0 0

// One stage of the tiles, in 32-bit words: wq [8][TR] code words (k-major, row fastest), wd [TR], wm [TR],
// then xq [8][TT], xd [TT], xs [TT]; the ownership of rows and tokens is gemm.cl's (item (lr, lt) holds rows
// 4 (lr + WR i) + c and tokens 4 (lt + WT j) + c), so an item's 4 rows or tokens at one word are one uint4.
#define TL_Q8_TILE_WORDS (10 * (TL_GEMM_TR + TL_GEMM_TT))
// The uint4 of the x tile's codes each item loads: TT tokens x 2 uint4 over the items; and its d or s.
#define TL_Q8_XF ((2 * TL_GEMM_TT + TL_GEMM_ITEMS - 1) / TL_GEMM_ITEMS)

typedef struct {
  uint4 q[TL_Q8_XF];
  float ds[TL_Q8_XF];
} tl_q8x;

// Block b of tokens t0 .. t0 + TT - 1 of the rounded input into registers. Item lid's uint4 i is
// f = lid + i ITEMS: token f % TT, half f / TT of the code words; the same f < 2 TT reads d (f < TT) or s.
void tl_q8_fetch_x(__global const uint* xq, int nb, int n_tok, int t0, int b, tl_q8x* xr, int lid) {
  for (int i = 0; i < TL_Q8_XF; ++i) {
    const int f = min(lid + i * TL_GEMM_ITEMS, 2 * TL_GEMM_TT - 1);
    const int t = f % TL_GEMM_TT, h = f / TL_GEMM_TT;
    __global const uint* row = xq + (ulong)min(t0 + t, n_tok - 1) * TL_Q8_ROW(nb);
    xr->q[i] = ((__global const uint4*)row)[2 * b + h];  // aligned: one 16-byte load
    xr->ds[i] = as_float(row[(8 + h) * nb + b]);
  }
}

void tl_q8_put_x(__local uint* xl, const tl_q8x* xr, int lid) {
  for (int i = 0; i < TL_Q8_XF; ++i) {
    const int f = lid + i * TL_GEMM_ITEMS;
    if (f >= 2 * TL_GEMM_TT) break;
    const int t = f % TL_GEMM_TT, h = f / TL_GEMM_TT;
    xl[(4 * h + 0) * TL_GEMM_TT + t] = xr->q[i].x;
    xl[(4 * h + 1) * TL_GEMM_TT + t] = xr->q[i].y;
    xl[(4 * h + 2) * TL_GEMM_TT + t] = xr->q[i].z;
    xl[(4 * h + 3) * TL_GEMM_TT + t] = xr->q[i].w;
    xl[(8 + h) * TL_GEMM_TT + t] = as_uint(xr->ds[i]);  // xd, then xs
  }
}

// The block's products: acc[j][i] (component c) += dw dx (sum c q) + m s for row 4 (lr + WR i) + c and
// token of j (4 (lt + WT (j / 4)) + j % 4), the integer sums over the block's 8 code words first.
void tl_q8_accumulate(__local const uint* st, float4 acc[TL_GEMM_TM][TL_GEMM_RM / 4], int lr, int lt,
                      int sgn) {
  __local const uint4* wq = (__local const uint4*)st;
  __local const float4* wd = (__local const float4*)(st + 8 * TL_GEMM_TR);
  __local const float4* wm = wd + TL_GEMM_TR / 4;
  __local const uint4* xq = (__local const uint4*)(st + 10 * TL_GEMM_TR);
  __local const float4* xd = (__local const float4*)(st + 10 * TL_GEMM_TR + 8 * TL_GEMM_TT);
  __local const float4* xs = xd + TL_GEMM_TT / 4;
  int4 is[TL_GEMM_TM][TL_GEMM_RM / 4];
  for (int j = 0; j < TL_GEMM_TM; ++j)
    for (int i = 0; i < TL_GEMM_RM / 4; ++i) is[j][i] = (int4)(0);
  for (int k = 0; k < 8; ++k) {
    uint4 wv[TL_GEMM_RM / 4];
    for (int i = 0; i < TL_GEMM_RM / 4; ++i) wv[i] = wq[k * (TL_GEMM_TR / 4) + lr + TL_GEMM_WR * i];
    for (int j = 0; j < TL_GEMM_TM / 4; ++j) {
      const uint4 xv = xq[k * (TL_GEMM_TT / 4) + lt + TL_GEMM_WT * j];
      for (int c = 0; c < 4; ++c) {
        const uint xc = c == 0 ? xv.x : c == 1 ? xv.y : c == 2 ? xv.z : xv.w;
        for (int i = 0; i < TL_GEMM_RM / 4; ++i) {
          int4 s = is[4 * j + c][i];
          if (sgn) {
            s = (int4)(tl_dot_ss(xc, wv[i].x, s.x), tl_dot_ss(xc, wv[i].y, s.y), tl_dot_ss(xc, wv[i].z, s.z),
                       tl_dot_ss(xc, wv[i].w, s.w));
          } else {
            s = (int4)(tl_dot_su(xc, wv[i].x, s.x), tl_dot_su(xc, wv[i].y, s.y), tl_dot_su(xc, wv[i].z, s.z),
                       tl_dot_su(xc, wv[i].w, s.w));
          }
          is[4 * j + c][i] = s;
        }
      }
    }
  }
  for (int j = 0; j < TL_GEMM_TM / 4; ++j) {
    const float4 dx = xd[lt + TL_GEMM_WT * j], sx = xs[lt + TL_GEMM_WT * j];
    for (int c = 0; c < 4; ++c) {
      const float dxc = c == 0 ? dx.x : c == 1 ? dx.y : c == 2 ? dx.z : dx.w;
      const float sxc = c == 0 ? sx.x : c == 1 ? sx.y : c == 2 ? sx.z : sx.w;
      for (int i = 0; i < TL_GEMM_RM / 4; ++i) {
        const int n = lr + TL_GEMM_WR * i;
        const float4 t = wd[n] * (dxc * convert_float4(is[4 * j + c][i]));
        acc[4 * j + c][i] += t + wm[n] * sxc;
      }
    }
  }
}

// One kernel NAME over the format FMT: gemm.cl's groups, tiles, split K and tails, with the rounded input
// xq ([n_tok][TL_Q8_ROW(nb)] words, quantize_q8) in place of x and one stage of TL_Q8_TILE_WORDS words of local
// memory (tiles). n_in is a multiple of 32. The local argument is declared uint4 because tl_q8_accumulate
// reads it as uint4 and float4: a local argument is aligned only as its pointee type, and NVIDIA's OpenCL
// placed a `__local uint*` one off a 16-byte boundary, where every 16-byte load faulted (CL_OUT_OF_RESOURCES
// at the next read; H100, 2026-12-06).
#define TL_GEMM_Q8_KERNEL(NAME, FMT)                                                                          \
  __kernel __attribute__((reqd_work_group_size(TL_GEMM_WR, TL_GEMM_WT, 1))) void NAME(                       \
      __global const uchar* w, ulong row_bytes, int n_in, int n_out, int n_tok, __global const uint* xq,      \
      __global float* y, __local uint4* tiles4, int split_blocks) {                                           \
    __local uint* tiles = (__local uint*)tiles4;                                                               \
    const int lr = get_local_id(0), lt = get_local_id(1), lid = lt * TL_GEMM_WR + lr;                          \
    const int r0 = get_group_id(0) * TL_GEMM_TR, t0 = get_group_id(1) * TL_GEMM_TT;                            \
    const int z = get_group_id(2), nb = n_in / 32;                                                             \
    y += (ulong)z * n_tok * n_out;                                                                             \
    float4 acc[TL_GEMM_TM][TL_GEMM_RM / 4];                                                                    \
    for (int j = 0; j < TL_GEMM_TM; ++j)                                                                       \
      for (int i = 0; i < TL_GEMM_RM / 4; ++i) acc[j][i] = (float4)(0.0f);                                    \
    const int b0 = z * split_blocks, b1 = min(nb, b0 + split_blocks);                                         \
    const bool own = lid < TL_GEMM_TR; /* this item reads row r0 + lid */                                     \
    __global const uchar* row = w + (ulong)min(r0 + min(lid, TL_GEMM_TR - 1), n_out - 1) * row_bytes;         \
    tl_raw32 raw;                                                                                              \
    tl_q8x xr;                                                                                                 \
    if (own) tl_fetch_##FMT(row, b0, n_in, &raw);                                                              \
    tl_q8_fetch_x(xq, nb, n_tok, t0, b0, &xr, lid);                                                            \
    for (int b = b0; b < b1; ++b) {                                                                            \
      if (own) {                                                                                               \
        uint c[8];                                                                                             \
        const float2 dm = tl_q8w_##FMT(&raw, c);                                                               \
        for (int k = 0; k < 8; ++k) tiles[k * TL_GEMM_TR + lid] = c[k];                                        \
        tiles[8 * TL_GEMM_TR + lid] = as_uint(dm.x);                                                           \
        tiles[9 * TL_GEMM_TR + lid] = as_uint(dm.y);                                                           \
      }                                                                                                        \
      tl_q8_put_x(tiles + 10 * TL_GEMM_TR, &xr, lid);                                                          \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
      if (TL_GEMM_AHEAD && b + 1 < b1) {                                                                       \
        if (own) tl_fetch_##FMT(row, b + 1, n_in, &raw);                                                       \
        tl_q8_fetch_x(xq, nb, n_tok, t0, b + 1, &xr, lid);                                                     \
      }                                                                                                        \
      tl_q8_accumulate(tiles, acc, lr, lt, TL_Q8S_##FMT);                                                      \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
      if (!TL_GEMM_AHEAD && b + 1 < b1) {                                                                      \
        if (own) tl_fetch_##FMT(row, b + 1, n_in, &raw);                                                       \
        tl_q8_fetch_x(xq, nb, n_tok, t0, b + 1, &xr, lid);                                                     \
      }                                                                                                        \
    }                                                                                                          \
    tl_gemm_store(y, n_out, n_tok, r0, t0, acc, lr, lt);                                                       \
  }

#endif
