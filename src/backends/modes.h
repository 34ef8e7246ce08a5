// The numeric and memory modes a session asks of its backend, the same words for every backend:
//   WeightsMode (--weights): how the matrices are held. Native: the GGUF types as stored (a backend may
//     repack them losslessly, e.g. the CPU's tiles); the others convert every matrix at load from its exact
//     float values: Int4B64 (4-bit asymmetric, one fp16 scale and offset per 64 inputs: MNN's Int4-Block64),
//     Int8B0 (8-bit asymmetric, one pair per output row over all inputs: MNN's Int8-Block0), Int4B0 (4-bit,
//     one pair per output row: MNN's Int4-Block0, the W4A8 of its GemmSpeed), F16, F32 (exact floats: the
//     float GEMM). The integer conversions are format/asym_quant.h's, so every backend holds the same codes;
//     a backend without a kernel for a mode refuses it by name.
//   ActivationMode (--activations): Quantized, activations rounded per matmul to the format the weight
//     type pairs with (llama.cpp's pairings: Q8_0, Q8_1, Q8_K, F16, BF16) and dotted in integers where the
//     backend can; F32, exact dequantized weights times float32 activations (the reference float path).
//     GPU backends compute the float path whatever is asked.
//   GpuMemory (--gpu-memory, MNN's memory modes): Buffer, plain device buffers; Image, 2D images read
//     through the texture path (the seed's Tile-GEMM "Path C") for the formats a backend has image kernels
//     for, every other weight staying a buffer with a note. Host backends hold host memory only.
//   KvMemory (--kv-memory): Buffer, the FB-KV cache in device buffers; Image, in 2D images (the seed's FB-KV
//   as
//     an RGBA16F texture), where a backend has that path (Vulkan); the others refuse it by name.
#pragma once

#include <string_view>

namespace tilellm {

enum class WeightsMode { Native, Int4B64, Int8B0, Int4B0, F16, F32 };
// "native", "int4b64", "int8b0", "int4b0", "f16", "f32"; parse throws tilellm::Error naming the bad value.
WeightsMode parse_weights_mode(std::string_view s);
const char* weights_mode_name(WeightsMode m);

enum class ActivationMode { Quantized, F32 };

enum class GpuMemory { Buffer, Image };

inline std::string_view gpu_memory_name(GpuMemory m) {
  return m == GpuMemory::Image ? "image" : "buffer";
}

enum class KvMemory { Buffer, Image };

inline std::string_view kv_memory_name(KvMemory m) {
  return m == KvMemory::Image ? "image" : "buffer";
}

}  // namespace tilellm
