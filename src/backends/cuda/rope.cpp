// CUDA RoPE (kernels/rope.cu): alone, and the layer's RoPE of q and k fused with the KV write (one launch;
// the op the layer loop calls; a batch decode step's sequences in one launch too). With --cuda-fuse-rope on,
// in decode, where the q/k/v products stream their rows two at a time (norm pairs: a pair's two rows in one
// lane), the RoPE and the KV write happen in the products' own launch instead (matmul_rope_kv_store;
// kernels/matvec.cu): one kernel fewer in each layer's chain of dependent launches. The table is the whole
// one on the device, looked up by each token's position there, so a replayed decode step needs nothing from
// the host.
#include "backends/cuda/cuda_backend.h"
#include "base/error.h"

namespace tilellm {

void CudaBackend::rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                       const int32_t* pos, const RopeTable& table, RopeMode mode) {
  if (replaying(x)) return;
  check_tokens(n_tok, "rope");
  if (rope_dim != 2 * table.n_half || rope_dim > head_dim)
    fail("rope: {} rotated dims do not match the table's {} (head size {})", rope_dim, 2 * table.n_half,
         head_dim);
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] < 0 || pos[t] >= table.n_pos)
      fail("position {} is outside the RoPE table of {}", pos[t], table.n_pos);
  }
  const int64_t n = n_tok * n_heads * head_dim;
  if (k_rope_.on_cpu) {
    host_out(x, n);
    return cpu_->rope(x, n_tok, n_heads, head_dim, rope_dim, pos, table, mode);
  }
  float* dx = dev_in(x, n, in_a_, "rope");
  const cuda::RopeArgs r = rope_args(table, head_dim, rope_dim, mode);
  const int32_t* dpos = dev_positions(pos, n_tok);
  launch(k_rope_.name.c_str(), [&](cudaStream_t s) { cuda::rope(dx, int(n_tok), int(n_heads), dpos, r, s); });
  dev_done(x, n, dx);
}

bool CudaBackend::rope_kv_fused(const float* q, const float* k, const float* v, int64_t n_tok,
                                const RopeShape& r) const {
  // Fused only where the shapes allow it and q, k, v are mirrored arrays of their own (in place on the
  // device); otherwise the unfused reference, each op as its own verdict says.
  return !k_rope_kv_store_.on_cpu && !kv_on_cpu() && r.fusable(opts_.kv_dim) &&
         is_mirror_start(q, n_tok * r.n_head * r.head_dim) &&
         is_mirror_start(k, n_tok * r.n_head_kv * r.head_dim) &&
         is_mirror_start(v, n_tok * r.n_head_kv * r.head_dim);
}

void CudaBackend::record_rope_kv_store(float* q, float* k, const float* v, int64_t layer, const int32_t* pos,
                                       int64_t n_tok, const RopeShape& r, int64_t seq,
                                       const cuda::SeqPlanes& sp) {
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] >= r.table->n_pos) fail("position {} is outside the RoPE table of {}", pos[t], r.table->n_pos);
  }
  const int64_t nq = n_tok * r.n_head * r.head_dim, nk = n_tok * r.n_head_kv * r.head_dim;
  float* dq = dev_in(q, nq, in_a_, "rope_kv_store");
  float* dk = dev_in(k, nk, in_a_, "rope_kv_store");
  const float* dv = dev_in(v, nk, in_a_, "rope_kv_store");
  const cuda::RopeArgs ra = rope_args(*r.table, r.head_dim, r.rope_dim, r.mode);
  const int32_t* dpos = dev_positions(pos, n_tok);
  void* kp = kv_plane_of(seq, layer, 0);
  void* vp = kv_plane_of(seq, layer, 1);
  const bool f16 = opts_.kv_type == GgmlType::F16;
  launch(k_rope_kv_store_.name.c_str(), [&](cudaStream_t s) {
    cuda::rope_kv_store(dq, dk, dv, int(n_tok), int(r.n_head), int(r.n_head_kv), dpos, ra, kp, vp, f16, sp,
                        s);
  });
  dev_done(q, nq, dq);
  dev_done(k, nk, dk);
}

void CudaBackend::rope_kv_store(float* q, float* k, const float* v, KvCache& kv, int64_t layer,
                                const int32_t* pos, int64_t n_tok, const RopeShape& r) {
  if (!rope_kv_fused(q, k, v, n_tok, r)) return Backend::rope_kv_store(q, k, v, kv, layer, pos, n_tok, r);
  step_ops_ += 3;  // the reference's three ops, as a replay of the unfused path would count them
  if (mode_ == StepMode::Replaying) return;
  check_kv(kv, layer, pos, n_tok, "rope_kv_store");
  record_rope_kv_store(q, k, v, layer, pos, n_tok, r, kv.seq(), cuda::SeqPlanes{});
}

