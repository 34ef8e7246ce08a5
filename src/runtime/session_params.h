// What a session (runtime/session.h) and a batch of sessions (runtime/batch_session.h) are asked for
// (SessionOptions), and what they ask of the machine and of a backend before they allocate anything: the
// context size, checked against the host memory it takes, and the backend's parameters for a forward pass
// of a given width.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/kv_cache.h"
#include "backends/modes.h"
#include "backends/registry.h"
#include "base/thread_pool.h"
#include "model/model.h"

namespace tilellm {

// Where a session on a device backend runs prompt batches (--prefill). Gpu: everything on the device. Cpu:
// every batch of more than one token runs on the host backend (its tiled kernels, the host KV cache), and the
// new KV rows go up to the device's cache; decode stays on the device. Auto: where prompt batches ran
// faster when the session started (Session::prefill_speeds: the host's tiles at n_batch tokens, at most 64,
// the device at n_batch, reached by doubling from 8 while a pass lasts under kDeviceProbeSeconds, each size
// after an untimed pass that warms it up; the host's time includes sending its KV rows up),
// or the speeds kept from an earlier session of the same model, backend, device, threads, modes and engine
// build (runtime/prefill_speeds.h). Which side wins depends on the machine: the CPU's tiles beat the OpenCL
// row kernels on every device first measured, and the OpenCL GEMM ran prompts 4.5x faster than 16 CPU cores
// on an H200 (docs/OPENCL.md).
enum class PrefillMode { Gpu, Cpu, Auto };

struct SessionOptions {
  int64_t n_ctx = 0;      // tokens the cache holds; 0: the model's training context, capped at 4096
  int n_threads = 0;      // 0: the CPUs this process may use (ThreadPool::default_threads)
  std::vector<int> cpus;  // pin thread i to cpus[i % size]; empty: no pinning
  int64_t n_batch = 64;   // tokens per forward pass while evaluating a prompt
  GgmlType kv_type = GgmlType::F16;
  bool logits_all = false;  // keep the logits of every token of an eval() call (perplexity, logit dumps)
  ActivationMode activations = ActivationMode::Quantized;  // backends/modes.h
  WeightsMode weights = WeightsMode::Native;               // how matrices are held: backends/modes.h
  std::string backend = "cpu";               // a registered backend's name (backends/registry.h)
  int device = 0;                            // index into that backend's devices (`tilellm devices`)
  std::string device_profile = "none";       // GPU backends: clamp the device to a GPU family's limits
  GpuMemory gpu_memory = GpuMemory::Buffer;  // GPU backends: weights in buffers or images
  KvMemory kv_memory = KvMemory::Buffer;     // GPU backends: the KV cache in buffers or images
  bool profile_kernels = false;              // time every kernel (kernel_times()), where the backend can
  PrefillMode prefill = PrefillMode::Gpu;    // device backends: where prompt batches run
  // The chosen backend's own options (its make_options(), set from its CLI group); null: its defaults.
  std::shared_ptr<const BackendOptions> backend_options;
  // --degrade tile-mask=F: the backend prepares its lossy masks at load; they stay off until
  // set_tile_mask(true). 0: none.
  double tile_mask = 0;
};

// The backend fields of o as the registry takes them: device, profile, numeric and memory modes, profiling,
// KV type and the backend's own options (no sizes: those come from a model).
BackendParams backend_params(const SessionOptions& o);

// The context's size (o.n_ctx, or the model's training context capped at 4096), refused before anything is
// allocated when the host memory it takes for n_seq sequences (their KV caches when the host holds them, the
// RoPE tables, the logits of every position when asked for) is more than the machine has available.
int64_t session_context_size(const Model& m, const SessionOptions& o, int n_seq = 1);

// backend_params(o), and the sizes of one forward pass over n_batch tokens (the widest op input, the largest
// output including n_logits rows of logits — every token's with o.logits_all —, the longest norm vector or
// RoPE row), the KV cache's geometry (the caller adds the activation arrays a device backend may keep in its
// memory).
BackendParams session_backend_params(const Model& m, const SessionOptions& o, ThreadPool& pool,
                                     const KvCache& kv, int64_t n_batch, int64_t n_logits = 1);

}  // namespace tilellm
