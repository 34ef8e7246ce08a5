// Where a GPU backend keeps its weight matrices (--gpu-memory, MNN's memory modes). Buffer: plain device
// buffers (the default). Image: 2D images read through the texture path (the seed's Tile-GEMM "Path C"),
// for the weight formats a backend has image kernels for; every other weight stays a buffer, with a note.
#pragma once

#include <string_view>

namespace tilellm {

enum class GpuMemory { Buffer, Image };

inline std::string_view gpu_memory_name(GpuMemory m) {
  return m == GpuMemory::Image ? "image" : "buffer";
}

}  // namespace tilellm
