// The CUDA backend: every op of backends/backend.h on an NVIDIA GPU of compute capability 8.0 or later, one
// host file and one kernel file (kernels/*.cu) per op (embedding, rmsnorm, matmul with matvec for one
// token, rope with rope_kv_store, kv_store, attention, glu, add).
//
// Numerics follow the session's activation mode (backends/modes.h):
//  - F32 (--activations f32): the CPU backend's float path — exact dequantized weights, float32 arithmetic
//    on the CUDA cores (the reference the tests compare with).
//  - Quantized (the default): the products of the block formats take the activations rounded to int8 per
//    block of 32 (kernels/kernels.h "Q8"; llama.cpp's activation rounding for its CUDA kernels) and run as
//    integer dot products — dp4a in decode, int8 tensor cores (mma.sync) for short prompts — each block's
//    sum scaled once; rounded_matmul_input() gives the rounded activations, so a reference can check them
//    exactly. Prompts of kHalfGemmTokens or more (over every format but F32 by default; half_gemm F16: over
//    F16 weights only) take the fp16 tensor-core GEMM of cuBLAS where the library is present (blas.h): the
//    weights dequantized and rounded to fp16 a chunk of rows at a time, the activations scaled by a power
//    of two and rounded to fp16 (rounded_matmul_input gives them; on_half_gemm says which products take it).
//    F32 weights stay on the float path. Every other op is float in both modes.
//
// Memory (allocated in the constructor and load_weights; nothing is allocated while ops run):
//  - Weights: one device buffer each, keyed by the host Weight's data pointer, in the device formats of
//    backends/device_rows.h: Q4_0, Q4_1, Q8_0 as split rows, F16 and F32 as in the file, Q4_K and Q6_K at
//    their own sizes (Q4K: 4.625 bits a weight, where the other GPU backends' KQ4 takes 6; Q6K: 6.625,
//    where KQ8 takes 12), Q5_K, Q5_0 and Q5_1 as KQ8, the rest dequantized to F32; --weights int4b64 /
//    int8b0 / f16 / f32 convert every matrix (the embedding table keeps its GGUF type). Before anything is
//    uploaded, the whole model's device bytes are compared with the device's free memory.
//  - FB-KV on the device, in one allocation: [seq < kv_seqs][layer][K|V][pos < n_ctx][kv_dim] in the cache
//    type (one cache per sequence of a BatchSession, one for a Session; the KvCache handed to the cache ops
//    names its sequence, KvCache::seq()).
//  - Activations are device-resident (backends/host_mirrors.h): the session's activation arrays are
//    mirrored by device buffers and only what the other side needs is copied; a forward pass reads back
//    the logits only. Operands outside every mirror go through fixed scratch buffers.
//  - Q8: one set of quantized-activation buffers, with the device array they hold (a product whose input
//    is still there reuses it: q, k and v share one rounding, made by the RMSNorm before them).
//  - Decode without per-token launches: the first decode step (ForwardStep::decode) is captured as a CUDA
//    graph; each following step that repeats it (same_as_last) replays the graph. The token id and the
//    position reach the device as step inputs (runtime.h); RoPE looks its row up in the whole table on the
//    device, attention's key count is the position + 1, the KV rows are addressed by it. The logits arrive
//    through a deferred download. A step that cannot be captured whole (a staged upload, a CPU-fallback
//    op, profiling) runs eagerly, and the next one tries again.
//  - A batch decode step (one token for each of several sequences, serve's slots) runs as one decode step
//    does: its products of up to cuda::kMatvecTokens tokens read each weight once for all of them
//    (kernels/matvec_tokens.cu), and RoPE + KV write and attention take all its sequences in one launch
//    each (rope_kv_store_seqs, attention_seqs: each token's cache found from its sequence), captured and
//    replayed like a one-token step.
//  - Self-check: at construction every kernel runs a small random case against the host backend's float
//    path (on the rounded activations for the quantized products); one that fails is replaced by the host
//    backend for its op, with a warning naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/blas.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/runtime.h"
#include "backends/device_options.h"
#include "backends/device_rows.h"
#include "backends/host_mirrors.h"
#include "backends/modes.h"
#include "base/thread_pool.h"

