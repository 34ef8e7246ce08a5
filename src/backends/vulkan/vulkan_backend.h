// The Vulkan backend: every op of backends/backend.h on a Vulkan 1.1 device, one host file and one compute
// shader per op (embedding, rmsnorm, matmul with matvec for one token of a block format, rope, kv_store,
// rope_kv_store, attention, glu, add), each the CPU backend's float path computed on the device (exact
// dequantized weights, float32 arithmetic) — except one-token products of the block formats under
// --activations q8 (the default) on a device with integer dot products: their input rounded to int8 per
// block of 32 as the CUDA backend rounds it (shaders/q8.glsl), the products in integers (matvec_q8.comp;
// the gate and up products with the gated unit and its output's rounding in one dispatch,
// matvec_q8_glu.comp).
//
// Memory (all allocated in the constructor and load_weights; nothing is allocated while ops run):
//  - Weights: one device buffer each, keyed by the host Weight's data pointer, in the device formats every
//    GPU backend shares (backends/device_rows.h): Q4_0, Q4_1, Q8_0 as split rows, F16 and F32 as in the
//    file, Q4_K as KQ4, Q5_K, Q6_K, Q5_0 and Q5_1 as KQ8 (exact), every other type dequantized to F32;
//    with --weights int4b64 / int8b0 / f16 / f32 every matrix converted (the embedding table keeps its GGUF
//    type for the lookup, as on the CPU). A matrix larger than the device's largest allocation or storage
//    buffer range is split by rows over several buffers (a matmul then runs one dispatch per buffer).
//    Under --gpu-memory image each matrix that fits the device's 2D image limits is one RGBA32UI image
//    instead (backends/image_plan.h; the products' _image shader variants read it through the texture path);
//    the embedding table and what does not fit stay buffers, each with a note naming why.
//  - FB-KV on the device: [seq < kv_seqs][layer][K|V][pos < n_ctx][kv_dim] in the cache type (f16 or f32;
//    one cache per sequence of a BatchSession, the KvCache handed to an op naming its own), whole layers
//    in as few buffers as the allocation and storage-range limits allow; under --kv-memory image (f16) in
//    RGBA16F storage images instead (shaders/kv.glsl: a position's row one line of kv_dim / 4 texels), whole
//    layers in as few images as the 2D image side and the allocation limit allow; the KV shaders then run
//    their _kvimage variants.
//  - Activations are device-resident, as on OpenCL (opencl_backend.h describes the scheme): the session's
//    activation scratch is mirrored by device buffers of the same size; per array the backend tracks the
//    byte range where one copy is newer, and copies only what the other side needs, so a forward pass reads
//    back only the logits (and what a CPU-fallback op needs). Operands at an offset into a mirror, and
//    pointers outside every mirror, go through fixed scratch buffers.
//  - Recording: every op records its dispatches into the runtime's command buffer (runtime.h); nothing is
//    submitted until the host reads something back.
//  - Decode without per-token recording: a decode step (ForwardStep::decode) is captured into a command
//    buffer of its own the first time; each following step that repeats it (same_as_last) replays that
//    buffer. What changes between steps comes from device memory the replay refreshes: the token id and the
//    position (the runtime's step inputs), and what the shaders derive from them (the RoPE rows are looked up
//    in the whole table on the device, attention's key count is pos + 1, the KV rows are addressed by pos).
//    The ops of a replayed step only write those inputs and count themselves; end_forward() submits the
//    buffer and the logits land where the recorded step put them. A step that cannot be captured whole (a
//    staged upload, a CPU-fallback op, profiling on) runs as ordinary recorded work.
//  - Self-check: at construction every pipeline runs a small random case against the host backend (float
//    path); a pipeline that fails is replaced by the host backend for its op, with a warning naming it.
//  - Shader variants come from the capability struct only: the subgroup reductions where compute shaders
//    have subgroup arithmetic, the local sizes from the invocation and shared-memory limits, the integer
//    decode products (activations rounded to int8 per block of 32, --activations q8) where the device has
//    integer dot products.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/device_options.h"
#include "backends/device_rows.h"
#include "backends/host_mirrors.h"
#include "backends/modes.h"
#include "backends/program_cache.h"
#include "backends/vulkan/runtime.h"
#include "base/thread_pool.h"

