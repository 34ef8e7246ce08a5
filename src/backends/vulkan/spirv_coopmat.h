// Cooperative-matrix types written by glslang 11 (shaders/coopmat.glsl) made valid SPIR-V: its spirv_type
// puts the type's parameters in OpTypeCooperativeMatrixKHR as literal words, where SPV_KHR_cooperative_matrix
// wants ids: the component type (given as its float width, 16 or 32) and 32-bit unsigned constants for the
// scope, rows, columns and use. The rewrite adds those constants (and an unsigned int type if the module has
// none), moves the scalar type declarations ahead of every other type so that each id is declared before the
// matrix type that names it, and raises the id bound. A module without the instruction, or already in the id
// form (a compiler that knows the extension wrote it, or this rewrite did), comes back unchanged.
#pragma once

#include <cstdint>
#include <vector>

namespace tilellm::vulkan {

// Throws tilellm::Error naming the fault for a malformed module or a matrix type whose component width is
// neither 16 nor 32 or whose float type the module does not declare.
std::vector<uint32_t> resolve_cooperative_matrix_types(const std::vector<uint32_t>& spirv);

}  // namespace tilellm::vulkan
