// Vulkan error reporting: every VkResult goes through check(), which throws tilellm::Error naming the call
// that failed and the result by its name.
#pragma once

#include "backends/vulkan/loader.h"
#include "base/error.h"

namespace tilellm::vulkan {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY", ...; "unknown VkResult" for a code not in the table.
const char* result_name(VkResult r);

[[noreturn]] void check_failed(VkResult r, const char* call);

// Throws tilellm::Error("Vulkan: <call> failed: <NAME> (<code>)") unless r is VK_SUCCESS.
inline void check(VkResult r, const char* call) {
  if (r != VK_SUCCESS) check_failed(r, call);
}

}  // namespace tilellm::vulkan
