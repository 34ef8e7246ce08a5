// The image weight path's layout plan (--gpu-memory image; kernels/matmul_image.cl has the texel mapping):
// whether a weight of n_out device rows of row_bytes bytes fits a 2D image of RGBA32UI texels under the
// device's limits (after the profile's clamp), and the image's shape when it does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/opencl/device.h"

namespace tilellm::opencl {

constexpr size_t kImageTexelBytes = 16;  // CL_RGBA x CL_UNSIGNED_INT32
constexpr size_t kImageRowAlign = 128;   // each matrix row starts on a 128-byte boundary (8 texels)

struct ImagePlan {
  bool fits = false;
  size_t width = 0;   // texels per image line, a multiple of 8
  size_t lines = 0;   // image lines per matrix row (1 unless a row is longer than the widest image)
  size_t height = 0;  // n_out * lines
  std::string why;    // when it does not fit: the limit it exceeds, in words
};

// The limits are caps' image2d_max_width/height and max_alloc_bytes, further lowered by max_width and
// max_height when they are non-zero (a test clamp, OpenclBackendOptions). A row of T = ceil(row_bytes / 128)
// * 8 texels takes L = ceil(T / W8) lines (W8: the widest usable width, the width limit rounded down to a
// multiple of 8), each W = ceil(T / L) rounded up to a multiple of 8 texels wide.
ImagePlan plan_weight_image(const Capabilities& caps, size_t row_bytes, int64_t n_out, size_t max_width = 0,
                            size_t max_height = 0);

}  // namespace tilellm::opencl
