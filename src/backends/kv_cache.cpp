#include "backends/kv_cache.h"

#include "base/error.h"

namespace tilellm {

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim, GgmlType type,
                 bool storage)
    : n_layer_(n_layer), n_ctx_(n_ctx), kv_dim_(n_head_kv * head_dim), type_(type) {
  if (type != GgmlType::F16 && type != GgmlType::F32) fail("KV cache type must be f16 or f32");
  if (n_ctx <= 0) fail("context size must be positive, got {}", n_ctx);
  row_bytes_ = size_t(kv_dim_) * (type == GgmlType::F16 ? 2 : 4);
  plane_bytes_ = (size_t(n_ctx) * row_bytes_ + kAlign - 1) / kAlign * kAlign;
  if (storage) allocate();
}

void KvCache::allocate() {
  if (!has_storage()) buf_ = AlignedBuffer(plane_bytes_ * size_t(2 * n_layer_));
}

void check_device_kv(const KvCache& kv, int64_t seqs, int64_t layers, int64_t ctx, int64_t dim, GgmlType type,
                     int64_t layer, const int32_t* pos, int64_t n_tok, const char* who, const char* op) {
  if (kv.seq() < 0 || kv.seq() >= seqs)
    fail("{}: {}: sequence cache {} of a backend that holds {}", who, op, kv.seq(), seqs);
  if (kv.n_layer() != layers || kv.n_ctx() != ctx || kv.kv_dim() != dim || kv.type() != type) {
    fail("{}: {}: cache of {} layers x {} x {} ({}) does not match the device cache of {} x {} x {} ({})",
         who, op, kv.n_layer(), kv.n_ctx(), kv.kv_dim(), type_name(kv.type()), layers, ctx, dim,
         type_name(type));
  }
  if (layer < 0 || layer >= kv.n_layer())
    fail("{}: layer {} outside the cache's {}", op, layer, kv.n_layer());
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] < 0 || pos[t] >= kv.n_ctx())
      fail("position {} is outside the KV cache of {}", pos[t], kv.n_ctx());
  }
}

void KvCache::no_storage() {
  fail("internal: the host KV cache was made without storage (the session keeps it on the device)");
}

}  // namespace tilellm
