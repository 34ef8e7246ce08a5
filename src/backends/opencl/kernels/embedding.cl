// Token embedding lookup: out[t][i] = scale * table[ids[t]][i], the row dequantized exactly (quants.cl).
// table: [n_vocab][row_bytes]; ids: [n_tok]; out: [n_tok][n]. One work-item per output element: global
// (n rounded up to the preferred multiple, n_tok); items past n return. The host checked every id.
#define TL_EMBED_KERNEL(NAME, AT)                                                                        \
  __kernel void NAME(__global const uchar* table, ulong row_bytes, int n, __global const int* ids,       \
                     int n_tok, float scale, __global float* out) {                                      \
    const int i = get_global_id(0), t = get_global_id(1);                                                \
    if (i >= n || t >= n_tok) return;                                                                    \
    const float v = AT(table + (ulong)ids[t] * row_bytes, i, n);                                            \
    out[(ulong)t * n + i] = scale != 1.0f ? v * scale : v;                                               \
  }

TL_EMBED_KERNEL(embed_f32, tl_f32_at)
TL_EMBED_KERNEL(embed_f16, tl_f16_at)
TL_EMBED_KERNEL(embed_q4_0, tl_q4_0_at)
TL_EMBED_KERNEL(embed_q4_1, tl_q4_1_at)
TL_EMBED_KERNEL(embed_q8_0, tl_q8_0_at)
TL_EMBED_KERNEL(embed_kq8, tl_kq8_at)
TL_EMBED_KERNEL(embed_kq4, tl_kq4_at)
