// The OpenCL kernel sources, embedded into the binary at build time (cmake/embed_opencl_kernels.cmake writes
// the table from src/backends/opencl/kernels/*.cl), so nothing is looked up on disk at run time.
#pragma once

#include <cstddef>
#include <string_view>

namespace tilellm::opencl {

struct KernelSource {
  const char* name;  // the file name without ".cl": "rmsnorm", "matmul_q4_0", "common", ...
  const char* text;
};

extern const KernelSource kKernelSources[];
extern const size_t kKernelSourceCount;

// The text of kernels/<name>.cl; throws tilellm::Error when the build embedded no such file.
std::string_view kernel_source(std::string_view name);

}  // namespace tilellm::opencl
