// The CUDA device's memory probes for gemv-bw (backends/registry.h, MemoryProbe): a pure read by
// kernels/bandwidth.cu and a device-to-device copy (read + write bytes counted), each timed by CUDA events
// around it; the cache is the device's L2, flushed by writing twice its size.
#pragma once

#include <memory>

#include "backends/registry.h"

namespace tilellm::cuda {

std::unique_ptr<MemoryProbe> make_memory_probe(int device);

}  // namespace tilellm::cuda
