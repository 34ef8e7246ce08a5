// The matrix product of prefill, y[t][r] = sum_k W[r][k] x[t][k], as a tiled GEMM written once for every
// weight format; every program gets this file after common.cl and quants.cl.
// W: [n_out][row_bytes] in a device row format (quants.cl); x: [n_tok][n_in] floats; y: [n_tok][n_out]
// floats.
//
// A format FMT instantiates it with TL_MATMUL_BLOCK32(NAME, FMT) (the float formats F32 and F16 with
// TL_GEMM_KERNEL(NAME, FMT)): tl_fetch_FMT reads a block of 32 weights' bytes from a row and tl_decode_FMT
// forms its exact weights (the values the CPU forms; quants.cl, whose float fetchers also read the last,
// partial block of a row whose length is not a multiple of 32).
//
// The generated header sets TL_GEMM (1: this kernel; 0: the device's local memory or work-group size cannot
// hold the smallest tile, and TL_MATMUL_BLOCK32 is the row kernel of quants.cl) and the tile shape, chosen by
// the host from the capability struct (matmul.cpp, OpenclBackend::gemm_tiles_for):
//   TL_GEMM_RM x TL_GEMM_TM  outputs per work-item (rows x tokens; both multiples of 4): the register tile;
//   TL_GEMM_WR x TL_GEMM_WT  work-items per group (local size (WR, WT));
//   TL_GEMM_AHEAD            1: the next block is read before the current one's products (below);
//   TL_GEMM_STAGES           1, or 2: two copies of the tiles, one written while the other is read;
// so a group computes a tile of TR = RM * WR rows by TT = TM * WT tokens.
//
// The K loop walks the 32-weight blocks. Per block the group
//  1. stores the block of each of its TR rows, decoded by the row's item (one item per row, with the
//     format's decoder), into wl[32][TR], and the 32 inputs of each of its TT tokens into xl[32][TT] (local
//     memory, both k-major, so that a work-item's 4 adjacent rows or tokens at one k are one aligned float4);
//  2. after a barrier, every item accumulates its RM x TM outputs over the 32 k from local memory: per k,
//     RM / 4 + TM / 4 float4 loads for RM * TM multiply-adds;
//  3. waits at a second barrier before the tiles are overwritten.
// With two stages the tiles are held twice: block b + 1 goes into the other copy right after block b's
// products, so a block costs one barrier instead of two (the local memory twice).
// The next block's bytes and inputs are read into registers (the reads of step 1) either before step 2
// (TL_GEMM_AHEAD 1: their loads in flight while the group computes) or after step 3; the weights are formed
// from the bytes only in step 1, so no item waits for a load before its products. The host reads ahead
// on tiles of 128 rows, where it measured faster on an NVIDIA H200 (7B Q4_0 pp512 1589 -> 1648 t/s on
// 128 x 64 over 256 items; 1784 on 128 x 64 over 128 items), and not on smaller ones (64 x 64: 1258 -> 1054),
// all measured while the weights were still formed right after their loads (not yet timed since).
// Ownership is interleaved by float4: item (lr, lt) holds rows 4 (lr + WR i) + c (i < RM / 4, c < 4) and
// tokens 4 (lt + WT j) + c (j < TM / 4). So the WR items of a row of the group read WR consecutive float4 of
// wl (no bank conflicts) and write consecutive float4 of y (coalesced); the items that share lr read the same
// float4 (a broadcast). The tile fills store k-major with the row or token index fastest, so adjacent items
// store to adjacent words (no bank conflicts either).
//
// Split K: group (., ., z) takes blocks [z split_blocks, (z + 1) split_blocks) of the rows only and writes its
// sums to slice z of y, [n_splits][n_tok][n_out]; gemm_split_sum (gemm_split.cl) adds the slices in z order.
// The host splits a product whose tiles alone would leave compute units idle (a short prompt, a narrow
// matrix: matmul.cpp); with split_blocks >= the row's blocks there is one slice, y itself.
//
// Tails: rows past n_out read the last row and tokens past n_tok the last token (no out-of-bounds reads);
// their outputs are not written. Elements past n_in (float formats only) are 0 in both tiles, adding exact
// zeros. Every output is a sum of its n_in products w x in k order (mad: fused where the device fuses), or of
// its slices' such sums in slice order, so the result is within n u sum |w x| of the exact sum, as the CPU's
// is.
#if TL_GEMM

#define TL_GEMM_TR (TL_GEMM_RM * TL_GEMM_WR)
#define TL_GEMM_TT (TL_GEMM_TM * TL_GEMM_WT)
#define TL_GEMM_ITEMS (TL_GEMM_WR * TL_GEMM_WT)

// Every candidate tile has an item per row (TR <= items): item r < TR decodes row r's blocks.
#if TL_GEMM_TR > TL_GEMM_ITEMS
#error "the GEMM tile needs an item per row"
#endif
// The float4 of the x tile each item loads: the tile's 8 TT float4 over the group's items.
#define TL_GEMM_XF ((8 * TL_GEMM_TT + TL_GEMM_ITEMS - 1) / TL_GEMM_ITEMS)
// The float4 of one stage of the tiles (wl then xl).
#define TL_GEMM_STAGE_F4 (8 * (TL_GEMM_TR + TL_GEMM_TT))
#if TL_GEMM_STAGES != 1 && TL_GEMM_STAGES != 2
#error "the GEMM tiles come in one or two stages"
#endif

