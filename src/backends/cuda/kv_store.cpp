// CUDA KV write (kernels/kv_store.cu): k and v rows into the device cache at their positions.
#include "backends/cuda/cuda_backend.h"
#include "base/error.h"

namespace tilellm {

void CudaBackend::kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                           int64_t n_tok) {
  if (replaying()) return;
  if (kv_on_cpu()) {
    const int64_t n = n_tok * kv.kv_dim();
    host_in(k, n);
    host_in(v, n);
    return cpu_->kv_store(kv, layer, k, v, pos, n_tok);
  }
  check_kv(kv, layer, pos, n_tok, "kv_store");
  const int64_t n = n_tok * opts_.kv_dim;
  const float* dk = dev_in(k, n, in_a_, "kv_store");
  const float* dv = dev_in(v, n, in_b_, "kv_store");
  const int32_t* dpos = dev_positions(pos, n_tok);
  void* kp = kv_plane(kv, layer, 0);
  void* vp = kv_plane(kv, layer, 1);
  const bool f16 = opts_.kv_type == GgmlType::F16;
  launch(k_kv_store_.name.c_str(), [&](cudaStream_t s) {
    cuda::kv_store(dk, dv, int(n_tok), int(opts_.kv_dim), dpos, kp, vp, f16, s);
  });
}

}  // namespace tilellm
