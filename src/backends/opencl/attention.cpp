// Causal attention over the device FB-KV cache (attention.cl): one work-group of 32 x split items per (token,
// head) and chunk of its keys; long contexts split the keys over chunks merged by attention_merge. Prompts
// of kTiledTokens or more take attention_tiled where the head size and local memory allow it: 16 tokens of
// a head a work-group, each K and V row read once for all of them.
#include <algorithm>
#include <array>

#include "backends/opencl/opencl_backend.h"
#include "base/error.h"

namespace tilellm {

int64_t OpenclBackend::attention_chunks(int64_t n_tok, const AttnParams& p, const int32_t* pos,
                                        int64_t& chunk_blocks) const {
  constexpr int64_t kBlock = 32;  // TL_ATTN_BLOCK
  int64_t blocks = 1;             // the longest row's key blocks
  for (int64_t t = 0; t < n_tok; ++t) {
    const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos[t] - p.window + 1) : 0;
    blocks = std::max(blocks, (pos[t] - first + kBlock) / kBlock);
  }
  chunk_blocks = std::max<int64_t>(opts_.attention_chunk_blocks, 1);
  int64_t n = (blocks + chunk_blocks - 1) / chunk_blocks;
  // As many chunks as the partial-sums buffer holds (chunks then take more blocks each).
  const int64_t cap = int64_t(kAttnPartFloats) / (n_tok * p.n_head * (p.head_dim + 2));
  if (n > cap && cap >= 2) {
    chunk_blocks = (blocks + cap - 1) / cap;
    n = (blocks + chunk_blocks - 1) / chunk_blocks;
  }
  if (n < 2 || cap < 2 || k_attention_merge_.on_cpu) {
    chunk_blocks = blocks;
    return 1;
  }
  return n;
}

std::array<size_t, 5> OpenclBackend::attention_tiled_local(int64_t head_dim) {
  // attention.cl: lq [TQ][hd + 4], lk [KC][hd + 4], lv [KC][hd], lp [TQ][KC], lc [TQ] floats.
  const size_t hd = size_t(head_dim), f = sizeof(float);
  return {kAttnTileTokens * (hd + 4) * f, kAttnTileKeys * (hd + 4) * f, kAttnTileKeys * hd * f,
          kAttnTileTokens * kAttnTileKeys * f, kAttnTileTokens * f};
}

bool OpenclBackend::attention_tiled(int64_t n_tok, const AttnParams& p) const {
  const opencl::Kernel& k = k_attention_tiled_;
  return n_tok >= kTiledTokens && !k.on_cpu && k.max_wg >= kAttnTileItems && p.head_dim % 8 == 0 &&
         p.head_dim <= 128 && [&] {
           size_t bytes = 0;
           for (size_t b : attention_tiled_local(p.head_dim)) bytes += b;
           return bytes <= caps().local_mem_bytes;
         }();
}

void OpenclBackend::enqueue_attention_tiled(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx,
                                            int64_t kv_dim, int64_t n_tok, const AttnParams& p,
                                            const opencl::Buffer& q, const opencl::Buffer& pos,
                                            const opencl::Buffer& out) {
  const opencl::Kernel& k = k_attention_tiled_;
  const cl_ulong off = layer_off;
  const cl_int ctx = cl_int(n_ctx), d = cl_int(kv_dim), nt = cl_int(n_tok), n_head = cl_int(p.n_head),
               group = cl_int(p.n_head / p.n_head_kv), hd = cl_int(p.head_dim), window = cl_int(p.window);
  int a = 0;
  opencl::set_arg(k, a++, q);
  opencl::set_arg(k, a++, cache);
  opencl::set_arg(k, a++, off);
  opencl::set_arg(k, a++, ctx);
  opencl::set_arg(k, a++, d);
  opencl::set_arg(k, a++, pos);
  opencl::set_arg(k, a++, nt);
  opencl::set_arg(k, a++, n_head);
  opencl::set_arg(k, a++, group);
  opencl::set_arg(k, a++, hd);
  opencl::set_arg(k, a++, p.scale);
  opencl::set_arg(k, a++, window);
  opencl::set_arg(k, a++, out);
  for (size_t bytes : attention_tiled_local(p.head_dim)) opencl::set_local_arg(k, a++, bytes);
  const size_t tiles = (size_t(n_tok) + kAttnTileTokens - 1) / kAttnTileTokens;
  const size_t global[1] = {tiles * size_t(p.n_head) * kAttnTileItems}, local[1] = {kAttnTileItems};
  rt_.launch(k, 1, global, local);
}

