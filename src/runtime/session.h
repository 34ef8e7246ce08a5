// A session: one conversation's state over a loaded model — the FB-KV cache, the RoPE tables, the activation
// scratch, the thread pool and the logits. Everything is allocated in the constructor; eval() allocates
// nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/gpu_memory.h"
#include "backends/opencl/program_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/thread_pool.h"

namespace tilellm {

// Which backend runs the layer loop. OpenCL keeps the weights and the KV cache on the device
// (backends/opencl/opencl_backend.h); the CPU backend is the reference.
enum class BackendKind { Cpu, OpenCL };

// Where an OpenCL session runs prompt batches (--prefill). Gpu: everything on the device. Cpu: every batch of
// more than one token runs on the CPU backend (its tiled kernels, the host KV cache), and the new KV rows go
// up to the device cache; decode stays on the device. Auto: the CPU for batches of at least
// kAutoPrefillTokens tokens (the device's matmul kernels decode each weight block once per 4 tokens; the
// CPU's tiles were faster for prompts on every device measured, docs/OPENCL.md), the device for shorter ones.
enum class PrefillMode { Gpu, Cpu, Auto };
inline constexpr int64_t kAutoPrefillTokens = 16;

struct SessionOptions {
  int64_t n_ctx = 0;      // tokens the cache holds; 0: the model's training context, capped at 4096
  int n_threads = 0;      // 0: one per hardware thread
  std::vector<int> cpus;  // pin thread i to cpus[i % size]; empty: no pinning
  int64_t n_batch = 64;   // tokens per forward pass while evaluating a prompt
  GgmlType kv_type = GgmlType::F16;
  bool logits_all = false;  // keep the logits of every token of an eval() call (perplexity, logit dumps)
  ActivationMode activations = ActivationMode::Quantized;  // see backends/cpu/cpu_backend.h
  BackendKind backend = BackendKind::Cpu;
  int device = 0;                             // OpenCL: device index (`tilellm devices`)
  std::string device_profile = "none";        // OpenCL: clamp the device to a GPU family (opencl/device.h)
  WeightsMode weights = WeightsMode::Native;  // how matrices are held: backends/cpu/tiled_weight.h
  bool profile_kernels = false;               // OpenCL: time every kernel (kernel_times())
  PrefillMode prefill = PrefillMode::Gpu;     // OpenCL: where prompt batches run
  // OpenCL: the program binary cache (off unless asked for; the CLI's --cl-cache defaults to on).
  opencl::ProgramCacheOptions program_cache;
  GpuMemory gpu_memory = GpuMemory::Buffer;  // OpenCL: weights in buffers or images (backends/gpu_memory.h)
};

class Session {
 public:
  Session(const Model& model, const SessionOptions& opts);

  // Appends tokens at positions n_past().. and runs them through the model. Throws tilellm::Error, leaving
  // the session unchanged, when they do not fit in the context.
  void eval(const int32_t* tokens, int64_t n);
  // Logits [n_vocab] of the last token of the last eval() call.
  const float* logits() const;
  // With logits_all: logits of the i-th token of the last eval() call.
  const float* logits_at(int64_t i) const;

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  void reset() { truncate(0); }
  // Forgets every cached token from position n on (the cache rows are simply overwritten later).
  void truncate(int64_t n) {
    n_past_ = n < n_past_ ? (n < 0 ? 0 : n) : n_past_;
    host_kv_ = std::min(host_kv_, n_past_);
    dev_kv_ = std::min(dev_kv_, n_past_);
  }
  const Model& model() const { return model_; }
  const KvCache& kv_cache() const { return kv_; }
  int n_threads() const { return pool_.size(); }
  // Device time per kernel since the last reset (OpenCL with profile_kernels); empty on the CPU backend.
  std::vector<KernelTime> kernel_times() const;
  // Bytes of the host KV cache's storage: 0 when the cache lives only on the device.
  size_t host_kv_bytes() const { return kv_.bytes(); }
  // The device backend's memory line (Backend::memory_summary); empty on the CPU backend.
  std::string device_memory_summary() const {
    return device_backend_ ? device_backend_->memory_summary() : std::string();
  }
  void reset_kernel_times();

 private:
  const Model& model_;
  SessionOptions opts_;
  ThreadPool pool_;
  CpuBackend backend_;
  KvCache kv_;
  RopeTable rope_global_;
  RopeTable rope_local_;
  ForwardScratch scratch_;
  AlignedBuffer logits_;  // [n_ctx or 1][n_vocab]
  // The OpenCL backend when chosen; null: backend_ runs. Declared after scratch_, which it mirrors on the
  // device, so it is destroyed first (finishing its queue, whose pending uploads may still read scratch_).
  std::unique_ptr<Backend> device_backend_;
  int64_t n_past_ = 0;
  int64_t last_n_ = 0;
  // Hybrid prefill: positions [0, host_kv_) are current in kv_, [0, dev_kv_) in the device cache.
  int64_t host_kv_ = 0;
  int64_t dev_kv_ = 0;
  bool prefill_on_cpu(int64_t n_tok) const;
};

}  // namespace tilellm