namespace tilellm {

// The device (DeviceOptions::device) indexes vulkan::list_devices().
struct VulkanBackendOptions : DeviceOptions {
  std::string profile = "none";  // vulkan::profiles() name
  // Image: weight matrices in 2D images read through the texture path (shaders/weights.glsl), each that fits
  // the device's image limits; the rest (and the embedding table) stay buffers, one note each on stderr.
  GpuMemory memory = GpuMemory::Buffer;
  uint32_t image_max = 0;  // a lower 2D image side than the device's (tests of the fallback); 0: none
  KvMemory kv_memory = KvMemory::Buffer;  // Image: the KV cache in RGBA16F images (f16 only)
  // Quantized: one-token products of the block formats in integers (shaders/matvec_q8.comp) where the
  // device has integer dot products; F32: the float path everywhere.
  ActivationMode activations = ActivationMode::Quantized;
  uint64_t kv_max_buffer_bytes = 0;  // most bytes in one KV buffer; 0: the device's limits
  // Most bytes in one weight buffer; 0: the device's limits (tests of the split by rows lower it).
  uint64_t max_buffer_bytes = 0;
  // Use the subgroup reductions where the device has them (tests turn it off to run the shared-memory
  // path on a device that has both).
  bool subgroups = true;
  // The decode matvec's shape (shaders/matvec.comp): rows a work-group, parts a block of 32 weights is
  // split into, invocations a group, parts each invocation loads at once; 0: the default. matvec_groups > 0:
  // at most that many groups a dispatch, each taking several row groups (0: one group per row group).
  uint32_t matvec_rows = 0, matvec_parts = 0, matvec_local = 0, matvec_unroll = 0, matvec_groups = 0;
  // Prompts on cooperative matrices (shaders/matmul_coopmat.comp) where the device has them; off: the
  // float tiles of matmul.comp (--vk-coopmat).
  bool coopmat = true;
  // Test hook: replaces the pipeline named `test_pipeline` by one built from `test_spirv` (same bindings
  // and push constants) before the self-check, so a test can show a broken shader caught.
  std::string test_pipeline;
  std::vector<uint32_t> test_spirv;
  // Test hook: the cooperative-matrix GEMM built from these words on any device with subgroups (the test
  // build of matmul_coopmat.comp that emulates the matrix operations, TL_CM_EMULATE), so its tiling runs
  // where no driver has cooperative matrices.
  std::vector<uint32_t> coopmat_test_spirv;
  // The pipeline cache on disk (backends/program_cache.h: the driver's pipeline cache data and the
  // self-check's verdict). Off unless asked for, so that a backend a test or a library caller makes touches
  // no disk; the CLI turns it on (--vk-cache).
  ProgramCacheOptions cache;
};

class VulkanBackend final : public Backend {
 public:
  explicit VulkanBackend(const VulkanBackendOptions& o);
  ~VulkanBackend() override;
  VulkanBackend(const VulkanBackend&) = delete;
  VulkanBackend& operator=(const VulkanBackend&) = delete;
  std::string_view name() const override { return "vulkan"; }
  const vulkan::Capabilities& caps() const { return rt_.caps(); }
  vulkan::Runtime& runtime() { return rt_; }

  void load_weights(const WeightSet& ws) override;
  void upload_weight(const Weight& w);
  void begin_forward(const ForwardStep& step) override;

