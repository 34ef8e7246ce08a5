// The Vulkan device's memory probes for gemv-bw (backends/registry.h, MemoryProbe): pure reads by
// shaders/bandwidth.comp (the better of a strided loop and two loads per invocation) and a copy by the same
// shader (read + write bytes counted), timed by the runtime's timestamps. Vulkan does not report the
// last-level cache: kMinCacheBytes (64 MiB, above the H200's 50 MB L2) is assumed, and flush() copies 1.5x
// it.
#pragma once

#include <memory>
#include <string>

#include "backends/registry.h"

namespace tilellm::vulkan {

inline constexpr size_t kMinCacheBytes = size_t(64) << 20;

std::unique_ptr<MemoryProbe> make_memory_probe(int device, const std::string& profile);

}  // namespace tilellm::vulkan