// Inputs k0 .. k0 + 31 of tokens t0 .. t0 + TT - 1 into registers: item lid's float4 i is f = lid + i
// ITEMS, the float4 q = f / TT of token t = f % TT (tl_gemm_put_x stores them so that adjacent items store
// adjacent words of a row of xl).
void tl_gemm_fetch_x(__global const float* x, int n_in, int n_tok, int t0, int k0, float4 xr[TL_GEMM_XF],
                     int lid) {
  for (int i = 0; i < TL_GEMM_XF; ++i) {
    const int f = min(lid + i * TL_GEMM_ITEMS, 8 * TL_GEMM_TT - 1);
    const int t = f % TL_GEMM_TT, k = 4 * (f / TL_GEMM_TT);
    __global const float* xt = x + (ulong)min(t0 + t, n_tok - 1) * n_in + k0 + k;
    if (k0 + k + 4 <= n_in) {
      xr[i] = vload4(0, xt);
    } else {  // the last, partial block of a float row
      xr[i] = (float4)(k0 + k < n_in ? xt[0] : 0.0f, k0 + k + 1 < n_in ? xt[1] : 0.0f,
                       k0 + k + 2 < n_in ? xt[2] : 0.0f, 0.0f);
    }
  }
}

// The fetched float4s into xl[32][TT] (k-major).
void tl_gemm_put_x(__local float* xl, const float4 xr[TL_GEMM_XF], int lid) {
  for (int i = 0; i < TL_GEMM_XF; ++i) {
    const int f = lid + i * TL_GEMM_ITEMS;
    if (f >= 8 * TL_GEMM_TT) break;
    const int t = f % TL_GEMM_TT, k = 4 * (f / TL_GEMM_TT);
    xl[(k + 0) * TL_GEMM_TT + t] = xr[i].x;
    xl[(k + 1) * TL_GEMM_TT + t] = xr[i].y;
    xl[(k + 2) * TL_GEMM_TT + t] = xr[i].z;
    xl[(k + 3) * TL_GEMM_TT + t] = xr[i].w;
  }
}

// acc[j][i] (component c) += sum over the 32 k of the tile of w[row 4 (lr + WR i) + c][k] * x[token of j][k],
// token of j: 4 (lt + WT (j / 4)) + j % 4.
void tl_gemm_accumulate(__local const float4* wl, __local const float4* xl,
                        float4 acc[TL_GEMM_TM][TL_GEMM_RM / 4], int lr, int lt) {
  for (int k = 0; k < 32; ++k) {
    float4 wv[TL_GEMM_RM / 4];
    for (int i = 0; i < TL_GEMM_RM / 4; ++i) wv[i] = wl[k * (TL_GEMM_TR / 4) + lr + TL_GEMM_WR * i];
    for (int j = 0; j < TL_GEMM_TM / 4; ++j) {
      const float4 xv = xl[k * (TL_GEMM_TT / 4) + lt + TL_GEMM_WT * j];
      for (int i = 0; i < TL_GEMM_RM / 4; ++i) {
        acc[4 * j + 0][i] = mad(wv[i], (float4)(xv.x), acc[4 * j + 0][i]);
        acc[4 * j + 1][i] = mad(wv[i], (float4)(xv.y), acc[4 * j + 1][i]);
        acc[4 * j + 2][i] = mad(wv[i], (float4)(xv.z), acc[4 * j + 2][i]);
        acc[4 * j + 3][i] = mad(wv[i], (float4)(xv.w), acc[4 * j + 3][i]);
      }
    }
  }
}

// Writes the item's outputs that lie inside [n_tok][n_out]: a float4 of 4 rows where all 4 exist.
void tl_gemm_store(__global float* y, int n_out, int n_tok, int r0, int t0,
                   float4 acc[TL_GEMM_TM][TL_GEMM_RM / 4], int lr, int lt) {
  for (int j = 0; j < TL_GEMM_TM; ++j) {
    const int t = t0 + 4 * (lt + TL_GEMM_WT * (j / 4)) + j % 4;
    if (t >= n_tok) continue;
    for (int i = 0; i < TL_GEMM_RM / 4; ++i) {
      const int r = r0 + 4 * (lr + TL_GEMM_WR * i);
      __global float* yr = y + (ulong)t * n_out + r;
      const float4 v = acc[j][i];
      if (r + 4 <= n_out) {
        vstore4(v, 0, yr);
      } else {
        if (r < n_out) yr[0] = v.x;
        if (r + 1 < n_out) yr[1] = v.y;
        if (r + 2 < n_out) yr[2] = v.z;
      }
    }
  }
}

