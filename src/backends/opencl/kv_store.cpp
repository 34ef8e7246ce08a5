// Writes new K/V rows into the device FB-KV cache (kv_store.cl), alone or with the layer's RoPE in one
// launch, or (decode, Norm mode) from inside the q/k/v products' launch (quants.cl); the host cache is not
// touched, unless the KV kernels failed the self-check, in which case both KV ops run on the CPU over the
// host cache.
#include <optional>

#include "backends/opencl/opencl_backend.h"
#include "base/error.h"

namespace tilellm {

void OpenclBackend::enqueue_kv_store(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx,
                                     int64_t kv_dim, int64_t n_tok, const opencl::Buffer& k,
                                     const opencl::Buffer& v, const opencl::Buffer& pos) {
  const opencl::Kernel& kk = k_kv_store_;
  const cl_ulong off = layer_off;
  const cl_int ctx = cl_int(n_ctx), d = cl_int(kv_dim), nt = cl_int(n_tok);
  opencl::set_arg(kk, 0, cache);
  opencl::set_arg(kk, 1, off);
  opencl::set_arg(kk, 2, ctx);
  opencl::set_arg(kk, 3, d);
  opencl::set_arg(kk, 4, k);
  opencl::set_arg(kk, 5, v);
  opencl::set_arg(kk, 6, pos);
  opencl::set_arg(kk, 7, nt);
  const size_t global[2] = {size_t(kv_dim), size_t(n_tok)};
  rt_.launch(kk, 2, global, nullptr);
}

void OpenclBackend::kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                             int64_t n_tok) {
  if (kv_on_cpu()) {
    host_in(k, n_tok * kv.kv_dim());
    host_in(v, n_tok * kv.kv_dim());
    return cpu_->kv_store(kv, layer, k, v, pos, n_tok);
  }
  check_kv(kv, layer, pos, n_tok, "kv_store");
  if (n_tok <= 0) return;
  const int64_t d = kv.kv_dim();
  const opencl::Buffer& kb = dev_in(k, n_tok * d, in_a_, "kv_store");
  const opencl::Buffer& vb = dev_in(v, n_tok * d, in_b_, "kv_store");
  const opencl::Buffer& pb = dev_positions(pos, n_tok);
  uint64_t off = 0;
  const opencl::Buffer& buf = kv_buffer(kv, layer, off);
  enqueue_kv_store(buf, off, kv.n_ctx(), d, n_tok, kb, vb, pb);
}

void OpenclBackend::enqueue_rope_kv_store(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx,
                                          int64_t n_tok, const RopeShape& r, const opencl::Buffer& q,
                                          const opencl::Buffer& k, const opencl::Buffer& v,
                                          const opencl::Buffer& rows, const opencl::Buffer& pos) {
  const opencl::Kernel& kk = k_rope_kv_store_;
  const cl_int nt = cl_int(n_tok), nh = cl_int(r.n_head), nkv = cl_int(r.n_head_kv), hd = cl_int(r.head_dim),
               half = cl_int(r.table->n_half), neox = r.mode == RopeMode::Neox ? 1 : 0, ctx = cl_int(n_ctx);
  const cl_ulong off = layer_off;
  opencl::set_arg(kk, 0, q);
  opencl::set_arg(kk, 1, k);
  opencl::set_arg(kk, 2, v);
  opencl::set_arg(kk, 3, rows);
  opencl::set_arg(kk, 4, nt);
  opencl::set_arg(kk, 5, nh);
  opencl::set_arg(kk, 6, nkv);
  opencl::set_arg(kk, 7, hd);
  opencl::set_arg(kk, 8, half);
  opencl::set_arg(kk, 9, neox);
  opencl::set_arg(kk, 10, cache);
  opencl::set_arg(kk, 11, off);
  opencl::set_arg(kk, 12, ctx);
  opencl::set_arg(kk, 13, pos);
  const size_t global[3] = {size_t(r.head_dim / 2), size_t(r.n_head + 2 * r.n_head_kv), size_t(n_tok)};
  rt_.launch(kk, 3, global, nullptr);
}

