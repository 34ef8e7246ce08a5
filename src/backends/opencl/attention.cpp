// Causal attention over the device FB-KV cache (attention.cl): one work-group of 32 x split items per (token,
// head).
#include "backends/opencl/opencl_backend.h"
#include "format/error.h"

namespace tilellm {

void OpenclBackend::enqueue_attention(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx,
                                      int64_t kv_dim, int64_t n_tok, const AttnParams& p,
                                      const opencl::Buffer& q, const opencl::Buffer& pos,
                                      const opencl::Buffer& out) {
  constexpr size_t kBlock = 32;  // TL_ATTN_BLOCK: keys per block, and items per split
  const opencl::Kernel& k = k_attention_;
  // Items per key: the most of 8, 4, 2 that divides head_dim into float4 steps and fits the kernel's
  // work-group limit and local memory; 1 always works.
  size_t split = 1;
  for (size_t s : {8, 4, 2}) {
    const size_t bytes = (2 * size_t(p.head_dim) + kBlock + kBlock * s) * sizeof(float);
    if (p.head_dim % int64_t(4 * s) == 0 && kBlock * s <= k.max_wg && bytes <= caps().local_mem_bytes) {
      split = s;
      break;
    }
  }
  const size_t wg = kBlock * split;
  const size_t local_bytes = (2 * size_t(p.head_dim) + kBlock + wg) * sizeof(float);
  if (local_bytes > caps().local_mem_bytes) {
    fail(
        "OpenCL backend: attention with head size {} needs {} bytes of local memory; the device (profile {}) "
        "has {}",
        p.head_dim, local_bytes, caps().profile, caps().local_mem_bytes);
  }
  const cl_ulong off = layer_off;
  const cl_int ctx = cl_int(n_ctx), d = cl_int(kv_dim), n_head = cl_int(p.n_head),
               group = cl_int(p.n_head / p.n_head_kv), hd = cl_int(p.head_dim), window = cl_int(p.window),
               sp = cl_int(split);
  opencl::set_arg(k, 0, q);
  opencl::set_arg(k, 1, cache);
  opencl::set_arg(k, 2, off);
  opencl::set_arg(k, 3, ctx);
  opencl::set_arg(k, 4, d);
  opencl::set_arg(k, 5, pos);
  opencl::set_arg(k, 6, n_head);
  opencl::set_arg(k, 7, group);
  opencl::set_arg(k, 8, hd);
  opencl::set_arg(k, 9, p.scale);
  opencl::set_arg(k, 10, window);
  opencl::set_arg(k, 11, sp);
  opencl::set_arg(k, 12, out);
  opencl::set_local_arg(k, 13, size_t(p.head_dim) * sizeof(float));
  opencl::set_local_arg(k, 14, size_t(p.head_dim) * sizeof(float));
  opencl::set_local_arg(k, 15, kBlock * sizeof(float));
  opencl::set_local_arg(k, 16, wg * sizeof(float));
  const size_t global[1] = {size_t(n_tok * p.n_head) * wg}, local[1] = {wg};
  rt_.launch(k, 1, global, local);
}

void OpenclBackend::attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos,
                              int64_t n_tok, const AttnParams& p, float* out) {
  if (kv_on_cpu()) {
    host_in(q, n_tok * p.n_head * p.head_dim);
    host_out(out, n_tok * p.n_head * p.head_dim);
    return cpu_->attention(q, kv, layer, pos, n_tok, p, out);
  }
  if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.n_head_kv * p.head_dim != kv.kv_dim()) {
    fail("attention: {} heads over {} KV heads of size {} do not fit a cache row of {}", p.n_head,
         p.n_head_kv, p.head_dim, kv.kv_dim());
  }
  check_kv(kv, layer, pos, n_tok, "attention");
  if (n_tok <= 0) return;
  const int64_t elems = n_tok * p.n_head * p.head_dim;
  const opencl::Buffer& qb = dev_in(q, elems, in_a_, "attention");
  const opencl::Buffer& pb = dev_positions(pos, n_tok);
  const opencl::Buffer& ob = dev_out(out, elems, out_, "attention");
  uint64_t off = 0;
  const opencl::Buffer& buf = kv_buffer(layer, off);
  enqueue_attention(buf, off, kv.n_ctx(), kv.kv_dim(), n_tok, p, qb, pb, ob);
  dev_done(out, elems, ob);
}

}  // namespace tilellm
