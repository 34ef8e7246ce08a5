// The OpenCL backend: every op of backends/backend.h on an OpenCL 1.2+ device, one host file and one kernel
// file per op (embedding, rmsnorm, matmul, rope, kv_store, attention, glu, add), each the CPU backend's float
// path computed on the device (exact dequantized weights, float32 arithmetic).
//
// Memory (all allocated in the constructor and upload_*; nothing is allocated while ops run):
//  - Weights: uploaded once into one device buffer each, keyed by the host Weight's data pointer. Q4_0, Q4_1,
//    Q8_0, F16 and F32 keep their block format; every other type (Q5_0, Q5_1, K-quants, BF16) is dequantized
//    at upload to F32, exactly (docs/OPENCL.md).
//  - FB-KV on the device: [layer][K|V][pos < n_ctx][kv_dim] in the cache type, one buffer when it fits the
//    device's largest allocation, else whole layers split over as few buffers as fit. The host KvCache passed
//    to kv_store/attention only supplies (and must match) the geometry; its memory is not used.
//  - Self-check: at construction every kernel runs a small random case against the CPU backend; a kernel that
//    fails is replaced by the CPU backend for its op, with a warning naming it (self_check.cpp).
//  - Activations stay on the host (the Backend interface): each op copies its inputs into fixed device
//    scratch buffers and its outputs back. This per-op transfer is the known cost of this first version.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/opencl/device.h"

namespace tilellm {

struct OpenclBackendOptions {
  int device = 0;                // index into opencl::list_devices()
  std::string profile = "none";  // opencl::profiles() name
  int64_t max_tokens = 64;       // most tokens in one op call (the session's batch)
  int64_t max_in_elems = 0;      // largest op input in floats (n_tok * widest activation)
  int64_t max_out_elems = 0;     // largest op output in floats (also covers the logits)
  int64_t max_width = 0;         // longest norm weight vector / RoPE table row, in floats
  // Geometry of the device FB-KV cache.
  int64_t kv_layers = 0, kv_ctx = 0, kv_dim = 0;
  GgmlType kv_type = GgmlType::F16;
  // Most bytes in one KV buffer; 0: the device's largest allocation. Lower values split the cache sooner
  // (tests of the split use it; so could a driver whose large allocations are slow).
  uint64_t kv_max_buffer_bytes = 0;
  // Run the self-check at construction (tests of the kernels themselves turn it off).
  bool self_check = true;
  // Test hook: replaces the kernel named `test_kernel_name` by one of that name built from
  // `test_kernel_source` (after the usual header and helpers), before the self-check runs, so a test can
  // show a broken kernel caught. Empty: no replacement.
  std::string test_kernel_name, test_kernel_source;
};

class OpenclBackend final : public Backend {
 public:
  // Tokens one matmul work-group multiplies (TL_MM_TILE in the kernels): each weight block is decoded once
  // per tile of tokens rather than once per token.
  static constexpr int kMatmulTile = 4;

  explicit OpenclBackend(const OpenclBackendOptions& o);
  std::string_view name() const override { return "opencl"; }
  const opencl::Capabilities& caps() const { return rt_.caps(); }

  // Uploads one weight matrix (or embedding table), keyed by its data pointer, which must stay valid and
  // unchanged while the backend lives (the mapped model file); ops on a weight not uploaded throw.
  void upload_weight(const Weight& w);
  // Uploads every matrix of a model (the tied output shares the embedding's buffer).
  void upload_model(const ModelWeights& mw);
  // Names of the kernels that failed the self-check and whose ops run on the CPU backend.
  std::vector<std::string> cpu_fallbacks() const;
  // Device buffers the KV cache is split over (1 unless one buffer cannot hold it).
  size_t kv_buffers() const { return kv_bufs_.size(); }
  // Copies the device KV cache into a host cache of the same geometry (tests; moving KV between backends).
  void read_kv(KvCache& kv) const;

