// The GPU backends' rounding of activations for their integer products (--activations q8): per block of 32,
// d = max|x| / 127 and q = round(x / d) (as x * (1 / d), half away from zero: llama.cpp's CUDA rounding).
// The CUDA kernels (cuda/kernels/common.cuh quantize_block) and the Vulkan decode shader
// (vulkan/shaders/matvec_q8.comp) compute exactly this; the host copy gives a reference the values those
// kernels multiply by (Backend::rounded_matmul_input).
#pragma once

#include <cstdint>

namespace tilellm {

// out[i] = d * q for each of the n / 32 blocks of x (n a multiple of 32), operation for operation as the
// kernels round. out may be x.
void round_activations_q8(const float* x, int64_t n, float* out);

}  // namespace tilellm
