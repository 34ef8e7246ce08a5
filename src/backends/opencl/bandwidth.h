// The OpenCL device's memory probes for gemv-bw (backends/registry.h, MemoryProbe): pure reads by the
// kernels of kernels/bandwidth.cl (the best of a coalesced loop, a per-item contiguous loop and two loads
// per item; every item writes one float) and clEnqueueCopyBuffer (read + write bytes counted), both timed by
// the queue's profiling timestamps, on the probe's own context and queue on the device. The cache is the
// device's CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, but at least kMinCacheBytes: a driver may report less than its
// last-level cache (NVIDIA's reports 4 MiB on an H200, whose L2 is 50 MB). flush() copies 1.5x that.
#pragma once

#include <memory>
#include <string>

#include "backends/registry.h"

namespace tilellm::opencl {

inline constexpr size_t kMinCacheBytes = size_t(64) << 20;

std::unique_ptr<MemoryProbe> make_memory_probe(int device, const std::string& profile);

}  // namespace tilellm::opencl
