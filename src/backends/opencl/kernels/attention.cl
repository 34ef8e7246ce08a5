// Causal attention over the device FB-KV cache with block-wise online softmax, the CPU reference's
// algorithm (cpu/attention.cpp) taken a pass of keys at a time: per pass of up to pass_blocks blocks of
// TL_ATTN_BLOCK = 32 keys
//   m' = max(m, max_j s_j);  acc = acc e^(m - m') + sum_j e^(s_j - m') v_j;  l = l e^(m - m') + sum_j e^(s_j - m')
// and out = acc * (1 / l) at the end. No scratch proportional to the context.
//
// One work-group of L = 32 * split items per (token t, head h), split in {1, 2, 4, 8} (the host's choice:
// head_dim % (4 split) == 0 and L within the kernel's work-group limit). A pass is three steps, each with
// all of its loads independent of each other, so a pass costs two trips to memory however many blocks it
// holds (one block a pass cost two trips a block, which is most of decode's attention time at short
// contexts: a handful of work-groups, each waiting on its loads):
//  - Scores: item i takes key i / split of every block of the pass, over its contiguous 1/split of head_dim
//    (float4 steps), q read from global memory beside the keys (no wait for a copy into local memory); the
//    split partials meet in scratch, the pass's scores in lw.
//  - Weights: every item reads the scores for the pass's maximum; the weights go to scratch.
//  - Values: item i owns column i % cols of the accumulator (4 elements; 1 where head_dim % 4 != 0) over
//    the keys k with k % ks == i / cols (ks = L / cols key slices, at least 1; items beyond ks * cols idle,
//    columns beyond L loop), so a key's V row is read by adjacent items at adjacent addresses, 8 keys' loads
//    in flight at a time; the slices' sums meet in vpart.
// q: [n_tok][n_head][head_dim]; out: same; pos: [n_tok] (checked by the host).
// cache: the buffer holding this layer, [layer][K|V][pos < n_ctx][n_head_kv][head_dim] in the cache type
// (TL_KV_F16: half, else float); layer_off: element offset of this layer's K plane.
// Long contexts split the keys over work-groups (flash decoding): group (r, c) of a grid of n_chunks per row
// takes chunk_blocks blocks of the row's keys and writes its unnormalized sums and (m, l) to `chunks`, which
// attention_merge combines; with one chunk the group writes `out` itself. Decode has one row per head, so
// without the split a long context runs as a serial walk in a few work-groups.
// Local memory (floats): lacc [head_dim]; lw [pass_blocks * 32]; scratch [pass_blocks * L]; vpart [4 L].
// pass_blocks <= TL_ATTN_PASS (the host's choice, from the local memory).
// yq: null, or (head_dim % 32 == 0, integer products built) the output also rounded as quantize_q8 rounds
// it (with one chunk here, else by attention_merge) into yq's rows, [n_tok][TL_Q8_ROW(n_head * head_dim /
// 32)] words (gemm_q8.cl): a head's output is whole blocks of 32, so its group rounds them from the values
// it writes and decode's attention output product needs no rounding launch of its own.
#define TL_ATTN_BLOCK 32
#define TL_ATTN_PASS 4
// float4 steps of q and of each key an item loads before the scores' products: 2 (8 elements). 4 kept 147
// registers an item on an H100's OpenCL, so that one group of 256 items filled an SM and a long context's
// 256 groups ran in two waves (7B at depth 1024 -4.8%); with 2, 96 (docs/PERF.md 2026-12-07 10:31).
#define TL_ATTN_HOIST 2
#if TL_KV_F16
#define TL_KV_T half
#define TL_KV_GET(p, i) vload_half((i), (p))
#define TL_KV_GET4(p, i) vload_half4(0, (p) + (i))
#else
#define TL_KV_T float
#define TL_KV_GET(p, i) ((p)[i])
#define TL_KV_GET4(p, i) vload4(0, (p) + (i))
#endif

// Sum over keys k = s, s + ks, ... below nk of wt[k] times elements 0 .. vw - 1 of V row k at vp (rows
// kv_dim apart; vw 4, or 1 with only .x used), 8 rows' loads issued before their products.
float4 tl_attn_values(__global const TL_KV_T* vp, int vw, int kv_dim, int s, int ks, int nk,
                      __local const float* wt) {
  float4 a = (float4)(0.0f);
  for (int k0 = s; k0 < nk; k0 += 8 * ks) {
    float4 v[8];
    for (int u = 0; u < 8; ++u) {
      const int k = k0 + u * ks;
      __global const TL_KV_T* p = vp + (ulong)k * kv_dim;
      v[u] = k >= nk ? (float4)(0.0f) : vw == 4 ? TL_KV_GET4(p, 0) : (float4)(TL_KV_GET(p, 0), 0.0f, 0.0f, 0.0f);
    }
    for (int u = 0; u < 8; ++u) {
      const int k = k0 + u * ks;
      if (k < nk) a += wt[k] * v[u];
    }
  }
  return a;
}

