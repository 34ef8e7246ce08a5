// Vulkan KV store (shaders/kv_store.comp): rows into the device FB-KV at their positions, in the cache type;
// with a layer's RoPE in one dispatch (shaders/rope_kv_store.comp). The cache is a buffer, or (--kv-memory
// image) an RGBA16F image that the shaders' _kvimage variants write a texel of four halves at a time.
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::record_kv_store(const KvTarget& cache, uint32_t layer_off, int64_t n_ctx, int64_t kv_dim,
                                    int64_t n_tok, const vulkan::Buffer& k, const vulkan::Buffer& v,
                                    const vulkan::Buffer& pos) {
  struct {
    uint32_t layer_off, n_ctx, kv_dim;
  } pc{layer_off, uint32_t(n_ctx), uint32_t(kv_dim)};
  // An invocation writes a pair (a word of halves), or a texel of four on an image.
  const int64_t per = cache.img ? 4 : 2, units = (kv_dim + per - 1) / per;
  const uint32_t gx = uint32_t((units + p_kv_store_.local_size - 1) / p_kv_store_.local_size);
  if (cache.img) {
    rt_.dispatch(p_kv_store_, *cache.img, {&k, &v, &pos}, &pc, gx, uint32_t(n_tok));
  } else {
    rt_.dispatch(p_kv_store_, {cache.buf, &k, &v, &pos}, &pc, gx, uint32_t(n_tok));
  }
}

void VulkanBackend::kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                             int64_t n_tok) {
  if (replaying()) return;
  check_kv(kv, layer, pos, n_tok, "kv_store");
  const int64_t n = n_tok * opts_.kv_dim;
  if (kv_on_cpu()) {
    host_in(k, n);
    host_in(v, n);
    return cpu_->kv_store(kv, layer, k, v, pos, n_tok);
  }
  const vulkan::Buffer& dk = dev_in(k, n, in_a_, "kv_store");
  const vulkan::Buffer& dv = dev_in(v, n, in_b_, "kv_store");
  uint32_t off = 0;
  const KvTarget cache = kv_target(kv, layer, off);
  record_kv_store(cache, off, opts_.kv_ctx, opts_.kv_dim, n_tok, dk, dv, dev_positions(pos, n_tok));
}

void VulkanBackend::record_rope_kv_store(const KvTarget& cache, uint32_t layer_off, int64_t n_ctx,
                                         int64_t n_tok, const RopeShape& r, const vulkan::Buffer& q,
                                         const vulkan::Buffer& k, const vulkan::Buffer& v,
                                         const vulkan::Buffer& table, const vulkan::Buffer& pos) {
  struct {
    uint32_t n_head, n_head_kv, head_dim, n_half, neox, layer_off, n_ctx;
  } pc{uint32_t(r.n_head),
       uint32_t(r.n_head_kv),
       uint32_t(r.head_dim),
       uint32_t(r.table->n_half),
       r.mode == RopeMode::Neox ? 1u : 0u,
       layer_off,
       uint32_t(n_ctx)};
  const uint32_t ls = p_rope_kv_store_.local_size;
  // An invocation owns a pair of a head (two, a texel, on an image).
  const int64_t units = r.head_dim / (cache.img ? 4 : 2);
  const uint32_t gx = uint32_t((units + ls - 1) / ls), gy = uint32_t(r.n_head + 2 * r.n_head_kv);
  if (cache.img) {
    rt_.dispatch(p_rope_kv_store_, *cache.img, {&q, &k, &v, &table, &pos}, &pc, gx, gy, uint32_t(n_tok));
  } else {
    rt_.dispatch(p_rope_kv_store_, {&q, &k, &v, &table, &pos, cache.buf}, &pc, gx, gy, uint32_t(n_tok));
  }
}

void VulkanBackend::rope_kv_store(float* q, float* k, const float* v, KvCache& kv, int64_t layer,
                                  const int32_t* pos, int64_t n_tok, const RopeShape& r) {
  const RopeTable& table = *r.table;
  const int64_t nq = n_tok * r.n_head * r.head_dim, nk = n_tok * r.n_head_kv * r.head_dim;
  // One dispatch when every shader it stands for is trusted, the shapes are the shader's (whole pairs, the
  // table's width, in Neox mode an even number of pairs) and q, k, v are device arrays of their own;
  // anything else, the unfused ops, whose checks and fallbacks then apply. The choice depends on the
  // shapes only, so a replayed step makes the one its capture made.
  // On an image the shader owns texels of four: whole ones a head, in Neox mode whole ones a half.
  const int64_t unit = kv_imgs_.empty() ? 2 : 4;
  const bool one = n_tok > 0 && !p_rope_kv_store_.on_cpu && !p_rope_.on_cpu && !kv_on_cpu() &&
                   r.fusable(kv.kv_dim()) && r.head_dim % unit == 0 &&
                   (r.mode != RopeMode::Neox || table.n_half % unit == 0) && opts_.kv_dim == kv.kv_dim() &&
                   is_mirror_start(q, nq) && is_mirror_start(k, nk) && is_mirror_start(v, nk);
  if (!one) return Backend::rope_kv_store(q, k, v, kv, layer, pos, n_tok, r);
  check_tokens(n_tok, "rope_kv_store");
  if (replaying(q, k)) return;
  check_kv(kv, layer, pos, n_tok, "rope_kv_store");
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] >= table.n_pos)
      fail("rope_kv_store: position {} outside the table of {}", pos[t], table.n_pos);
  }
  const vulkan::Buffer& dq = dev_in(q, nq, in_a_, "rope_kv_store");
  const vulkan::Buffer& dk = dev_in(k, nk, in_a_, "rope_kv_store");
  const vulkan::Buffer& dv = dev_in(v, nk, in_b_, "rope_kv_store");
  uint32_t off = 0;
  const KvTarget cache = kv_target(kv, layer, off);
  record_rope_kv_store(cache, off, opts_.kv_ctx, n_tok, r, dq, dk, dv, dev_rope_table(table),
                       dev_positions(pos, n_tok));
  dev_done(q, nq, dq);
  dev_done(k, nk, dk);
}

}  // namespace tilellm
