// CUDA attention (kernels/attention.cu): decode, the keys of each query head split over several blocks
// walking them with the online softmax, the last of a head's blocks to finish combining their partials (a
// batch decode step's sequences in the same launch, each over its own cache); prompts, a block per 16
// tokens of a head. In the quantized mode the output is also rounded for the product after it (the Q8
// buffers), so no separate quantization runs.
#include "backends/cuda/cuda_backend.h"
#include "base/error.h"

namespace tilellm {

void CudaBackend::record_attention(const void* k_plane, const void* v_plane, int64_t kv_dim, int64_t n_tok,
                                   const AttnParams& p, const float* dq, const int32_t* dpos, float* dout,
                                   int splits, const cuda::SeqPlanes* seqs) {
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
  const int64_t decode_tokens = seqs ? n_tok : n_tok == 1 ? 1 : 0;  // queries using the splits' partials
  if (splits > cuda::kMaxAttnSplits)
    fail("internal: CUDA attention in {} splits, above its {}", splits, cuda::kMaxAttnSplits);
  if (splits > 1 && (decode_tokens * splits * p.n_head * (p.head_dim + 2) > attn_work_floats_ ||
                     decode_tokens * p.n_head > attn_counters_n_))
    fail("internal: CUDA attention of {} heads in {} splits exceeds its work buffer", p.n_head, splits);
  float* work = attn_work_.as<float>();
  const cuda::Q8 q8 = quantize ? q8_view(0) : cuda::Q8{};
  launch(k_attention_.name.c_str(), [&](cudaStream_t s) {
    cuda::attention(dq, k_plane, v_plane, dpos, int(n_tok), a, splits, work, attn_counters_.as<int>(), dout,
                    q8, seqs, s);
  });
  if (quantize) q8_hold(0, dout, n_tok, p.n_head * p.head_dim);
}

void CudaBackend::check_attention(const AttnParams& p, int64_t kv_dim) const {
  if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.n_head_kv * p.head_dim != kv_dim) {
    fail("attention: {} heads over {} KV heads of size {} do not fit a cache row of {}", p.n_head,
         p.n_head_kv, p.head_dim, kv_dim);
  }
  if (p.head_dim > 512 || p.window < 0) fail("CUDA attention: head size {} exceeds 512", p.head_dim);
}

void CudaBackend::attention_on_device(const float* q, int64_t layer, const int32_t* pos, int64_t n_tok,
                                      const AttnParams& p, float* out, int64_t seq, int splits,
                                      const cuda::SeqPlanes* seqs) {
  const int64_t n = n_tok * p.n_head * p.head_dim;
  const float* dq = dev_in(q, n, in_a_, "attention");
  float* dout = dev_out(out, n, out_, "attention");
  record_attention(kv_plane_of(seq, layer, 0), kv_plane_of(seq, layer, 1), opts_.kv_dim, n_tok, p, dq,
                   dev_positions(pos, n_tok), dout, splits, seqs);
  const float* src = q8_[0].src;
  const int64_t rows = q8_[0].rows, cols = q8_[0].cols;
  dev_done(out, n, dout);
  q8_hold(0, src, rows, cols);  // dev_done forgets it: here the kernel wrote both together
}

void CudaBackend::attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos,
                            int64_t n_tok, const AttnParams& p, float* out) {
  if (replaying(out)) return;
  check_kv(kv, layer, pos, n_tok, "attention");
  check_attention(p, kv.kv_dim());
  if (kv_on_cpu()) {
    const int64_t n = n_tok * p.n_head * p.head_dim;
    host_in(q, n);
    host_out(out, n);
    return cpu_->attention(q, kv, layer, pos, n_tok, p, out);
  }
  attention_on_device(q, layer, pos, n_tok, p, out, kv.seq(), attn_splits_, nullptr);
}

void CudaBackend::attention_seqs(const float* q, KvCache* const* kvs, int64_t layer, const int32_t* pos,
                                 int64_t n, const AttnParams& p, float* out) {
  if (kv_on_cpu() || n > cuda::kMaxSeqs) return Backend::attention_seqs(q, kvs, layer, pos, n, p, out);
  if (replaying(out)) return;
  for (int64_t i = 0; i < n; ++i) check_kv(*kvs[i], layer, pos + i, 1, "attention");
  check_attention(p, opts_.kv_dim);
  // The splits the partials' room allows for n queries (more tokens keep the GPU busy with fewer splits).
  const int64_t room =
      std::min(attn_work_floats_ / (n * p.n_head * (p.head_dim + 2)), attn_counters_n_ / (n * p.n_head));
  const int splits = int(std::max<int64_t>(1, std::min<int64_t>(attn_splits_, room)));
  // The planes of sequence 0, each token's sequence placing it from there.
  const cuda::SeqPlanes sp = seq_planes(kvs, n);
  attention_on_device(q, layer, pos, n, p, out, 0, splits, &sp);
}

}  // namespace tilellm
