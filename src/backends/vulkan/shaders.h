// The Vulkan backend's compute shaders as SPIR-V words, compiled from shaders/*.comp by glslc at build time
// and embedded into the binary (cmake/vulkan.cmake). A shader that calls a reduction (tl_group_*) is compiled
// twice: with the shared-memory reductions (TL_SUBGROUPS 0) and with the subgroup ones (1, only used on a
// device whose compute shaders have subgroup arithmetic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tilellm::vulkan {

struct ShaderCode {
  const char* name;  // the file's name without .comp
  bool subgroups;
  const uint32_t* words;
  size_t n_words;
};

// The embedded shader `name` (its subgroup variant when asked), or null.
const ShaderCode* find_shader(std::string_view name, bool subgroups);

// A hash of every embedded shader's name, variant and words (the pipeline cache's key: a rebuilt shader
// makes the cached pipelines and verdict another key's).
uint64_t shaders_hash();

}  // namespace tilellm::vulkan