void CudaBackend::rope_kv_store_seqs(float* q, float* k, const float* v, KvCache* const* kvs, int64_t layer,
                                     const int32_t* pos, int64_t n, const RopeShape& r) {
  if (n > cuda::kMaxSeqs || !rope_kv_fused(q, k, v, n, r))
    return Backend::rope_kv_store_seqs(q, k, v, kvs, layer, pos, n, r);
  step_ops_ += 3;  // as rope_kv_store counts itself
  if (mode_ == StepMode::Replaying) return;
  for (int64_t i = 0; i < n; ++i) check_kv(*kvs[i], layer, pos + i, 1, "rope_kv_store");
  // The planes of sequence 0, each token's sequence placing it from there.
  record_rope_kv_store(q, k, v, layer, pos, n, r, 0, seq_planes(kvs, n));
}

bool CudaBackend::record_qkv_rope(const Weight* const* wqkv, const float* x, float* const* ys, KvCache& kv,
                                  int64_t layer, const int32_t* pos, const RopeShape& r) {
  if (!opts_.fuse_qkv_rope || k_qkv_rope_.on_cpu || r.mode != RopeMode::Norm ||
      !rope_kv_fused(ys[0], ys[1], ys[2], 1, r))
    return false;
  cuda::MatvecJob job;
  job.n = 3;
  const DeviceWeight* dws[3] = {};
  const int64_t n_out[3] = {r.n_head * r.head_dim, opts_.kv_dim, opts_.kv_dim};
  for (int i = 0; i < 3; ++i) {
    dws[i] = &find_weight(*wqkv[i], "matmul");
    if (!quantized(dws[i]->fmt) || dws[i]->fmt != dws[0]->fmt || dws[i]->n_in != dws[0]->n_in ||
        dws[i]->n_out != n_out[i] || !on_matvec(*dws[i], 1) || ys[i] == x)
      return false;
    job.w[i] = dws[i]->matrix();
  }
  if (!cuda::matvec_rope_fits(job)) return false;
  check_kv(kv, layer, pos, 1, "rope_kv_store");
  if (pos[0] >= r.table->n_pos) fail("position {} is outside the RoPE table of {}", pos[0], r.table->n_pos);
  const cuda::RopeArgs ra = rope_args(*r.table, r.head_dim, r.rope_dim, r.mode);
  job.rope.table = ra.table;  // before take_norm: a job with its RoPE takes its rows in pairs
  const bool norm = take_norm(x, job);
  const float* dx = dev_in(x, dws[0]->n_in, in_a_, "matmul");
  for (int i = 0; i < 3; ++i) job.y[i] = dev_out(ys[i], n_out[i], out_, "matmul");
  job.rope.pos = dev_positions(pos, 1);
  job.rope.k_plane = kv_plane_of(kv.seq(), layer, 0);
  job.rope.v_plane = kv_plane_of(kv.seq(), layer, 1);
  job.rope.n_half = ra.n_half;
  job.rope.head_dim = ra.head_dim;
  job.rope.rope_dim = ra.rope_dim;
  job.rope.kv_dim = int(opts_.kv_dim);
  job.rope.f16 = opts_.kv_type == GgmlType::F16;
  const cuda::Q8 q8 = q8_view(q8_of(dx, 1, dws[0]->n_in));
  launch(norm ? k_matvec_norm_.name.c_str() : k_qkv_rope_.name.c_str(),
         [&](cudaStream_t s) { cuda::matvec_q8(job, q8, s); });
  for (int i = 0; i < 3; ++i) dev_done(ys[i], n_out[i], job.y[i]);
  return true;
}

void CudaBackend::matmul_rope_kv_store(const Weight* const* wqkv, const float* x, int64_t n_tok, float* q,
                                       float* k, float* v, KvCache& kv, int64_t layer, const int32_t* pos,
                                       const RopeShape& r) {
  float* ys[3] = {q, k, v};
  if (n_tok == 1 && mode_ != StepMode::Replaying && record_qkv_rope(wqkv, x, ys, kv, layer, pos, r)) {
    step_ops_ += 6;  // the reference's three products and rope_kv_store's three ops, as a replay counts them
    return;
  }
  Backend::matmul_rope_kv_store(wqkv, x, n_tok, q, k, v, kv, layer, pos, r);
}

}  // namespace tilellm
