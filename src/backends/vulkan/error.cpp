// VkResult names (error.h).
#include "backends/vulkan/error.h"

namespace tilellm::vulkan {

const char* result_name(VkResult r) {
  switch (r) {
#define TL_VK_RESULT(x) \
  case x:               \
    return #x;
    TL_VK_RESULT(VK_SUCCESS)
    TL_VK_RESULT(VK_NOT_READY)
    TL_VK_RESULT(VK_TIMEOUT)
    TL_VK_RESULT(VK_INCOMPLETE)
    TL_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    TL_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    TL_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    TL_VK_RESULT(VK_ERROR_DEVICE_LOST)
    TL_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    TL_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    TL_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    TL_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    TL_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    TL_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    TL_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    TL_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    TL_VK_RESULT(VK_ERROR_UNKNOWN)
    TL_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    TL_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    TL_VK_RESULT(VK_ERROR_FRAGMENTATION)
    TL_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef TL_VK_RESULT
    default:
      return "unknown VkResult";
  }
}

void check_failed(VkResult r, const char* call) {
  fail("Vulkan: {} failed: {} ({})", call, result_name(r), int(r));
}

}  // namespace tilellm::vulkan