namespace tilellm {

struct CudaBackendOptions : DeviceOptions {
  ActivationMode activations = ActivationMode::Quantized;
  // Blocks a head's keys are split over in decode attention (--cuda-attn-splits); 0: auto (16,
  // cuda_backend.cpp).
  int attention_splits = 0;
  // Decode's RoPE + KV write in the q/k/v product's launch where it fits (matmul_rope_kv_store;
  // --cuda-fuse-rope). Off by default: no faster than the separate launch on an H100 (docs/PERF.md
  // 2026-12-07 23:42).
  bool fuse_qkv_rope = false;
  // Decode's residual add and the next RMSNorm carried by the products around them (matmul_add_rmsnorm,
  // --cuda-fuse-norm): the product before adds its rows into the residual as it writes them, and the
  // product after (q/k/v, gate/up, the output) forms the norm of the residual in its own launch, so the
  // add_rmsnorm launch between them goes. The same bits as the launches apart (rmsnorm.cpp).
  bool fuse_norm = false;
  // Which prompt products take cuBLAS's fp16 GEMM where the library is present (matmul.cpp;
  // --cuda-fp16-gemm): every format but F32 (the default: on the H200 1.4-1.7x llama.cpp CUDA's pp512 where
  // the int8 kernel gives 0.7-0.9x, and closer to the float path on the real models; docs/CUDA.md), F16
  // weights only, or none. Its fp16 weight rows are made a chunk of at most half_chunk_bytes at a time
  // (tests make it small).
  enum class HalfGemm { Off, F16, All };
  HalfGemm half_gemm = HalfGemm::All;
  size_t half_chunk_bytes = size_t(96) << 20;  // a 4096 x 11008 matrix in one piece
  // Test hook: "add" makes the add kernel write acc = x (a broken kernel the self-check must catch).
  std::string test_broken_kernel;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& o);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  std::string_view name() const override { return "cuda"; }
  const cuda::Capabilities& caps() const { return rt_.caps(); }
  cuda::Runtime& runtime() { return rt_; }

  void load_weights(const WeightSet& ws) override;
  void upload_weight(const Weight& w);
  void begin_forward(const ForwardStep& step) override;
  void end_forward() override;

  // Prompts of at least this many tokens take the fp16 GEMM (measured on the H200: docs/PERF.md).
  static constexpr int64_t kHalfGemmTokens = 32;
  static constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;  // cuBLAS's advice for Hopper
  // Whether a product of w over n_tok tokens runs as the fp16 GEMM (its weights then rounded to fp16).
  bool on_half_gemm(const Weight& w, int64_t n_tok) const;
  // "cuBLAS 13.1.0", or why prompts keep the int8 kernel.
  std::string half_gemm_status() const;

  // Names of the kernels that failed the self-check (their ops run on the host backend).
  std::vector<std::string> cpu_fallbacks() const;
  void to_host(const void* p, size_t bytes);
  void host_wrote(void* p, size_t bytes);
  void kv_to_device(const KvCache& kv, int64_t p0, int64_t p1) override { copy_kv(kv, p0, p1, true); }
  void kv_to_host(KvCache& kv, int64_t p0, int64_t p1) override { copy_kv(kv, p0, p1, false); }
  bool needs_host_kv() const override { return kv_on_cpu(); }
  std::string memory_summary() const override;

