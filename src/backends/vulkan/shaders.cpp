// Lookup in the embedded shader table (shaders.h); the table is generated (cmake/embed_spirv.cmake).
#include "backends/vulkan/shaders.h"

namespace tilellm::vulkan {

extern const ShaderCode kShaderTable[];
extern const size_t kShaderCount;

const ShaderCode* find_shader(std::string_view name, bool subgroups) {
  for (size_t i = 0; i < kShaderCount; ++i) {
    if (kShaderTable[i].name == name && kShaderTable[i].subgroups == subgroups) return &kShaderTable[i];
  }
  return nullptr;
}

}  // namespace tilellm::vulkan
