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

// Block b of a row of nb blocks of the rounded input (TL_Q8_ROW's layout) from its 32 values f.
void tl_q8_round_block(const float* f, __global uint* row, int b, int nb) {
  float amax = 0.0f;
  for (int k = 0; k < 32; ++k) amax = fmax(amax, fabs(f[k]));
  const float d = tl_div127(amax);
  const float id = d != 0.0f ? tl_reciprocal(d) : 0.0f;
  int sum = 0;
  for (int k = 0; k < 8; ++k) {
    const int4 c = convert_int4(round(vload4(k, f) * id));  // half away from zero, as C's roundf
    sum += c.x + c.y + c.z + c.w;
    row[8 * b + k] = as_uint(convert_char4(c));
  }
  ((__global float*)row)[8 * nb + b] = d;
  ((__global float*)row)[9 * nb + b] = d * (float)sum;
}

// A producer's output rounded in its own launch (quants.cl's yq: the residual product and the gate/up
// kernel, decode's one token): each group hands its `rows` values v of rows r0.. in (atomic exchanges into
// xch[r], a slot that holds TL_NORM_EMPTY until its value arrives) and counts itself in count[block]; the
// group that completes a block of 32 takes the block's values back out (leaving the slots empty, waiting on
// one still empty: its writer has counted itself, so the value is on its way), rounds them as quantize_q8
// does into yq's row, and sets the count back to 0 for the next launch. The exchange of the norm's partials
// (quants.cl): nothing relies on the order of two atomics. n % 32 == 0 and rows divides 32. Every item calls
// it; scratch is __local float[max(L, 32)].
void tl_q8_hand_in(const float* v, int rows, int r0, int n, __global int* xch, __global int* count,
                   __global uint* yq, __local float* scratch) {
  const int lid = get_local_id(0), b = r0 / 32;
  __local int* flag = (__local int*)scratch;
  if (lid == 0) {
    for (int k = 0; k < rows; ++k) {
      const int bits = as_int(v[k]);
      atomic_xchg(xch + r0 + k, bits == TL_NORM_EMPTY ? as_int(NAN) : bits);
    }
    flag[0] = atomic_inc(count + b) == 32 / rows - 1;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int last = flag[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (last) {
    for (int i = lid; i < 32; i += get_local_size(0)) {
      int bits = atomic_xchg(xch + 32 * b + i, TL_NORM_EMPTY);
      while (bits == TL_NORM_EMPTY) bits = atomic_xchg(xch + 32 * b + i, TL_NORM_EMPTY);
      scratch[i] = as_float(bits);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
      float f[32];
      for (int k = 0; k < 32; ++k) f[k] = scratch[k];
      tl_q8_round_block(f, yq, b, n / 32);
      atomic_xchg(count + b, 0);  // for the next launch
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);  // before the caller reuses scratch
}

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


// Decode's products in integers (one token; matmul_q8.cl's matvec_q8_* and matvec_glu_q8_*): the kernels of
// quants.cl's TL_MATVEC_BLOCK32 and TL_MATVEC_GLU_BLOCK32 (groups of four rows, the norm, RoPE and KV
// epilogues) over x rounded as above (xq: one row of TL_Q8_ROW(nb) words), each block dotted as the GEMM
// dots it. The unit of work is a whole block: item i takes blocks i, i + L, ... (L the local size), each
// with its 16 or 32 code bytes of every row in one or two 16-byte loads, x's 8 code words in two, and the
// block's d and s; TL_MVQ_AHEAD blocks of each row are loaded before any is dotted, so that a row of 4096
// inputs over 64 items is one trip to memory. Per row the sums are the float path's in another order: a
// block's integer sum scaled once (dw dx sum c q + m s, the GEMM's formula), the blocks summed per item,
// then over the group (tl_group_sum4).
#define TL_MVQ_AHEAD 2
float tl_mvq_block(uint4 xa, uint4 xb, float dx, float sx, int sgn, float2 dm, const uint c[8]) {
  int s = 0;
  if (sgn) {
    s = tl_dot_ss(xa.x, c[0], s), s = tl_dot_ss(xa.y, c[1], s), s = tl_dot_ss(xa.z, c[2], s);
    s = tl_dot_ss(xa.w, c[3], s), s = tl_dot_ss(xb.x, c[4], s), s = tl_dot_ss(xb.y, c[5], s);
    s = tl_dot_ss(xb.z, c[6], s), s = tl_dot_ss(xb.w, c[7], s);
  } else {
    s = tl_dot_su(xa.x, c[0], s), s = tl_dot_su(xa.y, c[1], s), s = tl_dot_su(xa.z, c[2], s);
    s = tl_dot_su(xa.w, c[3], s), s = tl_dot_su(xb.x, c[4], s), s = tl_dot_su(xb.y, c[5], s);
    s = tl_dot_su(xb.z, c[6], s), s = tl_dot_su(xb.w, c[7], s);
  }
  return dm.x * (dx * (float)s) + dm.y * sx;
}
#define TL_MVQ_BLOCK(FMT, R, XA, XB, DX, SX, OUT) \
  {                                                \
    uint c_[8];                                    \
    const float2 dm_ = tl_q8w_##FMT(&(R), c_);     \
    OUT += tl_mvq_block(XA, XB, DX, SX, TL_Q8S_##FMT, dm_, c_); \
  }
#define TL_MVQ_UNITS(LO_, HI_, FMT, P0, P1, P2, P3)                                                                \
  {                                                                                                      \
    const int step = get_local_size(0);                                                                  \
    __global const float* xds = (__global const float*)(x + 8 * nb); /* [nb] d, then [nb] s */           \
    for (int b0 = get_local_id(0); b0 < nb; b0 += TL_MVQ_AHEAD * step) {                                  \
      tl_raw32 ra[TL_MVQ_AHEAD], rb[TL_MVQ_AHEAD], rc[TL_MVQ_AHEAD], rd[TL_MVQ_AHEAD];                   \
      uint4 xa[TL_MVQ_AHEAD], xb[TL_MVQ_AHEAD];                                                          \
      float dx[TL_MVQ_AHEAD], sx[TL_MVQ_AHEAD];                                                          \
      for (int i = 0; i < TL_MVQ_AHEAD; ++i) {                                                           \
        const int b = min(b0 + i * step, nb - 1);                                                        \
        tl_fetch_##FMT(P0, b, n_in, &ra[i]), tl_fetch_##FMT(P1, b, n_in, &rb[i]);                         \
        tl_fetch_##FMT(P2, b, n_in, &rc[i]), tl_fetch_##FMT(P3, b, n_in, &rd[i]);                         \
        xa[i] = ((__global const uint4*)x)[2 * b], xb[i] = ((__global const uint4*)x)[2 * b + 1];         \
        dx[i] = xds[b], sx[i] = xds[nb + b];                                                             \
      }                                                                                                  \
      for (int i = 0; i < TL_MVQ_AHEAD; ++i) {                                                           \
        if (b0 + i * step >= nb) break;                                                                  \
        TL_MVQ_BLOCK(FMT, ra[i], xa[i], xb[i], dx[i], sx[i], acc.x)                                      \
        TL_MVQ_BLOCK(FMT, rb[i], xa[i], xb[i], dx[i], sx[i], acc.y)                                      \
        TL_MVQ_BLOCK(FMT, rc[i], xa[i], xb[i], dx[i], sx[i], acc.z)                                      \
        TL_MVQ_BLOCK(FMT, rd[i], xa[i], xb[i], dx[i], sx[i], acc.w)                                      \
      }                                                                                                  \
    }                                                                                                    \
  }
#define TL_MATVEC_Q8(NAME, FMT) TL_MATVEC_KERNEL(NAME, uint, TL_MVQ_UNITS, 0, 0, FMT)
#define TL_MATVEC_GLU_Q8(NAME, FMT) TL_MATVEC_GLU_KERNEL(NAME, uint, TL_MVQ_UNITS, 0, 0, FMT)

#endif