void OpenclBackend::rope_kv_store(float* q, float* k, const float* v, KvCache& kv, int64_t layer,
                                  const int32_t* pos, int64_t n_tok, const RopeShape& r) {
  const RopeTable& table = *r.table;
  const int64_t nq = n_tok * r.n_head * r.head_dim, nk = n_tok * r.n_head_kv * r.head_dim;
  // One launch when every kernel it stands for is trusted, the shapes are the kernel's (whole pairs, the
  // table's width) and q, k, v are device arrays of their own (the staging buffers are too few for three);
  // anything else, the unfused ops, whose checks and fallbacks then apply.
  const bool one = n_tok > 0 && !k_rope_kv_store_.on_cpu && !k_rope_.on_cpu && !kv_on_cpu() &&
                   r.fusable(kv.kv_dim()) && 2 * table.n_half <= opts_.max_width && is_mirror_start(q, nq) &&
                   is_mirror_start(k, nk) && is_mirror_start(v, nk);
  if (!one) return Backend::rope_kv_store(q, k, v, kv, layer, pos, n_tok, r);
  check_kv(kv, layer, pos, n_tok, "rope_kv_store");
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] >= table.n_pos) fail("position {} is outside the RoPE table of {}", pos[t], table.n_pos);
  }
  const opencl::Buffer& rows = dev_rope_rows(table, pos, n_tok);
  const opencl::Buffer& qb = dev_in(q, nq, in_a_, "rope_kv_store");
  const opencl::Buffer& kb = dev_in(k, nk, in_b_, "rope_kv_store");
  const opencl::Buffer& vb = dev_in(v, nk, in_b_, "rope_kv_store");
  const opencl::Buffer& pb = dev_positions(pos, n_tok);
  uint64_t off = 0;
  const opencl::Buffer& buf = kv_buffer(kv, layer, off);
  enqueue_rope_kv_store(buf, off, kv.n_ctx(), n_tok, r, qb, kb, vb, rows, pb);
  dev_done(q, nq, qb);
  dev_done(k, nk, kb);
}

void OpenclBackend::matmul_rope_kv_store(const Weight* const* wqkv, const float* x, int64_t n_tok, float* q,
                                         float* k, float* v, KvCache& kv, int64_t layer, const int32_t* pos,
                                         const RopeShape& r) {
  float* ys[3] = {q, k, v};
  // One launch when the unfused ops' kernels are trusted (rope_kv_store's check covers this path too), the
  // pairs are Norm mode's (adjacent, so a group's four rows hold whole pairs of one head), the shapes are
  // q's heads and the cache's rows, and q, k, v go in one matvec launch (one block format, device arrays).
  const bool one = n_tok == 1 && r.mode == RopeMode::Norm && r.head_dim % 4 == 0 &&
                   !k_rope_kv_store_.on_cpu && !k_rope_.on_cpu && !kv_on_cpu() && r.fusable(kv.kv_dim()) &&
                   2 * r.table->n_half <= opts_.max_width && wqkv[0]->n_out == r.n_head * r.head_dim &&
                   wqkv[1]->n_out == kv.kv_dim() && wqkv[2]->n_out == kv.kv_dim() &&
                   matvec_run(wqkv, ys, 3, n_tok) == 3;
  if (!one) return Backend::matmul_rope_kv_store(wqkv, x, n_tok, q, k, v, kv, layer, pos, r);
  check_kv(kv, layer, pos, n_tok, "rope_kv_store");
  if (pos[0] >= r.table->n_pos) fail("position {} is outside the RoPE table of {}", pos[0], r.table->n_pos);
  const int64_t n_in = wqkv[0]->n_in;
  const std::optional<PendingNorm> pending = scaled_input(wqkv, 3, x, n_in, n_tok);
  const opencl::Buffer& xb = dev_in(x, n_in, in_a_, "matmul", pending.has_value());
  const DeviceWeight* dws[3];
  const opencl::Buffer* ybs[3];
  for (int j = 0; j < 3; ++j) {
    dws[j] = &find_weight(*wqkv[j], "matmul");
    ybs[j] = &dev_out(ys[j], dws[j]->n_out, out_, "matmul");
  }
  const opencl::Buffer& rows = dev_rope_rows(*r.table, pos, n_tok);
  const opencl::Buffer& pb = dev_positions(pos, n_tok);
  uint64_t off = 0;
  const opencl::Buffer& cache = kv_buffer(kv, layer, off);
  const RopeKv rope{&rows, int(r.head_dim), int(r.table->n_half), &cache, off, kv.n_ctx(), &pb};
  enqueue_matvec_blocks(dws, ybs, 3, xb, pending ? &*pending : nullptr, nullptr, &rope, x);
  for (int j = 0; j < 3; ++j) dev_done(ys[j], dws[j]->n_out, *ybs[j]);
}

}  // namespace tilellm
