// Writes new K/V rows into the device FB-KV cache (kv_store.cl); the host cache is not touched, unless the
// KV kernels failed the self-check, in which case both KV ops run on the CPU over the host cache.
#include "backends/opencl/opencl_backend.h"

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
  const opencl::Buffer& buf = kv_buffer(layer, off);
  enqueue_kv_store(buf, off, kv.n_ctx(), d, n_tok, kb, vb, pb);
}

}  // namespace tilellm
