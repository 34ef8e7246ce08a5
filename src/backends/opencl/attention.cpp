// Causal attention over the device FB-KV cache (attention.cl): one work-group of 32 x split items per (token,
// head) and chunk of its keys, up to 4 blocks of 32 keys a pass; long contexts split the keys over chunks
// merged by attention_merge; in decode whichever writes the output also rounds it for the integer product
// after it (the q8 slots, matmul.cpp). Prompts of kTiledTokens or more take attention_tiled where the head
// size and local memory allow it: 16 tokens of a head a work-group, each K and V row read once for all of
// them.
#include <algorithm>
#include <array>

#include "backends/opencl/opencl_backend.h"
#include "base/error.h"

namespace tilellm {

int64_t OpenclBackend::attention_chunks(int64_t n_tok, const AttnParams& p, const int32_t* pos,
                                        int64_t& chunk_blocks) const {
  const int64_t kBlock = int64_t(kAttnBlock);
  int64_t blocks = 1;  // the longest row's key blocks
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

size_t OpenclBackend::attention_local(int64_t head_dim, int64_t split, int64_t pass_blocks) {
  // attention.cl: lacc [head_dim], lw [pass_blocks * 32], scratch [pass_blocks * L], vpart [4 L] floats.
  const size_t wg = kAttnBlock * size_t(split), pb = size_t(pass_blocks);
  return (size_t(head_dim) + pb * kAttnBlock + pb * wg + 4 * wg) * sizeof(float);
}

OpenclBackend::AttnLaunch OpenclBackend::attention_launch(int64_t head_dim, int64_t chunk_blocks) const {
  // Items per key: the most of 8, 4, 2 that divides head_dim into float4 steps and fits the kernel's
  // work-group limit; 1 always divides. For it, the longest pass (at most the chunk, the option and
  // TL_ATTN_PASS blocks) that fits local memory: a pass's blocks cost one trip to memory together.
  const int64_t most = std::clamp<int64_t>(std::min(chunk_blocks, opts_.attention_pass_blocks), 1, kAttnPass);
  for (int64_t s : {8, 4, 2, 1}) {
    if (head_dim % (4 * s) != 0 && s > 1) continue;
    if (kAttnBlock * size_t(s) > k_attention_.max_wg) continue;
    for (int64_t pb = most; pb >= 1; --pb) {
      if (attention_local(head_dim, s, pb) <= caps().local_mem_bytes) return {int(s), int(pb)};
    }
  }
  return {};
}

bool OpenclBackend::enqueue_attention(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx,
                                      int64_t kv_dim, int64_t n_tok, const AttnParams& p,
                                      const opencl::Buffer& q, const int32_t* host_pos,
                                      const opencl::Buffer& pos, const opencl::Buffer& out, int y_slot) {
  if (attention_tiled(n_tok, p)) {
    enqueue_attention_tiled(cache, layer_off, n_ctx, kv_dim, n_tok, p, q, pos, out);
    return false;
  }
  const opencl::Kernel& k = k_attention_;
  int64_t chunk_blocks = 0;
  const int64_t n_chunks = attention_chunks(n_tok, p, host_pos, chunk_blocks);
  const AttnLaunch a = attention_launch(p.head_dim, chunk_blocks);
  if (a.split == 0) {
    fail(
        "OpenCL backend: attention with head size {} needs {} bytes of local memory; the device (profile {}) "
        "has {}",
        p.head_dim, attention_local(p.head_dim, 1, 1), caps().profile, caps().local_mem_bytes);
  }
  const cl_ulong off = layer_off;
  const cl_int ctx = cl_int(n_ctx), d = cl_int(kv_dim), n_head = cl_int(p.n_head),
               group = cl_int(p.n_head / p.n_head_kv), hd = cl_int(p.head_dim), window = cl_int(p.window),
               sp = cl_int(a.split), cb = cl_int(chunk_blocks), pb = cl_int(a.pass_blocks);
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
  opencl::set_arg(k, 13, pb);
  opencl::set_arg(k, 14, out);
  opencl::set_arg(k, 15, attn_part_);
  const size_t wg = kAttnBlock * size_t(a.split), f = sizeof(float);
  opencl::set_local_arg(k, 16, size_t(p.head_dim) * f);
  opencl::set_local_arg(k, 17, size_t(a.pass_blocks) * kAttnBlock * f);
  opencl::set_local_arg(k, 18, size_t(a.pass_blocks) * wg * f);
  opencl::set_local_arg(k, 19, 4 * wg * f);
  // The output's rounding (attention.cl yq), by whichever kernel writes the output: attention with one
  // chunk, else attention_merge in groups of one row.
  const opencl::Kernel& km = k_attention_merge_;
  const bool round = y_slot >= 0 && q8_dot_ >= 0 && p.head_dim % 32 == 0 &&
                     (n_chunks == 1 || size_t(p.head_dim) <= km.max_wg);
  if (round && n_chunks == 1)
    opencl::set_arg(k, 20, q8_slot(y_slot));
  else
    opencl::set_null_arg(k, 20);
  const size_t rows = size_t(n_tok * p.n_head);
  const size_t global[2] = {rows * wg, size_t(n_chunks)}, local[2] = {wg, 1};
  rt_.launch(k, 2, global, local);
  if (n_chunks == 1) return round;
  const cl_int nc = cl_int(n_chunks), nr = cl_int(rows);
  opencl::set_arg(km, 0, attn_part_);
  opencl::set_arg(km, 1, nc);
  opencl::set_arg(km, 2, hd);
  opencl::set_arg(km, 3, nr);
  opencl::set_arg(km, 4, out);
  opencl::set_arg(km, 5, n_head);
  if (round)
    opencl::set_arg(km, 6, q8_slot(y_slot));
  else
    opencl::set_null_arg(km, 6);
  opencl::set_local_arg(km, 7, size_t(p.head_dim) * f);
  const size_t mglobal[2] = {size_t(p.head_dim), rows}, mlocal[2] = {size_t(p.head_dim), 1};
  rt_.launch(km, 2, mglobal, round ? mlocal : nullptr);
  return round;
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
  // Decode's output rounded for the integer product after it (its slot the one rounded_ does not hold).
  const int slot = n_tok == 1 && rounds_output(out, elems) ? (rounded_.slot == 0 ? 1 : 0) : -1;
  const bool rounded = enqueue_attention(buf, off, kv.n_ctx(), kv.kv_dim(), n_tok, p, qb, pos, pb, ob, slot);
  dev_done(out, elems, ob);
  if (rounded) rounded_ = {reinterpret_cast<const uint8_t*>(out), elems, slot};
}

}  // namespace tilellm
