// Writes the K and V rows of new tokens into the FB-KV cache at their positions
// (converting to the cache type).
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "format/error.h"
#include "format/fp16.h"

namespace tilellm {

void CpuBackend::kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                          int64_t n_tok) {
  if (layer < 0 || layer >= kv.n_layer())
    fail("kv_store: layer {} outside the cache's {}", layer, kv.n_layer());
  const int64_t d = kv.kv_dim();
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] < 0 || pos[t] >= kv.n_ctx())
      fail("position {} is outside the KV cache of {}", pos[t], kv.n_ctx());
  }
  for (int kind = 0; kind < 2; ++kind) {
    const float* src = kind == 0 ? k : v;
    uint8_t* plane = kv.plane(layer, kind);
    for (int64_t t = 0; t < n_tok; ++t) {
      uint8_t* dst = plane + size_t(pos[t]) * kv.row_bytes();
      if (kv.type() == GgmlType::F32) {
        std::memcpy(dst, src + t * d, size_t(d) * sizeof(float));
      } else {
        uint16_t* h = reinterpret_cast<uint16_t*>(dst);
        for (int64_t i = 0; i < d; ++i) h[i] = fp32_to_fp16(src[t * d + i]);
      }
    }
  }
}

}  // namespace tilellm
