// What every device backend (OpenCL, Vulkan, CUDA) takes from the session's BackendParams: the device, the
// op sizes its buffers are made for, how the matrices are held, the KV cache's geometry, the host arrays to
// keep resident and whether to self-check and time kernels. Each backend's options derive from this and add
// their own; its registry entry fills this part with take_session (backends/registry.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/modes.h"
#include "format/ggml_types.h"

namespace tilellm {

struct DeviceOptions {
  int device = 0;             // index into the backend's devices()
  int64_t max_tokens = 64;    // most tokens in one op call (the session's batch)
  int64_t max_in_elems = 0;   // largest op input in floats (n_tok * widest activation)
  int64_t max_out_elems = 0;  // largest op output in floats (also covers the logits)
  int64_t max_width = 0;      // longest norm weight vector / RoPE table row, in floats
  // How the matrices are held (--weights): native (the GGUF types) or converted at upload.
  WeightsMode weights = WeightsMode::Native;
  // Geometry of the device FB-KV cache (kv_layers 0: none), and how many sequences' caches of it (a
  // BatchSession's).
  int64_t kv_layers = 0, kv_ctx = 0, kv_dim = 0;
  int kv_seqs = 1;
  GgmlType kv_type = GgmlType::F16;
  // Run the self-check at construction (tests of the kernels themselves turn it off).
  bool self_check = true;
  // Time every kernel (kernel_times(); `tilellm bench --profile`).
  bool profiling = false;
  // Host arrays to keep on the device (the session's activation scratch), each mirrored by a device buffer
  // of the same size made at construction. The arrays must outlive the backend.
  struct HostArray {
    void* data;
    size_t bytes;
  };
  std::vector<HostArray> resident;
};

}  // namespace tilellm
