// Writes new K/V rows into the device FB-KV cache (kv_store.cl); the host cache is not touched, unless the
// KV kernels failed the self-check, in which case both KV ops run on the CPU over the host cache.
#include "backends/opencl/opencl_backend.h"

namespace tilellm {

void OpenclBackend::enqueue_kv_store(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx,
                                     int64_t kv_dim, int64_t n_tok) {
  const opencl::Kernel& kk = k_kv_store_;
  const cl_ulong off = layer_off;
  const cl_int ctx = cl_int(n_ctx), d = cl_int(kv_dim), nt = cl_int(n_tok);
  opencl::set_arg(kk, 0, cache);
  opencl::set_arg(kk, 1, off);
  opencl::set_arg(kk, 2, ctx);
  opencl::set_arg(kk, 3, d);
  opencl::set_arg(kk, 4, in_a_);
  opencl::set_arg(kk, 5, in_b_);
  opencl::set_arg(kk, 6, ints_);
  opencl::set_arg(kk, 7, nt);
  const size_t global[2] = {size_t(kv_dim), size_t(n_tok)};
  rt_.launch(kk, 2, global, nullptr);
}

void OpenclBackend::kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                             int64_t n_tok) {
  if (kv_on_cpu()) return cpu_->kv_store(kv, layer, k, v, pos, n_tok);
  check_kv(kv, layer, pos, n_tok, "kv_store");
  if (n_tok <= 0) return;
  const int64_t d = kv.kv_dim();
  check_in(n_tok * d, "kv_store");
  rt_.write(in_a_, 0, k, size_t(n_tok * d) * sizeof(float));
  rt_.write(in_b_, 0, v, size_t(n_tok * d) * sizeof(float));
  rt_.write(ints_, 0, pos, size_t(n_tok) * sizeof(int32_t));
  uint64_t off = 0;
  const opencl::Buffer& buf = kv_buffer(layer, off);
  enqueue_kv_store(buf, off, kv.n_ctx(), d, n_tok);
  // The host arrays k, v, pos may change once we return; the writes above must have completed.
  rt_.finish();
}

}  // namespace tilellm
