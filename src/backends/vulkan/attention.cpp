// Vulkan attention (shaders/attention.comp): one work-group per (head, token), online softmax over chunks of
// keys of the work-group's size: 64 invocations for prompts (p_attention_), 256 for one token
// (p_attention_one_; decode has few groups). Under the integer decode products, one token's output is also
// rounded for the output projection (p_attention_q8_, on 256 too, heads of whole blocks of 32: q8_held_ then
// names the output). The cache is a buffer, or an RGBA16F image read by the shader's _kvimage variant.
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::record_attention(const KvTarget& cache, uint32_t layer_off, int64_t n_ctx, int64_t kv_dim,
                                     int64_t n_tok, const AttnParams& p, const vulkan::Buffer& q,
                                     const vulkan::Buffer& pos, const vulkan::Buffer& out, bool q8) {
  // K rows 16 bytes at a time when every row of every head starts at a multiple of 16 bytes.
  const int64_t per16 = opts_.kv_type == GgmlType::F16 ? 8 : 4;
  const uint32_t vec = kv_dim % per16 == 0 && p.head_dim % per16 == 0 ? 1 : 0;
  struct {
    uint32_t layer_off, n_ctx, kv_dim, n_head, n_head_kv, head_dim, window;
    float scale;
    uint32_t vec;
  } pc{layer_off,
       uint32_t(n_ctx),
       uint32_t(kv_dim),
       uint32_t(p.n_head),
       uint32_t(p.n_head_kv),
       uint32_t(p.head_dim),
       uint32_t(p.window),
       p.scale,
       vec};
  const bool one = n_tok == 1 && p_attention_one_.pipeline && !p_attention_one_.on_cpu;
  const vulkan::Pipeline& pl = q8 ? p_attention_q8_ : one ? p_attention_one_ : p_attention_;
  const vulkan::Buffer& q8_out = q8x_.get() ? q8x_ : vec_;
  if (cache.img) {
    rt_.dispatch(pl, *cache.img, {&q, &pos, &out, &q8_out}, &pc, uint32_t(p.n_head), uint32_t(n_tok));
  } else {
    rt_.dispatch(pl, {&q, cache.buf, &pos, &out, &q8_out}, &pc, uint32_t(p.n_head), uint32_t(n_tok));
  }
}

void VulkanBackend::attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos,
                              int64_t n_tok, const AttnParams& p, float* out) {
  if (replaying(out)) return;
  check_kv(kv, layer, pos, n_tok, "attention");
  if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.n_head_kv * p.head_dim != kv.kv_dim()) {
    fail("attention: {} heads over {} KV heads of size {} do not fit a cache row of {}", p.n_head,
         p.n_head_kv, p.head_dim, kv.kv_dim());
  }
  // The shader owns head dims i, i + L, ... up to 8 per invocation.
  if (p.head_dim > 8 * int64_t(p_attention_.local_size) || p.window < 0)
    fail("Vulkan attention: head size {} exceeds {}", p.head_dim, 8 * p_attention_.local_size);
  const int64_t n = n_tok * p.n_head * p.head_dim;
  if (kv_on_cpu()) {
    host_in(q, n);
    host_out(out, n);
    return cpu_->attention(q, kv, layer, pos, n_tok, p, out);
  }
  const vulkan::Buffer& dq = dev_in(q, n, in_a_, "attention");
  const vulkan::Buffer& dout = dev_out(out, n, out_, "attention");
  uint32_t off = 0;
  const KvTarget cache = kv_target(kv, layer, off);
  const bool q8 = attention_rounds(n_tok, p);
  record_attention(cache, off, opts_.kv_ctx, opts_.kv_dim, n_tok, p, dq, dev_positions(pos, n_tok), dout, q8);
  dev_done(out, n, dout);
  if (q8) q8_held_ = {dout.get(), n};
}

}  // namespace tilellm
