// Vulkan KV store (shaders/kv_store.comp): rows into the device FB-KV at their positions, in the cache type.
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::record_kv_store(const vulkan::Buffer& cache, uint32_t layer_off, int64_t n_ctx,
                                    int64_t kv_dim, int64_t n_tok, const vulkan::Buffer& k,
                                    const vulkan::Buffer& v, const vulkan::Buffer& pos) {
  struct {
    uint32_t layer_off, n_ctx, kv_dim;
  } pc{layer_off, uint32_t(n_ctx), uint32_t(kv_dim)};
  const int64_t pairs = (kv_dim + 1) / 2;
  rt_.dispatch(p_kv_store_, {&cache, &k, &v, &pos}, &pc,
               uint32_t((pairs + p_kv_store_.local_size - 1) / p_kv_store_.local_size), uint32_t(n_tok));
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
  const vulkan::Buffer& cache = kv_buffer(layer, off);
  record_kv_store(cache, off, opts_.kv_ctx, opts_.kv_dim, n_tok, dk, dv, dev_positions(pos, n_tok));
}

}  // namespace tilellm