// One kernel NAME over the format FMT's block fetcher and decoder. One group per (TR rows, TT tokens) tile
// and K slice: global size (ceil(n_out / TR) WR, ceil(n_tok / TT) WT, n_splits), local size (WR, WT, 1).
// tiles: __local float4[STAGES][8 (TR + TT)] (per stage wl then xl, [32][TR] and [32][TT] floats).
#define TL_GEMM_KERNEL(NAME, FMT)                                                                        \
  __kernel __attribute__((reqd_work_group_size(TL_GEMM_WR, TL_GEMM_WT, 1))) void NAME(                  \
      __global const uchar* w, ulong row_bytes, int n_in, int n_out, int n_tok, __global const float* x, \
      __global float* y, __local float4* tiles, int split_blocks) {                                      \
    const int lr = get_local_id(0), lt = get_local_id(1), lid = lt * TL_GEMM_WR + lr;                     \
    const int r0 = get_group_id(0) * TL_GEMM_TR, t0 = get_group_id(1) * TL_GEMM_TT;                       \
    const int z = get_group_id(2);                                                                        \
    y += (ulong)z * n_tok * n_out;                                                                        \
    float4 acc[TL_GEMM_TM][TL_GEMM_RM / 4];                                                               \
    for (int j = 0; j < TL_GEMM_TM; ++j)                                                                  \
      for (int i = 0; i < TL_GEMM_RM / 4; ++i) acc[j][i] = (float4)(0.0f);                               \
    const int nbt = (n_in + 31) / 32;                                                                     \
    const int b0 = z * split_blocks, b1 = min(nbt, b0 + split_blocks); /* this slice's blocks */          \
    const bool own = lid < TL_GEMM_TR; /* this item decodes row r0 + lid */                              \
    __global const uchar* row = w + (ulong)min(r0 + min(lid, TL_GEMM_TR - 1), n_out - 1) * row_bytes;    \
    /* With TL_GEMM_AHEAD (and always with two stages) block b + 1's bytes and inputs are read into */    \
    /* registers before block b's products, their loads in flight while the group computes; else after. */ \
    tl_raw32 raw;                                                                                         \
    float4 xr[TL_GEMM_XF];                                                                                \
    if (own) tl_fetch_##FMT(row, b0, n_in, &raw);                                                         \
    tl_gemm_fetch_x(x, n_in, n_tok, t0, 32 * b0, xr, lid);                                                \
    for (int b = b0; b < b1; ++b) {                                                                       \
      __local float4* st = tiles + ((b - b0) % TL_GEMM_STAGES) * TL_GEMM_STAGE_F4;                        \
      if (TL_GEMM_STAGES == 1 || b == b0) {                                                               \
        TL_GEMM_PUT(FMT, st)                                                                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                     \
      }                                                                                                   \
      if ((TL_GEMM_AHEAD || TL_GEMM_STAGES == 2) && b + 1 < b1) {                                         \
        if (own) tl_fetch_##FMT(row, b + 1, n_in, &raw);                                                  \
        tl_gemm_fetch_x(x, n_in, n_tok, t0, 32 * (b + 1), xr, lid);                                       \
      }                                                                                                   \
      tl_gemm_accumulate(st, st + 8 * TL_GEMM_TR, acc, lr, lt);                                           \
      /* Two stages: block b + 1 into the other one, which every item finished reading before the last */ \
      /* barrier; one barrier a block. */                                                                 \
      if (TL_GEMM_STAGES == 2 && b + 1 < b1)                                                              \
        TL_GEMM_PUT(FMT, tiles + ((b + 1 - b0) % 2) * TL_GEMM_STAGE_F4)                                   \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                       \
      if (TL_GEMM_STAGES == 1 && !TL_GEMM_AHEAD && b + 1 < b1) {                                          \
        if (own) tl_fetch_##FMT(row, b + 1, n_in, &raw);                                                  \
        tl_gemm_fetch_x(x, n_in, n_tok, t0, 32 * (b + 1), xr, lid);                                       \
      }                                                                                                   \
    }                                                                                                     \
    tl_gemm_store(y, n_out, n_tok, r0, t0, acc, lr, lt);                                                  \
  }

// The read block into one stage of the tiles: the item's row's 32 weights, formed now (own: it decodes
// one), into wl[32][TR], its fetched inputs into xl[32][TT].
#define TL_GEMM_PUT(FMT, STAGE)                                        \
  {                                                                    \
    __local float* wl_ = (__local float*)(STAGE);                      \
    if (own) {                                                         \
      float wb_[32];                                                   \
      tl_decode_##FMT(&raw, wb_);                                      \
      for (int j = 0; j < 32; ++j) wl_[j * TL_GEMM_TR + lid] = wb_[j]; \
    }                                                                  \
    tl_gemm_put_x(wl_ + 32 * TL_GEMM_TR, xr, lid);                     \
  }

#define TL_MATMUL_BLOCK32(NAME, FMT) TL_GEMM_KERNEL(NAME, FMT)

#else

// No tile fits the device: the row kernel of quants.cl (one group per output row and TL_MM_TILE tokens).
#define TL_MATMUL_BLOCK32(NAME, FMT) TL_MATMUL_ROWS_BLOCK32(NAME, FMT)

#endif