  // Names of the pipelines that failed the self-check (their ops run on the host backend).
  std::vector<std::string> cpu_fallbacks() const;
  // Which start path this backend took: the driver took cached pipeline data (else every pipeline was built
  // cold), and the self-check's verdict came from the cache (else it ran here, or was turned off).
  bool pipelines_from_cache() const { return pipelines_from_cache_; }
  bool verdict_from_cache() const { return verdict_from_cache_; }
  size_t kv_buffers() const { return kv_bufs_.size(); }
  size_t kv_images() const { return kv_imgs_.size(); }
  // Buffers an uploaded matrix is split over (1 unless it exceeds one buffer's limits; 0 when in an image).
  size_t weight_buffers(const Weight& w) const { return find_weight(w, "weight_buffers").bufs.size(); }
  // --gpu-memory image: the matrices held in images, and one line for each that stays a buffer and why.
  size_t image_weights() const;
  const std::vector<std::string>& buffer_weights() const { return buffer_weights_; }
  void to_host(const void* p, size_t bytes);
  void host_wrote(void* p, size_t bytes);
  void read_kv(KvCache& kv) { copy_kv(kv, 0, opts_.kv_ctx, false); }
  void kv_to_device(const KvCache& kv, int64_t p0, int64_t p1) override { copy_kv(kv, p0, p1, true); }
  void kv_to_host(KvCache& kv, int64_t p0, int64_t p1) override { copy_kv(kv, p0, p1, false); }
  bool needs_host_kv() const override { return kv_on_cpu(); }
  std::string memory_summary() const override;
  std::string files_dir() const override { return cache_files_dir(opts_.cache, "vulkan"); }

