// The CUDA backend's rounding of activations for its fp16 prompt GEMM: the whole input scaled by 2^e, e
// putting its largest magnitude in [2^14, 2^15) (fp16's range reaches 65504: activations of any size fit,
// and the small ones keep fp16's precision), rounded to fp16 (nearest even), scaled back. The kernel
// (cuda/kernels/matmul_half.cu, with its copy of the exponent's rule in cuda/kernels/kernels.h) computes
// exactly this; the host copy gives a reference the values it multiplies by (Backend::rounded_matmul_input).
#pragma once

#include <cstdint>

namespace tilellm {

// 14 - floor(log2 m) for the largest magnitude m, within +-110 (2^e and 2^-e stay normal floats); 0 for m
// 0, infinite or NaN.
int f16_scale_exponent(float m);

// out[i] = fp16(x[i] * 2^e) * 2^-e over the n values, e from their largest magnitude. out may be x.
void round_activations_f16_scaled(const float* x, int64_t n, float* out);

}  // namespace tilellm
