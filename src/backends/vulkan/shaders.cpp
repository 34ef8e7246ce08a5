// Lookup in the embedded shader table (shaders.h); the table is generated (cmake/embed_spirv.cmake).
#include "backends/vulkan/shaders.h"

#include <cstring>

#include "backends/program_cache.h"

namespace tilellm::vulkan {

extern const ShaderCode kShaderTable[];
extern const size_t kShaderCount;

const ShaderCode* find_shader(std::string_view name, bool subgroups) {
  for (size_t i = 0; i < kShaderCount; ++i) {
    if (kShaderTable[i].name == name && kShaderTable[i].subgroups == subgroups) return &kShaderTable[i];
  }
  return nullptr;
}

uint64_t shaders_hash() {
  uint64_t h = 0;
  for (size_t i = 0; i < kShaderCount; ++i) {
    const ShaderCode& c = kShaderTable[i];
    h = cache_hash(c.name, std::strlen(c.name), h ^ (c.subgroups ? 1 : 0));
    h = cache_hash(c.words, c.n_words * 4, h);
  }
  return h;
}

}  // namespace tilellm::vulkan