void OpenclBackend::enqueue_attention(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx,
                                      int64_t kv_dim, int64_t n_tok, const AttnParams& p,
                                      const opencl::Buffer& q, const int32_t* host_pos,
                                      const opencl::Buffer& pos, const opencl::Buffer& out) {
  if (attention_tiled(n_tok, p))
    return enqueue_attention_tiled(cache, layer_off, n_ctx, kv_dim, n_tok, p, q, pos, out);
  constexpr size_t kBlock = 32;  // TL_ATTN_BLOCK: keys per block, and items per split
  const opencl::Kernel& k = k_attention_;
  // Items per key: the most of 8, 4, 2 that divides head_dim into float4 steps and fits the kernel's
  // work-group limit and local memory; 1 always works.
  size_t split = 1;
  for (size_t s : {8, 4, 2}) {
    const size_t bytes = (2 * size_t(p.head_dim) + kBlock + kBlock * s) * sizeof(float);
    if (p.head_dim % int64_t(4 * s) == 0 && kBlock * s <= k.max_wg && bytes <= caps().local_mem_bytes) {
      split = s;
      break;
    }
  }
  const size_t wg = kBlock * split;
  const size_t local_bytes = (2 * size_t(p.head_dim) + kBlock + wg) * sizeof(float);
  if (local_bytes > caps().local_mem_bytes) {
    fail(
        "OpenCL backend: attention with head size {} needs {} bytes of local memory; the device (profile {}) "
        "has {}",
        p.head_dim, local_bytes, caps().profile, caps().local_mem_bytes);
  }
  int64_t chunk_blocks = 0;
  const int64_t n_chunks = attention_chunks(n_tok, p, host_pos, chunk_blocks);
  const cl_ulong off = layer_off;
  const cl_int ctx = cl_int(n_ctx), d = cl_int(kv_dim), n_head = cl_int(p.n_head),
               group = cl_int(p.n_head / p.n_head_kv), hd = cl_int(p.head_dim), window = cl_int(p.window),
               sp = cl_int(split), cb = cl_int(chunk_blocks);
  opencl::set_arg(k, 0, q);
  opencl::set_arg(k, 1, cache);
  opencl::set_arg(k, 2, off);
  opencl::set_arg(k, 3, ctx);
  opencl::set_arg(k, 4, d);
  opencl::set_arg(k, 5, pos);
  opencl::set_arg(k, 6, n_head);
  opencl::set_arg(k, 7, group);
  opencl::set_arg(k, 8, hd);
  opencl::set_arg(k, 9, p.scale);
  opencl::set_arg(k, 10, window);
  opencl::set_arg(k, 11, sp);
  opencl::set_arg(k, 12, cb);
  opencl::set_arg(k, 13, out);
  opencl::set_arg(k, 14, attn_part_);
  opencl::set_local_arg(k, 15, size_t(p.head_dim) * sizeof(float));
  opencl::set_local_arg(k, 16, size_t(p.head_dim) * sizeof(float));
  opencl::set_local_arg(k, 17, kBlock * sizeof(float));
  opencl::set_local_arg(k, 18, wg * sizeof(float));
  const size_t rows = size_t(n_tok * p.n_head);
  const size_t global[2] = {rows * wg, size_t(n_chunks)}, local[2] = {wg, 1};
  rt_.launch(k, 2, global, local);
  if (n_chunks == 1) return;
  const opencl::Kernel& km = k_attention_merge_;
  const cl_int nc = cl_int(n_chunks), nr = cl_int(rows);
  opencl::set_arg(km, 0, attn_part_);
  opencl::set_arg(km, 1, nc);
  opencl::set_arg(km, 2, hd);
  opencl::set_arg(km, 3, nr);
  opencl::set_arg(km, 4, out);
  const size_t mglobal[2] = {size_t(p.head_dim), rows};
  rt_.launch(km, 2, mglobal, nullptr);
}

void OpenclBackend::attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos,
                              int64_t n_tok, const AttnParams& p, float* out) {
  if (kv_on_cpu()) {
    host_in(q, n_tok * p.n_head * p.head_dim);
    host_out(out, n_tok * p.n_head * p.head_dim);
    return cpu_->attention(q, kv, layer, pos, n_tok, p, out);
  }
  if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.n_head_kv * p.head_dim != kv.kv_dim()) {
    fail("attention: {} heads over {} KV heads of size {} do not fit a cache row of {}", p.n_head,
         p.n_head_kv, p.head_dim, kv.kv_dim());
  }
  check_kv(kv, layer, pos, n_tok, "attention");
  if (n_tok <= 0) return;
  const int64_t elems = n_tok * p.n_head * p.head_dim;
  const opencl::Buffer& qb = dev_in(q, elems, in_a_, "attention");
  const opencl::Buffer& pb = dev_positions(pos, n_tok);
  const opencl::Buffer& ob = dev_out(out, elems, out_, "attention");
  uint64_t off = 0;
  const opencl::Buffer& buf = kv_buffer(kv, layer, off);
  enqueue_attention(buf, off, kv.n_ctx(), kv.kv_dim(), n_tok, p, qb, pos, pb, ob);
  dev_done(out, elems, ob);
}

}  // namespace tilellm