  void embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) override;
  void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) override;
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override;
  void matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tok) override;
  void rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const int32_t* pos,
            const RopeTable& table, RopeMode mode) override;
  void kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                int64_t n_tok) override;
  void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                 const AttnParams& p, float* out) override;
  void glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) override;
  void add(float* acc, const float* x, int64_t n) override;

 private:
  struct DeviceWeight {
    opencl::Buffer buf;  // [n_out][row_bytes] in `type`
    GgmlType type;       // as stored on the device (the host type, or F32 when dequantized at upload)
    GgmlType host_type;  // as in the model file
    size_t row_bytes;
    int64_t n_in, n_out;
  };
  DeviceWeight make_device_weight(const Weight& w);
  const DeviceWeight& find_weight(const Weight& w, const char* op) const;
  opencl::Kernel& matmul_kernel(GgmlType device_type);
  opencl::Kernel& embed_kernel(GgmlType device_type);
  std::vector<opencl::Kernel*> all_kernels();
  // The KV ops share the cache: if either kernel failed, both run on the CPU over the host cache.
  bool kv_on_cpu() const { return k_kv_store_.on_cpu || k_attention_.on_cpu; }
  // Enqueue the KV kernels on an explicit cache buffer (the session's, or the self-check's own). kv_store
  // reads k from in_a_, v from in_b_, positions from ints_; attention reads q from in_a_, positions from
  // ints_ and writes out_.
  void enqueue_kv_store(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx, int64_t kv_dim,
                        int64_t n_tok);
  void enqueue_attention(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx, int64_t kv_dim,
                         int64_t n_tok, const AttnParams& p);
  void run_self_check();
  // Enqueues y = W x for x already in in_a_, writing out_.
  void enqueue_matmul(const DeviceWeight& dw, int64_t n_tok);
  // The work-group size of a reduction kernel: the largest power of two within the kernel's and device's
  // limits, the local memory it needs (`local_floats_per_item` floats per item) and `want`.
  size_t reduction_wg(const opencl::Kernel& k, size_t want, size_t local_floats_per_item) const;
  void check_in(int64_t elems, const char* op) const;
  void check_out(int64_t elems, const char* op) const;
  void check_tokens(int64_t n_tok, const char* op) const;
  void check_kv(const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok, const char* op) const;
  // The device buffer holding `layer` and the element offset of its K plane in it.
  const opencl::Buffer& kv_buffer(int64_t layer, uint64_t& layer_off) const;

  OpenclBackendOptions opts_;
  opencl::Runtime rt_;

  // One program built from every op file; kernels chosen by weight type / activation / cache type.
  opencl::ProgramHandle program_;
  opencl::ProgramHandle test_program_;  // the test hook's replacement kernel, when set
  opencl::Kernel k_embed_[5], k_matmul_[5];
  opencl::Kernel k_rmsnorm_, k_rope_, k_kv_store_, k_attention_, k_glu_silu_, k_glu_gelu_, k_add_;

  std::unordered_map<const uint8_t*, DeviceWeight> weights_;  // by host Weight::data

  // The CPU reference for the self-check, kept as the fallback of ops whose kernel failed it (float path).
  std::unique_ptr<ThreadPool> cpu_pool_;
  std::unique_ptr<CpuBackend> cpu_;

  // Scratch, sized once from the options.
  opencl::Buffer in_a_, in_b_;  // [max_in_elems] floats: op inputs
  opencl::Buffer out_;          // [max_out_elems] floats: op outputs
  opencl::Buffer vec_;          // [max_width] floats: a norm weight vector
  opencl::Buffer ints_;         // [max_tokens] int32: token ids or positions
  opencl::Buffer rope_rows_;    // [max_tokens][max_width] floats: RoPE table rows of the call's positions

  // Device FB-KV: kv_bufs_[b] holds layers [b * layers_per_buf_, ...), each [K|V][n_ctx][kv_dim].
  std::vector<opencl::Buffer> kv_bufs_;
  int64_t layers_per_buf_ = 0;
};

}  // namespace tilellm