  void embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) override;
  void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) override;
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override;
  void rounded_matmul_input(const Weight& w, const float* x, int64_t n_tok, float* out) const override;
  // q/k/v (and gate/up) of one block format in decode and batch decode: one launch over the matrices.
  void matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tok) override;
  // gate/up in decode: one launch writing act(gate) * up.
  void matmul_glu(const Weight& w_gate, const Weight& w_up, const float* x, int64_t n_tok, FfnAct act,
                  float* out, float* up) override;
  void rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const int32_t* pos,
            const RopeTable& table, RopeMode mode) override;
  void rope_kv_store(float* q, float* k, const float* v, KvCache& kv, int64_t layer, const int32_t* pos,
                     int64_t n_tok, const RopeShape& r) override;
  // Decode's q/k/v products with their RoPE (norm pairs) and KV write in the products' launch, where the
  // rows stream two at a time (cuda::matvec_rope_fits) and fuse_qkv_rope is set; otherwise the products,
  // then rope_kv_store.
  void matmul_rope_kv_store(const Weight* const* wqkv, const float* x, int64_t n_tok, float* q, float* k,
                            float* v, KvCache& kv, int64_t layer, const int32_t* pos,
                            const RopeShape& r) override;
  void kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                int64_t n_tok) override;
  void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                 const AttnParams& p, float* out) override;
  // A batch decode step's sequences: one launch each for RoPE + KV write and for attention.
  void rope_kv_store_seqs(float* q, float* k, const float* v, KvCache* const* kvs, int64_t layer,
                          const int32_t* pos, int64_t n, const RopeShape& r) override;
  void attention_seqs(const float* q, KvCache* const* kvs, int64_t layer, const int32_t* pos, int64_t n,
                      const AttnParams& p, float* out) override;
  void glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) override;
  void add(float* acc, const float* x, int64_t n) override;
  void add_rows(float* x, const float* v, int64_t n_rows, int64_t n) override;
  void add_rmsnorm(float* acc, const float* x, const float* w, float* y, int64_t n_rows, int64_t n,
                   float eps) override;
  // In decode with fuse_norm where the product streams: the product adds into acc itself and the norm
  // is left to the product that reads y next (take_norm), or launched alone before anything else touches
  // the device arrays (flush_norm).
  void matmul_add_rmsnorm(const Weight& wo, const float* x, int64_t n_tok, float* o, float* acc,
                          const float* g, float* y, float eps) override;

  uint64_t replayed_steps() const { return replayed_; }
  uint64_t captured_steps() const { return captured_; }
  std::vector<KernelTime> kernel_times() const override { return rt_.kernel_times(); }
  void reset_kernel_times() override { rt_.reset_kernel_times(); }

 private:
  // A matrix on the device: [n_out][row_bytes] in fmt (a cuda::Fmt: DeviceFormat's numbers, or kQ4K / kQ6K).
  struct DeviceWeight {
    cuda::Buffer buf;
    int fmt;
    GgmlType host_type;
    size_t row_bytes;
    int64_t n_in, n_out;
    cuda::Matrix matrix() const { return {buf.as<uint8_t>(), row_bytes, int(n_in), int(n_out), fmt}; }
  };
  DeviceWeight make_device_weight(const Weight& w, WeightsMode mode);
  const DeviceWeight& find_weight(const Weight& w, const char* op) const;
  bool quantized(int f) const { return quantized_ && f != cuda::kF32 && f != cuda::kF16; }
  // The format w is held in under mode m: device_format_for's, but Q4_K and Q6_K at their own sizes (kQ4K,
  // kQ6K); and a row's device bytes in format f.
  static int format_for(const Weight& w, WeightsMode m);
  static size_t own_row_bytes(int f, int64_t n_in);

  // Kernels by op, with their self-check verdict (on_cpu: the op runs on the host backend).
  struct Kernel {
    std::string name;
    bool on_cpu = false;
  };
  // k_matvec_few_: the quantized products of 2 .. cuda::kMatvecTokens tokens (a batch decode step).
  Kernel k_embed_[cuda::kFormats], k_matvec_[cuda::kFormats], k_matvec_few_[cuda::kFormats],
      k_matmul_[cuda::kFormats], k_matmul16_[cuda::kFormats];
  // k_qkv_rope_: the q/k/v products' RoPE and KV write in their launch (matmul_rope_kv_store).
  // k_matvec_norm_: a product forming its input norm in its launch (matmul_add_rmsnorm's fused path).
  Kernel k_rmsnorm_, k_add_rmsnorm_, k_rope_, k_kv_store_, k_rope_kv_store_, k_qkv_rope_, k_attention_,
      k_glu_[2], k_add_, k_add_rows_, k_matvec_norm_;
  std::vector<Kernel*> all_kernels();
  bool kv_on_cpu() const { return k_kv_store_.on_cpu || k_attention_.on_cpu; }
  void run_self_check();
  void verdict(Kernel& k, double err);

  // Launch bookkeeping around a kernel of `name` (timing, the launch's error check).
  template <class F>
  void launch(const char* name, F&& f) {
    rt_.before_launch(name);
    f(rt_.stream());
    rt_.after_launch(name);
  }

  // The products on device operands: x at dx (n_tok rows), y to dy.
  void record_matmul(const DeviceWeight& dw, const float* dx, int64_t n_tok, float* dy);
  bool half_gemm_of(const DeviceWeight& dw, int64_t n_tok) const;
  // Whether a product of n_tok tokens takes a decode kernel (matvec for one, matvec_few for a few), and
  // that kernel's launch for a job of job.n_tok tokens.
  bool on_matvec(const DeviceWeight& dw, int64_t n_tok) const;
  void launch_matvec(const cuda::MatvecJob& job, const cuda::Q8& q8);
  void record_half_gemm(const DeviceWeight& dw, const float* dx, int64_t n_tok, float* dy);
  // The set of Q8 buffers holding the rounded activations of the n_tok x n floats at dx, rounded into set 0
  // unless a set holds them already.
  int q8_of(const float* dx, int64_t n_tok, int64_t n);
  cuda::Q8 q8_view(int set) const;
  bool q8_fits(int64_t n) const { return n <= int64_t(q8_[0].q.bytes()); }
  void q8_hold(int set, const float* src, int64_t rows, int64_t cols);
  void device_wrote(const void* dptr, size_t bytes);  // forgets a Q8 set's source if it overlaps
  // The fused RoPE + KV write's conditions (shapes, mirrored operands, verdicts), and its launch into the
  // planes of sequence `seq` (each token placed from there by sp).
  bool rope_kv_fused(const float* q, const float* k, const float* v, int64_t n_tok, const RopeShape& r) const;
  // The q/k/v job of matmul_rope_kv_store in its products' launch, or false where that cannot take it
  // (then nothing was recorded).
  bool record_qkv_rope(const Weight* const* wqkv, const float* x, float* const* ys, KvCache& kv,
                       int64_t layer, const int32_t* pos, const RopeShape& r);
  void record_rope_kv_store(float* q, float* k, const float* v, int64_t layer, const int32_t* pos,
                            int64_t n_tok, const RopeShape& r, int64_t seq, const cuda::SeqPlanes& sp);
  // Attention's shape checks, and its device path from the planes of sequence `seq` (seqs: a batch decode
  // step's tokens, each placed from there).
  void check_attention(const AttnParams& p, int64_t kv_dim) const;
  void attention_on_device(const float* q, int64_t layer, const int32_t* pos, int64_t n_tok,
                           const AttnParams& p, float* out, int64_t seq, int splits,
                           const cuda::SeqPlanes* seqs);
  // The KV ops on explicit planes (the session's cache, or the self-check's).
  void record_attention(const void* k_plane, const void* v_plane, int64_t kv_dim, int64_t n_tok,
                        const AttnParams& p, const float* dq, const int32_t* dpos, float* dout, int splits,
                        const cuda::SeqPlanes* seqs = nullptr);

  // matmul_add_rmsnorm's norm not launched yet (acc null: none): the residual acc [n] (its add done), the
  // norm's weights and eps, its output y [n]; acc and y mirrored arrays.
  struct PendingNorm {
    const float* acc = nullptr;
    const float* w = nullptr;
    float* y = nullptr;
    int64_t n = 0;
    float eps = 0.0f;
  };
  PendingNorm pending_norm_;
  bool record_matvec_add(const Weight& wo, const float* x, float* o, float* acc, const float* g, float* y,
                         float eps);
  // The pending norm launched on its own (rmsnorm.cu; Q8 set 0 then holds its rounding). Called by every
  // entry to the device arrays (dev_in, dev_out, to_host, host_wrote) and at the end of a pass.
  void flush_norm();
  // A decode product about to read x: when x is the pending norm's output and the job can form it
  // (cuda::matvec_norm_fits, aligned operands), job.norm is set, the pending norm is taken and y and Q8 set
  // 0 are marked as the launch will leave them; false otherwise (the norm stays pending).
  bool take_norm(const float* x, cuda::MatvecJob& job);

  // Mirrored host arrays (host_mirrors.h) and the operands' device places.
  float* dev_in(const float* p, int64_t n, const cuda::Buffer& staging, const char* op);
  float* dev_out(float* p, int64_t n, const cuda::Buffer& staging, const char* op);
  void dev_done(float* p, int64_t n, float* written);
  void host_in(const float* p, int64_t n) { to_host(p, size_t(n) * sizeof(float)); }
  void host_out(float* p, int64_t n) { host_wrote(p, size_t(n) * sizeof(float)); }
  void upload_dirty(size_t i);
  bool is_mirror_start(const float* p, int64_t n) const;
  const float* norm_weight(const float* w, int64_t n);
  const int32_t* dev_positions(const int32_t* pos, int64_t n_tok);
  const int32_t* dev_ids(const int32_t* ids, int64_t n_tok);
  // The whole RoPE table on the device ([n_pos][n_half][cos, sin]), uploaded on its first use; two slots
  // (global and sliding-window layers alternate).
  const float* dev_rope_table(const RopeTable& table);
  cuda::RopeArgs rope_args(const RopeTable& table, int64_t head_dim, int64_t rope_dim, RopeMode mode);
  // Replay bookkeeping: true when the op is skipped (a replayed step), after counting it and pointing the
  // deferred downloads of its host outputs (outputs not in a mirror) at this call's pointers.
  bool replaying(float* out0 = nullptr);
  void check_tokens(int64_t n_tok, const char* op) const;
  void check_kv(const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok, const char* op) const;
  void* kv_plane(const KvCache& kv, int64_t layer, int kind) const;
  void* kv_plane_of(int64_t seq, int64_t layer, int kind) const;
  // The sequences of a batch decode step's caches, relative to sequence 0's planes.
  cuda::SeqPlanes seq_planes(KvCache* const* kvs, int64_t n) const;
  void copy_kv(const KvCache& kv, int64_t p0, int64_t p1, bool to_device);

  CudaBackendOptions opts_;
  mutable cuda::Runtime rt_;
  bool quantized_;
  int attn_splits_ = 1;

  std::unordered_map<const uint8_t*, DeviceWeight> weights_, tables_;
  std::unique_ptr<ThreadPool> cpu_pool_;
  std::unique_ptr<Backend> cpu_;  // the host backend, float path: the self-check's reference and fallback
  bool cpu_prepared_ = false;

  cuda::Buffer in_a_, in_b_, out_;  // scratch: [max_in_elems], [max_in_elems], [max_out_elems] floats
  cuda::Buffer vec_;                // [max_width] floats: a norm weight not uploaded at load
  cuda::Buffer attn_work_;  // [queries][splits][heads][head_dim + 2] floats: split attention's partials
  int64_t attn_work_floats_ = 0;
  // [attn_counters_n_] ints, zero between launches: the splits finished a head (of each query of a batch
  // decode step)
  cuda::Buffer attn_counters_;
  int64_t attn_counters_n_ = 0;
  // Two sets of Q8 buffers for up to max_in_elems activations each: q int8 [max_in], d [max_in / 32], s
  // [max_in / 16], and the device floats [rows][cols] they hold rounded (src null: none). Two, because the
  // GLU product reads one and writes its output's rounding into the other.
  struct Q8Set {
    cuda::Buffer q, d, s;
    const float* src = nullptr;
    int64_t rows = 0, cols = 0;
  };
  Q8Set q8_[2];
  // The fp16 GEMM (set up only where cuBLAS loaded): the library's workspace; weight rows as fp16, a chunk
  // of whole rows at a time [half_chunk_bytes / 2]; the activations as fp16 [max_in_elems]; scale: [alpha,
  // beta] floats then the activations' largest magnitude as bits (kernels.h to_f16_scaled).
  std::unique_ptr<cuda::Blas> blas_;
  cuda::Buffer blas_work_, half_w_, half_x_, half_scale_;
  // GLU outputs' completion counts (matvec.cu quantize_rows_when_complete): [max_in_elems / 32] ints, zero.
  cuda::Buffer glu_counters_;
  cuda::Buffer pos_dev_, ids_dev_;  // [max_tokens] int32: the pass's positions and token ids
  std::vector<int32_t> pos_held_, ids_held_;
  int64_t pos_n_ = -1, ids_n_ = -1;
  // The pass's position array (ForwardStep::pos) while a pass runs: a sequence's part of it (a batch's
  // spans) is found at its offset in pos_dev_, so that a recorded batch decode step reads each sequence's
  // positions from the step input the replays rewrite.
  const int32_t* step_pos_ = nullptr;
  int64_t step_pos_n_ = 0;
  struct RopeSlot {
    RopeTableStamp stamp;
    cuda::Buffer dev;
    uint64_t last_use = 0;
  };

  RopeSlot rope_[2];
  uint64_t rope_uses_ = 0;

  // Decode capture and replay (header comment). Step-input slots: positions, then token ids.
  enum class StepMode { Normal, Capturing, Replaying };
  StepMode mode_ = StepMode::Normal;
  static constexpr size_t kPosSlot = 0, kIdsSlot = 2048;
  uint64_t step_ops_ = 0, captured_ops_ = 0;
  size_t deferred_k_ = 0;
  std::vector<size_t> capture_begin_state_, capture_end_state_;
  struct Q8Held {
    const float* src = nullptr;
    int64_t rows = 0, cols = 0;
  };
  Q8Held capture_q8_[2];  // the Q8 sets' sources after the captured step
  uint64_t replayed_ = 0, captured_ = 0;

  HostMirrors mirrors_{"CUDA backend"};
  std::vector<cuda::Buffer> mirror_dev_;  // mirror_dev_[i]: the device copy of mirrors_[i]
  std::unordered_map<const float*, cuda::Buffer> norms_;
  cuda::Buffer kv_;  // [kv_seqs][layer][K|V][n_ctx][kv_dim] in the cache type
};

}  // namespace tilellm