__kernel void attention(__global const float* q, __global const TL_KV_T* cache, ulong layer_off, int n_ctx,
                        int kv_dim, __global const int* pos, int n_head, int group, int head_dim, float scale,
                        int window, int split, int chunk_blocks, int pass_blocks, __global float* out,
                        __global float* chunks, __local float* lacc, __local float* lw, __local float* scratch,
                        __local float* vpart, __global uint* yq) {
  const int r = get_group_id(0);  // t * n_head + h
  const int c = get_group_id(1), n_chunks = get_num_groups(1);
  const int t = r / n_head, h = r % n_head, kvh = h / group;
  const int lid = get_local_id(0), ls = get_local_size(0);
  const int key = lid / split, part = lid % split, chunk = head_dim / split;
  // Values in columns of vw = 4 elements (1 where head_dim % 4 != 0): cols columns, ks key slices.
  const int vw = head_dim % 4 == 0 ? 4 : 1, cols = head_dim / vw;
  const int ks = max(1, ls / cols), vc = lid % cols, vs = lid / cols;
  __global const float* qp = q + (ulong)r * head_dim + part * chunk;
  for (int i = lid; i < head_dim; i += ls) lacc[i] = 0.0f;
  __global const TL_KV_T* kbase = cache + layer_off + (ulong)kvh * head_dim;
  __global const TL_KV_T* vbase = kbase + (ulong)n_ctx * kv_dim;
  // This group's chunk of the token's keys: blocks [c, c + 1) * chunk_blocks of its range [first, end],
  // possibly none (tokens of a batch reach different lengths).
  const int end = pos[t];
  const int first = window > 0 ? max(0, end - window + 1) : 0;
  const int j_begin = first + c * chunk_blocks * TL_ATTN_BLOCK;
  const int last = min(end, j_begin + chunk_blocks * TL_ATTN_BLOCK - 1);
  const int pass_keys = pass_blocks * TL_ATTN_BLOCK;
  float m = -INFINITY, l = 0.0f;
  for (int j0 = j_begin; j0 <= last; j0 += pass_keys) {
    const int nk = min(pass_keys, last + 1 - j0);
    // Scores: this item's keys key + 32 b, b < pass_blocks, 4 TL_ATTN_HOIST elements of q and of each key at
    // a time with every load issued before the first product (a loop with products between its loads waits
    // on memory once a step).
    float d[TL_ATTN_PASS];
    for (int b = 0; b < TL_ATTN_PASS; ++b) d[b] = 0.0f;
    __global const TL_KV_T* krow = kbase + (ulong)(j0 + key) * kv_dim + part * chunk;
    for (int i = 0; i + 4 <= chunk; i += 4 * TL_ATTN_HOIST) {
      float4 qv[TL_ATTN_HOIST], kv[TL_ATTN_PASS][TL_ATTN_HOIST];
      for (int u = 0; u < TL_ATTN_HOIST; ++u) {
        const int e = i + 4 * u;
        const bool in = e + 4 <= chunk;
        qv[u] = in ? vload4(0, qp + e) : (float4)(0.0f);
        for (int b = 0; b < TL_ATTN_PASS; ++b) {
          const bool live = in && b < pass_blocks && key + b * TL_ATTN_BLOCK < nk;
          kv[b][u] = live ? TL_KV_GET4(krow + (ulong)b * TL_ATTN_BLOCK * kv_dim, e) : (float4)(0.0f);
        }
      }
      for (int u = 0; u < TL_ATTN_HOIST; ++u) {
        for (int b = 0; b < TL_ATTN_PASS; ++b) d[b] += dot(qv[u], kv[b][u]);
      }
    }
    for (int i = chunk & ~3; i < chunk; ++i) {
      const float qi = qp[i];
      for (int b = 0; b < TL_ATTN_PASS; ++b) {
        if (b < pass_blocks && key + b * TL_ATTN_BLOCK < nk)
          d[b] += qi * TL_KV_GET(krow + (ulong)b * TL_ATTN_BLOCK * kv_dim, i);
      }
    }
    for (int b = 0; b < TL_ATTN_PASS; ++b) {
      if (b < pass_blocks) scratch[b * ls + lid] = d[b];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = lid; k < nk; k += ls) {
      __local const float* sp = scratch + (k / TL_ATTN_BLOCK) * ls + (k % TL_ATTN_BLOCK) * split;
      float tot = 0.0f;
      for (int p = 0; p < split; ++p) tot += sp[p];
      lw[k] = tot * scale;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // Weights: every item takes the pass's maximum from local memory (no tree reductions: the kernel is
    // latency-bound at decode's short contexts, 32 work-groups for 32 heads); the partials are spent.
    float m_new = m;
    for (int k = 0; k < nk; ++k) m_new = fmax(m_new, lw[k]);
    const float corr = exp(m - m_new);  // 0 on the first pass (m = -inf)
    for (int k = lid; k < nk; k += ls) scratch[k] = exp(lw[k] - m_new);
    barrier(CLK_LOCAL_MEM_FENCE);
    float wsum = 0.0f;
    for (int k = 0; k < nk; ++k) wsum += scratch[k];
    l = l * corr + wsum;
    // Values: with at least as many items as columns, item i sums column i % cols over the keys of slice
    // i / cols (keys k = slice + ks j), the slices' sums meeting in vpart; else items walk the columns, each
    // over every key. Adjacent items read adjacent columns of a key's V row.
    __global const TL_KV_T* vrow = vbase + (ulong)j0 * kv_dim;
    if (ls >= cols) {
      if (vs < ks) {
        const float4 a = tl_attn_values(vrow + vw * vc, vw, kv_dim, vs, ks, nk, scratch);
        __local float* vo = vpart + vs * head_dim + vw * vc;
        if (vw == 4)
          vstore4(a, 0, vo);
        else
          vo[0] = a.x;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int e = lid; e < head_dim; e += ls) {
        float a = lacc[e] * corr;
        for (int s = 0; s < ks; ++s) a += vpart[s * head_dim + e];
        lacc[e] = a;
      }
    } else {
      for (int c = lid; c < cols; c += ls) {
        const float4 a = tl_attn_values(vrow + vw * c, vw, kv_dim, 0, 1, nk, scratch);
        __local float* lo = lacc + vw * c;
        if (vw == 4)
          vstore4(vload4(0, lo) * corr + a, 0, lo);
        else
          lo[0] = lo[0] * corr + a.x;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // scratch, lw and vpart are rewritten by the next pass; lacc read after
    m = m_new;
  }
  if (n_chunks == 1) {
    const float inv = 1.0f / l;
    __global float* o = out + (ulong)r * head_dim;
    for (int i = lid; i < head_dim; i += ls) o[i] = lacc[i] * inv;
#if TL_GEMM && TL_Q8_GEMM
    if (yq) {
      const int hb = head_dim / 32, nb = n_head * hb;
      for (int b = lid; b < hb; b += ls) {
        float f[32];
        for (int k = 0; k < 32; ++k) f[k] = lacc[32 * b + k] * inv;  // the values o holds
        tl_q8_round_block(f, yq + (ulong)t * TL_Q8_ROW(nb), h * hb + b, nb);
      }
    }
#endif
    return;
  }
  // Split keys: the chunk's unnormalized sums and its (m, l) for attention_merge.
  const ulong pr = (ulong)r * n_chunks + c;
  __global float* o = chunks + pr * (head_dim + 2);
  for (int i = lid; i < head_dim; i += ls) o[i] = lacc[i];
  if (lid == 0) {
    o[head_dim] = m;
    o[head_dim + 1] = l;
  }
}

// The chunks of a split attention into the output: with M the largest chunk maximum,
// out = sum_c acc_c e^(m_c - M) / sum_c l_c e^(m_c - M) (an empty chunk has m = -inf, weight 0; chunk 0 is
// never empty). chunks: [n_rows][n_chunks][head_dim + 2] (acc, then m, l); out: [n_rows][head_dim].
// Global (head_dim rounded up, n_rows); tail items return. yq: null, or (head_dim % 32 == 0, work-groups of
// exactly (head_dim, 1) items, integer products built) the output also rounded as attention's own yq: each
// group's row through lo [head_dim] floats.
__kernel void attention_merge(__global const float* chunks, int n_chunks, int head_dim, int n_rows,
                              __global float* out, int n_head, __global uint* yq, __local float* lo) {
  const int i = get_global_id(0), r = get_global_id(1);
  if (i >= head_dim || r >= n_rows) return;
  __global const float* p = chunks + (ulong)r * n_chunks * (head_dim + 2);
  float mx = -INFINITY;
  for (int c = 0; c < n_chunks; ++c) mx = fmax(mx, p[c * (head_dim + 2) + head_dim]);
  float acc = 0.0f, l = 0.0f;
  for (int c = 0; c < n_chunks; ++c) {
    __global const float* pc = p + c * (head_dim + 2);
    const float w = exp(pc[head_dim] - mx);
    acc += pc[i] * w;
    l += pc[head_dim + 1] * w;
  }
  const float v = acc / l;
  out[(ulong)r * head_dim + i] = v;
#if TL_GEMM && TL_Q8_GEMM
  if (yq) {
    lo[i] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int hb = head_dim / 32, nb = n_head * hb;
    if (i < hb) {
      float f[32];
      for (int k = 0; k < 32; ++k) f[k] = lo[32 * i + k];
      tl_q8_round_block(f, yq + (ulong)(r / n_head) * TL_Q8_ROW(nb), (r % n_head) * hb + i, nb);
    }
  }
#endif
}

// ---- prompts: attention_tiled, TL_ATTN_TQ consecutive tokens of one head a work-group of TL_ATTN_WG items,
// so that each K and V row is read once per TL_ATTN_TQ queries (attention reads it once per query). Per
// chunk of TL_ATTN_KC keys, from the tile's lowest first key to its highest position: the chunk's K and V
// rows into local memory; the TQ x KC scores (item e takes query e / KC, key e % KC, and more of them by
// steps of WG); item i < TQ updates query i's running max and sum over the keys that query sees (causal,
// window) and turns its scores into weights; then every item updates its accumulators, elements
// lid, lid + WG, ... of the tile's [TQ][head_dim] output. The running max starts at -FLT_MAX rather than
// -inf, so no infinity enters the arithmetic (a query with no key yet keeps weight 0 and correction 1).
// Host conditions: head_dim % 8 == 0 and <= 128 (TQ * head_dim a multiple of WG, at most TL_ATTN_ACC
// accumulators an item) and the local memory below.
// q, out: [n_tok][n_head][head_dim]; pos: [n_tok]. Local memory (floats): lq [TQ][head_dim + 4] (scaled q),
// lk [KC][head_dim + 4] (rows padded by 4 so that neighbouring items' float4 reads of neighbouring rows fall
// in different banks), lv [KC][head_dim], lp [TQ][KC] (scores, then weights), lc [TQ] (corrections, then
// 1 / sum).
#define TL_ATTN_TQ 16
#define TL_ATTN_KC 32
#define TL_ATTN_WG 128
#define TL_ATTN_ACC (TL_ATTN_TQ * 128 / TL_ATTN_WG)
#define TL_ATTN_SC (TL_ATTN_TQ * TL_ATTN_KC / TL_ATTN_WG)  // scores an item computes a chunk

__kernel __attribute__((reqd_work_group_size(TL_ATTN_WG, 1, 1))) void attention_tiled(
    __global const float* q, __global const TL_KV_T* cache, ulong layer_off, int n_ctx, int kv_dim,
    __global const int* pos, int n_tok, int n_head, int group, int head_dim, float scale, int window,
    __global float* out, __local float* lq, __local float* lk, __local float* lv, __local float* lp,
    __local float* lc) {
  const int h = get_group_id(0) % n_head, t0 = (get_group_id(0) / n_head) * TL_ATTN_TQ;
  const int kvh = h / group, lid = get_local_id(0);
  const int nq = min(TL_ATTN_TQ, n_tok - t0), qs = head_dim + 4, hd4 = head_dim / 4;
  for (int e = lid; e < TL_ATTN_TQ * head_dim; e += TL_ATTN_WG) {
    const int qi = e / head_dim, d = e % head_dim;
    lq[qi * qs + d] = qi < nq ? q[((ulong)(t0 + qi) * n_head + h) * head_dim + d] * scale : 0.0f;
  }
  // The keys any query of the tile sees.
  int j_lo = n_ctx, j_hi = -1;
  for (int qi = 0; qi < nq; ++qi) {
    const int p = pos[t0 + qi];
    j_lo = min(j_lo, window > 0 ? max(0, p - window + 1) : 0);
    j_hi = max(j_hi, p);
  }
  // Item lid < nq: query lid's own key range, running max and sum.
  const int my_p = lid < nq ? pos[t0 + lid] : -1;
  const int my_lo = window > 0 ? max(0, my_p - window + 1) : 0;
  float m = -FLT_MAX, l = 0.0f;
  const int n_acc = TL_ATTN_TQ * head_dim / TL_ATTN_WG;
  float acc[TL_ATTN_ACC];
  for (int a = 0; a < TL_ATTN_ACC; ++a) acc[a] = 0.0f;
  __global const TL_KV_T* kbase = cache + layer_off + (ulong)kvh * head_dim;
  __global const TL_KV_T* vbase = kbase + (ulong)n_ctx * kv_dim;
  for (int j0 = j_lo; j0 <= j_hi; j0 += TL_ATTN_KC) {
    barrier(CLK_LOCAL_MEM_FENCE);  // lq written (first chunk); the last chunk's rows and weights spent
    for (int e = lid; e < TL_ATTN_KC * hd4; e += TL_ATTN_WG) {
      const int k = e / hd4, d = 4 * (e % hd4), j = j0 + k;
      float4 kr = (float4)(0.0f), vr = (float4)(0.0f);
      if (j <= j_hi) {
        kr = TL_KV_GET4(kbase + (ulong)j * kv_dim, d);
        vr = TL_KV_GET4(vbase + (ulong)j * kv_dim, d);
      }
      vstore4(kr, 0, lk + k * qs + d);
      vstore4(vr, 0, lv + k * head_dim + d);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    {
      // Item lid scores key lid % KC against queries lid / KC + i WG / KC (WG is a multiple of KC): each
      // float4 of its K row is read once for its TQ KC / WG queries.
      __local const float* kr = lk + (lid % TL_ATTN_KC) * qs;
      float sc[TL_ATTN_SC];
      for (int i = 0; i < TL_ATTN_SC; ++i) sc[i] = 0.0f;
      for (int d = 0; d < head_dim; d += 4) {
        const float4 kv = vload4(0, kr + d);
        for (int i = 0; i < TL_ATTN_SC; ++i)
          sc[i] += dot(vload4(0, lq + (lid / TL_ATTN_KC + i * (TL_ATTN_WG / TL_ATTN_KC)) * qs + d), kv);
      }
      for (int i = 0; i < TL_ATTN_SC; ++i) lp[lid + i * TL_ATTN_WG] = sc[i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < TL_ATTN_TQ) {
      __local float* pr = lp + lid * TL_ATTN_KC;
      float mx = m;
      for (int k = 0; k < TL_ATTN_KC; ++k) {
        const int j = j0 + k;
        if (j >= my_lo && j <= my_p) mx = fmax(mx, pr[k]);
      }
      float sum = 0.0f;
      for (int k = 0; k < TL_ATTN_KC; ++k) {
        const int j = j0 + k;
        const float w = j >= my_lo && j <= my_p ? exp(pr[k] - mx) : 0.0f;
        pr[k] = w;
        sum += w;
      }
      const float corr = exp(m - mx);  // 1 while the query has no key yet (m = mx = -FLT_MAX)
      l = l * corr + sum;
      m = mx;
      lc[lid] = corr;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (TL_ATTN_WG % head_dim == 0) {
      // Every accumulator of the item is of dimension lid % head_dim (queries lid / head_dim + a WG /
      // head_dim): each V element is read once for all of them. The same operations in the same order as
      // below.
      const int d = lid % head_dim, q0 = lid / head_dim, qstep = TL_ATTN_WG / head_dim;
      for (int a = 0; a < TL_ATTN_ACC; ++a)
        if (a < n_acc) acc[a] *= lc[q0 + a * qstep];
      for (int k = 0; k < TL_ATTN_KC; ++k) {
        const float vk = lv[k * head_dim + d];
        for (int a = 0; a < TL_ATTN_ACC; ++a)
          if (a < n_acc) acc[a] += lp[(q0 + a * qstep) * TL_ATTN_KC + k] * vk;
      }
    } else {
      for (int a = 0; a < TL_ATTN_ACC; ++a) {
        if (a < n_acc) {
          const int e = a * TL_ATTN_WG + lid, qi = e / head_dim, d = e % head_dim;
          __local const float* pr = lp + qi * TL_ATTN_KC;
          float v = acc[a] * lc[qi];
          for (int k = 0; k < TL_ATTN_KC; ++k) v += pr[k] * lv[k * head_dim + d];
          acc[a] = v;
        }
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < TL_ATTN_TQ) lc[lid] = l > 0.0f ? 1.0f / l : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int a = 0; a < TL_ATTN_ACC; ++a) {
    const int e = a * TL_ATTN_WG + lid, qi = e / head_dim, d = e % head_dim;
    if (a < n_acc && qi < nq) out[((ulong)(t0 + qi) * n_head + h) * head_dim + d] = acc[a] * lc[qi];
  }
}

#undef TL_KV_T
#undef TL_KV_GET
#undef TL_KV_GET4