  void embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) override;
  void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) override;
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override;
  // One token of a block format on the integer path: x rounded as matvec_q8.comp rounds it
  // (backends/q8_round.h); otherwise x as it is.
  void rounded_matmul_input(const Weight& w, const float* x, int64_t n_tok, float* out) const override;
  // Whether a product of uploaded weight w over n_tok tokens runs on cooperative matrices (fp16 operands).
  bool on_cooperative_matrices(const Weight& w, int64_t n_tok) const {
    return uses_coopmat(find_weight(w, "on_cooperative_matrices"), n_tok);
  }
  // The products with one input (q/k/v, gate/up) recorded without barriers between them when every output
  // is a mirrored array of its own (nothing to copy after one of them); else one by one.
  void matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tok) override;
  void rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const int32_t* pos,
            const RopeTable& table, RopeMode mode) override;
  void rope_kv_store(float* q, float* k, const float* v, KvCache& kv, int64_t layer, const int32_t* pos,
                     int64_t n_tok, const RopeShape& r) override;
  void kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                int64_t n_tok) override;
  void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                 const AttnParams& p, float* out) override;
  void glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) override;
  void matmul_glu(const Weight& w_gate, const Weight& w_up, const float* x, int64_t n_tok, FfnAct act,
                  float* out, float* up) override;
  void add(float* acc, const float* x, int64_t n) override;
  void add_rows(float* x, const float* v, int64_t n_rows, int64_t n) override;
  void add_rmsnorm(float* acc, const float* x, const float* w, float* y, int64_t n_rows, int64_t n,
                   float eps) override;
  void end_forward() override;
  // Decode steps replayed from a capture, and captures made (tests: a decode loop records once).
  uint64_t replayed_steps() const { return replayed_; }
  uint64_t captured_steps() const { return captured_; }
  std::vector<KernelTime> kernel_times() const override { return rt_.kernel_times(); }
  void reset_kernel_times() override { rt_.reset_kernel_times(); }
  PassTimes pass_times() const override { return pass_times_; }
  void reset_pass_times() override { pass_times_ = {}; }

 private:
  // A matrix in buffers of whole rows: bufs[b] holds rows [b * rows_per_buf, ...) as [rows][row_bytes] in
  // fmt (device_rows.h); more than one only when the matrix exceeds the device's largest allocation or
  // storage-buffer range (lavapipe's range is 128 MiB: Gemma 3's embedding table is larger).
  // Or, on the image path, the whole matrix in one image (bufs empty): row r's device bytes start at line
  // r * L, the row's span of img_span = 16 W L bytes is what the shaders take as row_bytes (weights.glsl).
  struct DeviceWeight {
    std::vector<vulkan::Buffer> bufs;
    vulkan::Image img;
    uint32_t img_width = 0, img_span = 0;
    int64_t rows_per_buf = 0;
    DeviceFormat fmt;
    GgmlType host_type;
    size_t row_bytes;
    int64_t n_in, n_out;
  };
  // may_image: the weight may go into an image (--gpu-memory image; never the embedding table, whose
  // lookup reads a buffer).
  DeviceWeight make_device_weight(const Weight& w, WeightsMode mode, bool may_image = false);
  bool make_weight_image(DeviceWeight& dw, const std::string& name, DeviceRowWriter& rows);
  void upload_weight(const Weight& w, bool may_image);
  std::vector<std::string> buffer_weights_;
  const DeviceWeight& find_weight(const Weight& w, const char* op) const;

  // Pipelines. The matmul ones per device format: prefill (4 tokens a group) and decode (1).
  vulkan::Pipeline p_embed_[kDeviceFormats], p_matmul_[kDeviceFormats], p_matvec_[kDeviceFormats];
  vulkan::Pipeline p_rmsnorm_, p_add_rmsnorm_, p_rope_, p_kv_store_, p_rope_kv_store_, p_attention_,
      p_glu_silu_, p_glu_gelu_, p_add_;
  // The integer decode matvecs (shaders/matvec_q8.comp) per block format, where the device has integer dot
  // products and --activations q8; their input rounded first by p_quantize_ into q8x_.
  vulkan::Pipeline p_matvec_q8_[kDeviceFormats], p_quantize_;
  // The gate and up products of one token with the gated unit and its output's rounding in one dispatch
  // (shaders/matvec_q8_glu.comp), per block format and activation (0 SiLU, 1 GELU-tanh), under the same
  // conditions; the rounding goes to q8y_, which then trades places with q8x_ (the dispatch reads q8x_).
  vulkan::Pipeline p_matmul_glu_q8_[kDeviceFormats][2];
  uint32_t glu_rows_ = 2;  // rows of each matrix a group of it takes (matvec_q8_glu.comp's TL_ROWS)
  // Whether matmul_glu of these weights takes p_matmul_glu_q8_ (the same answer while a capture replays).
  vulkan::Pipeline* fused_glu(const DeviceWeight& g, const DeviceWeight& u, FfnAct act, const float* x,
                              const float* out);
  bool q8_paused_ = false;  // the self-check's float-matvec case: the integer path left out
  // Prompts of at least kCoopmatMinTokens tokens on cooperative matrices (shaders/matmul_coopmat.comp:
  // tiles of kCoopmatRows rows x kCoopmatTokens tokens, eight subgroups), where the device has the shape
  // (Capabilities::coopmat_f16); fp16 products, so their self-check bound is kHalfTolerance.
  vulkan::Pipeline p_matmul_cm_[kDeviceFormats];
  // The same four products reading a weight held in an image (the shaders' _image variants), built under
  // --gpu-memory image on a device that samples RGBA32UI images; product() picks a weight's.
  vulkan::Pipeline p_matmul_img_[kDeviceFormats], p_matvec_img_[kDeviceFormats],
      p_matvec_q8_img_[kDeviceFormats], p_matmul_cm_img_[kDeviceFormats];
  enum class Product { Matmul, Matvec, MatvecQ8, Coopmat };
  vulkan::Pipeline& product(Product k, const DeviceWeight& dw);
  const vulkan::Pipeline& product(Product k, const DeviceWeight& dw) const {
    return const_cast<VulkanBackend*>(this)->product(k, dw);
  }
  static constexpr int64_t kCoopmatRows = 128, kCoopmatTokens = 128, kCoopmatMinTokens = 16;
  // The self-check's product: a whole tile and a part in both directions (its rows a multiple of 4, so
  // that the whole tile's matrices are stored straight into the output).
  static constexpr int64_t kCoopmatCheckTokens = kCoopmatTokens + 6, kCoopmatCheckRows = kCoopmatRows + 8;
  bool uses_coopmat(const DeviceWeight& dw, int64_t n_tok) const {
    const vulkan::Pipeline& p = product(Product::Coopmat, dw);
    return n_tok >= kCoopmatMinTokens && p.pipeline && !p.on_cpu;
  }
  bool uses_q8(const DeviceWeight& dw, int64_t n_tok) const {
    const vulkan::Pipeline& p = product(Product::MatvecQ8, dw);
    return n_tok == 1 && p.pipeline && !p.on_cpu && !q8_paused_;
  }
  // Rounds the one-token input x of n floats into q8x_ (quantize.comp's layout), unless q8x_ already holds
  // x's rounding (`held`: what it held when the op began).
  struct Q8Held {
    VkBuffer src = nullptr;  // q8x_ holds the rounding of this buffer's first n floats (nullptr: nothing)
    int64_t n = 0;
  };
  Q8Held q8_held_;
  void record_quantize(const vulkan::Buffer& x, int64_t n, Q8Held held);
  // RMSNorm (and the add before it) rounding its output too, for the integer products that read it: one
  // row of whole blocks of 32 (shaders/rmsnorm.comp's TL_Q8). The ops then leave q8_held_ set; every op
  // clears it when it starts (replaying()).
  vulkan::Pipeline p_rmsnorm_q8_, p_add_rmsnorm_q8_;
  // The gated unit doing the same for the down projection (shaders/glu_q8.comp), and attention for the
  // output projection (attention.comp's TL_Q8: one token, heads of whole blocks of 32).
  vulkan::Pipeline p_glu_silu_q8_, p_glu_gelu_q8_, p_attention_q8_;
  // One token's attention with its output left in floats (--activations f32, or heads not of whole blocks):
  // attention.comp on attn_one_local_ invocations, as p_attention_q8_; p_attention_ takes it back when it
  // fails its self-check.
  vulkan::Pipeline p_attention_one_;
  // Whether an op with an output-rounding variant `fused` rounds this output (n_rows rows of n).
  bool rounds_output(const vulkan::Pipeline& fused, int64_t n_rows, int64_t n) const {
    return fused.pipeline && !fused.on_cpu && n_rows == 1 && n % 32 == 0 && n <= opts_.max_in_elems;
  }
  std::vector<vulkan::Pipeline*> all_pipelines();
  bool kv_on_cpu() const { return p_kv_store_.on_cpu || p_attention_.on_cpu; }
  void run_self_check();
  // The products' checks of every weight format (on images when `images`).
  void check_formats(std::mt19937& rng, bool images);
  void check_fused_rounding(std::mt19937& rng);
  // The fused gate/up products with the gated unit (p_matmul_glu_q8_) of every block format, both
  // activations: output and its rounding against the host's on the same rounded input.
  void check_fused_glu(std::mt19937& rng);
  // The largest error of the rounding q8x_ holds against the host's rounding of `out` (whole blocks of 32;
  // a code one step off at a near-tie of the rounding counts as agreeing).
  double rounding_error(const std::vector<float>& out);
  void check_products(const Weight& w, const Weight& ref_w, const std::vector<float>& x, int64_t n_tok);
  void check_coopmat(const Weight& w, const Weight& ref_w, const std::vector<float>& x);
  // Blocks of 32 in the fused-rounding check's longest row: three more than the norm's invocations.
  int64_t fused_check_blocks() const { return int64_t(red_local_) + 3; }
  // Marks p failed when err (of the largest reference value) is over the bound: 1e-3, or for the fp16
  // products of the cooperative matrices a wider one (self_check.cpp).
  void verdict(vulkan::Pipeline& p, double err, bool half = false);
  // The cache's key: everything that can change a pipeline or its verdict.
  std::string pipeline_cache_key() const;
  // Marks the pipelines of a cached verdict; false (nothing marked) when one of them is not a pipeline here.
  bool apply_cached_verdict(const std::vector<CacheEntry::Failed>& failed);
  std::vector<CacheEntry::Failed> failed_;  // the self-check's verdict: pipelines that failed it
  bool pipelines_from_cache_ = false, verdict_from_cache_ = false;

  // A KV cache on the device: a buffer, or (--kv-memory image) an RGBA16F image.
  struct KvTarget {
    const vulkan::Buffer* buf = nullptr;
    const vulkan::Image* img = nullptr;
  };
  // Bytes [off, off + bytes) of a cache of rows of kv_dim elements in the cache type (for an image: whole
  // rows, its lines).
  void kv_upload(const KvTarget& t, int64_t kv_dim, size_t off, const void* src, size_t bytes);
  void kv_download(const KvTarget& t, int64_t kv_dim, size_t off, void* dst, size_t bytes);

  // Recording helpers (the shaders' bindings and push constants).
  void record_rope_kv_store(const KvTarget& cache, uint32_t layer_off, int64_t n_ctx, int64_t n_tok,
                            const RopeShape& r, const vulkan::Buffer& q, const vulkan::Buffer& k,
                            const vulkan::Buffer& v, const vulkan::Buffer& table, const vulkan::Buffer& pos);
  void record_matmul(const DeviceWeight& dw, int64_t n_tok, const vulkan::Buffer& x, const vulkan::Buffer& y);
  // The KV ops on an explicit cache of n_ctx x kv_dim planes (the session's, or the self-check's).
  void record_kv_store(const KvTarget& cache, uint32_t layer_off, int64_t n_ctx, int64_t kv_dim,
                       int64_t n_tok, const vulkan::Buffer& k, const vulkan::Buffer& v,
                       const vulkan::Buffer& pos);
  void record_attention(const KvTarget& cache, uint32_t layer_off, int64_t n_ctx, int64_t kv_dim,
                        int64_t n_tok, const AttnParams& p, const vulkan::Buffer& q,
                        const vulkan::Buffer& pos, const vulkan::Buffer& out, bool q8 = false);
  // Whether attention of n_tok tokens rounds its output for the integer products (p_attention_q8_).
  bool attention_rounds(int64_t n_tok, const AttnParams& p) const {
    return p.head_dim % 32 == 0 && rounds_output(p_attention_q8_, n_tok, p.n_head * p.head_dim);
  }
  // Groups covering n items of `local` invocations in (x, y) (x at most the device's limit).
  void elementwise_groups(int64_t n, uint32_t local, uint32_t& gx, uint32_t& gy) const;

  // Mirrored host arrays (host_mirrors.h: the OpenCL backend's scheme, without its upload epochs: uploads are
  // staged at record time); array i's device copy is mirror_dev_[i]. find_mirror: the index of the array
  // holding [p, p + bytes), or -1 when p is in none (past an array's end: an error naming the op).
  int find_mirror(const void* p, size_t bytes, const char* op) const { return mirrors_.find(p, bytes, op); }
  // Whether p is the first float of a mirrored array (its own device buffer then holds the op's operand).
  bool is_mirror_start(const float* p, int64_t n) const {
    const int i = find_mirror(p, size_t(n) * sizeof(float), "matmul");
    return i >= 0 && reinterpret_cast<const uint8_t*>(p) == mirrors_[size_t(i)].host;
  }
  void upload_dirty(size_t i);
  const vulkan::Buffer& dev_in(const float* p, int64_t n, const vulkan::Buffer& staging, const char* op);
  const vulkan::Buffer& dev_out(float* p, int64_t n, const vulkan::Buffer& staging, const char* op);
  void dev_done(float* p, int64_t n, const vulkan::Buffer& written);
  void host_in(const float* p, int64_t n) { to_host(p, size_t(n) * sizeof(float)); }
  void host_out(float* p, int64_t n) { host_wrote(p, size_t(n) * sizeof(float)); }
  const vulkan::Buffer& norm_weight(const float* w, int64_t n);
  const vulkan::Buffer& dev_ints(const int32_t* v, int64_t n, std::vector<int32_t>& held, int64_t& held_n,
                                 const vulkan::Buffer& buf);
  const vulkan::Buffer& dev_positions(const int32_t* pos, int64_t n_tok);
  // The whole RoPE table on the device ([n_pos][n_half][cos, sin]), uploaded on its first use; two slots
  // (global and sliding-window layers alternate).
  const vulkan::Buffer& dev_rope_table(const RopeTable& table);
  const vulkan::Buffer& dev_ids(const int32_t* ids, int64_t n_tok);
  // Replay bookkeeping: true when the op is skipped (a replayed step), after counting it and pointing the
  // recorded downloads of its host outputs (outputs not in a mirror) at this call's pointers.
  bool replaying(float* out0 = nullptr, float* out1 = nullptr);
  void check_tokens(int64_t n_tok, const char* op) const;
  void check_kv(const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok, const char* op) const;
  // One layer of one sequence's cache (KvCache::seq()), and the layer's offset in it (elements).
  KvTarget kv_target(const KvCache& kv, int64_t layer, uint32_t& layer_off) const;
  void copy_kv(const KvCache& kv, int64_t p0, int64_t p1, bool to_device);

  VulkanBackendOptions opts_;
  mutable vulkan::Runtime rt_;
  bool subgroups_ = false;
  uint32_t red_local_ = 64, mm_local_ = 64, mv_local_ = 64, attn_local_ = 64, elem_local_ = 64;
  uint32_t attn_one_local_ = 64;  // p_attention_one_ / p_attention_q8_ (one token)
  // Rows a matmul work-group computes (shaders/matmul.comp's TL_ROWS): prompts (with 4 tokens), and decode
  // of the float formats; the block formats' decode groups (shaders/matvec.comp) take mv_rows_.
  static constexpr uint32_t kPrefillRows = 4, kDecodeRows = 4;
  uint32_t mv_rows_ = 4, mv_groups_ = 0;
  // Rows a work-group of the integer decode matvec computes (shaders/matvec_q8.comp's TL_ROWS).
  uint32_t q8_rows_ = 2;

  std::unordered_map<const uint8_t*, DeviceWeight> weights_, tables_;
  std::unique_ptr<ThreadPool> cpu_pool_;
  std::unique_ptr<Backend> cpu_;  // the host backend, float path: the self-check's reference and fallback
  bool cpu_prepared_ = false;

  vulkan::Buffer in_a_, in_b_, out_,
      vec_;                        // scratch: [max_in_elems], [max_in_elems], [max_out_elems], [max_width]
  vulkan::Buffer q8x_;             // a one-token input rounded: [n / 4] code words, [n / 32] d, [n / 16] s
  vulkan::Buffer q8y_;             // the same size: the fused gated unit's output rounding (then swapped)
  vulkan::Buffer glu_counters_;    // [max_in_elems / 32] uint32 zeros: matvec_q8_glu.comp's block counts
  vulkan::Buffer pos_dev_;         // [max_tokens] int32: the pass's positions
  std::vector<int32_t> pos_held_;  // what pos_dev_ holds (pos_n_ entries)
  int64_t pos_n_ = -1;
  vulkan::Buffer ids_dev_;         // [max_tokens] int32: the pass's token ids
  std::vector<int32_t> ids_held_;  // what ids_dev_ holds (ids_n_ entries)
  int64_t ids_n_ = -1;
  struct RopeSlot {
    RopeTableStamp stamp;
    vulkan::Buffer dev;
    uint64_t last_use = 0;
  };

  RopeSlot rope_[2];
  uint64_t rope_uses_ = 0;
  // Decode capture and replay (header comment). Step-input slots: positions, then token ids.
  enum class StepMode { Normal, Capturing, Replaying };
  StepMode mode_ = StepMode::Normal;
  static constexpr size_t kPosSlot = 0, kIdsSlot = 2048;
  uint64_t step_ops_ = 0, captured_ops_ = 0;  // ops of this step; of the captured one
  size_t deferred_k_ = 0;
  std::vector<size_t> capture_begin_state_, capture_end_state_;
  uint64_t replayed_ = 0, captured_ = 0;
  // Decode passes' host time (pass_times()): the pass's start and the runtime's wait total then.
  PassTimes pass_times_;
  std::chrono::steady_clock::time_point pass_t0_;
  uint64_t pass_wait0_ = 0;
  bool pass_is_decode_ = false;
  HostMirrors mirrors_{"Vulkan backend"};
  std::vector<vulkan::Buffer> mirror_dev_;  // [i]: mirrors_[i]'s device copy, the same bytes
  std::unordered_map<const float*, vulkan::Buffer> norms_;

  std::vector<vulkan::Buffer> kv_bufs_;  // kv_bufs_[b]: layer slots [b * layers_per_buf_, ...) (kv_target)
  std::vector<vulkan::Image> kv_imgs_;   // or (--kv-memory image) kv_imgs_[b], the same layers
  int64_t layers_per_buf_ = 0;
};

}  // namespace tilellm
