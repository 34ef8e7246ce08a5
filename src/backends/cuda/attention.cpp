// CUDA attention (kernels/attention.cu): decode, the keys of each query head split over several blocks
// walking them with the online softmax, the last of a head's blocks to finish combining their partials;
// prompts, a block per 16 tokens of a head. In the quantized mode the output is also rounded for the
// product after it (the Q8 buffers), so no separate quantization runs.
#include "backends/cuda/cuda_backend.h"
#include "base/error.h"

namespace tilellm {

void CudaBackend::record_attention(const void* k_plane, const void* v_plane, int64_t kv_dim, int64_t n_tok,
                                   const AttnParams& p, const float* dq, const int32_t* dpos, float* dout,
                                   int splits) {
  const int64_t n = n_tok * p.n_head * p.head_dim;
  const bool quantize = quantized_ && p.head_dim % 32 == 0 && q8_fits(n);
  cuda::AttnArgs a;
  a.n_head = int(p.n_head);
  a.n_head_kv = int(p.n_head_kv);
  a.head_dim = int(p.head_dim);
  a.kv_dim = int(kv_dim);
  a.scale = p.scale;
  a.window = int(p.window);
  a.f16 = opts_.kv_type == GgmlType::F16;
  if (n_tok == 1 && int64_t(splits) * p.n_head * (p.head_dim + 2) > attn_work_floats_)
    fail("internal: CUDA attention of {} heads in {} splits exceeds its work buffer", p.n_head, splits);
  float* work = attn_work_.as<float>();
  const cuda::Q8 q8 = quantize ? q8_view(0) : cuda::Q8{};
  launch(k_attention_.name.c_str(), [&](cudaStream_t s) {
    cuda::attention(dq, k_plane, v_plane, dpos, int(n_tok), a, splits, work, attn_counters_.as<int>(), dout,
                    q8, s);
  });
  if (quantize) q8_hold(0, dout, n_tok, p.n_head * p.head_dim);
}

void CudaBackend::attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos,
                            int64_t n_tok, const AttnParams& p, float* out) {
  if (replaying(out)) return;
  check_kv(kv, layer, pos, n_tok, "attention");
  if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.n_head_kv * p.head_dim != kv.kv_dim()) {
    fail("attention: {} heads over {} KV heads of size {} do not fit a cache row of {}", p.n_head,
         p.n_head_kv, p.head_dim, kv.kv_dim());
  }
  if (p.head_dim > 512 || p.window < 0) fail("CUDA attention: head size {} exceeds 512", p.head_dim);
  const int64_t n = n_tok * p.n_head * p.head_dim;
  if (kv_on_cpu()) {
    host_in(q, n);
    host_out(out, n);
    return cpu_->attention(q, kv, layer, pos, n_tok, p, out);
  }
  const float* dq = dev_in(q, n, in_a_, "attention");
  float* dout = dev_out(out, n, out_, "attention");
  record_attention(kv_plane(kv, layer, 0), kv_plane(kv, layer, 1), opts_.kv_dim, n_tok, p, dq,
                   dev_positions(pos, n_tok), dout, attn_splits_);
  const float* src = q8_[0].src;
  const int64_t rows = q8_[0].rows, cols = q8_[0].cols;
  dev_done(out, n, dout);
  q8_hold(0, src, rows, cols);  // dev_done forgets it: here the kernel wrote both together
}

}  // namespace tilellm
