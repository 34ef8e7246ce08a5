// The image weight path's layout plan (--gpu-memory image), shared by the GPU backends that hold weight
// matrices in 2D images of 16-byte texels (OpenCL: CL_RGBA + CL_UNSIGNED_INT32; Vulkan:
// VK_FORMAT_R32G32B32A32_UINT): whether a weight of n_out device rows of row_bytes bytes fits under the
// device's limits, and the image's shape when it does. Each matrix row holds its device bytes
// (backends/device_rows.h) zero-padded to a multiple of 128 bytes (8 texels) and takes L image lines of W
// texels, so texel t of row r is at (t % W, r L + t / W).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tilellm {

constexpr size_t kImageTexelBytes = 16;  // four 32-bit unsigned channels
constexpr size_t kImageRowAlign = 128;   // each matrix row starts on a 128-byte boundary (8 texels)

struct ImagePlan {
  bool fits = false;
  size_t width = 0;   // texels per image line (W), a multiple of 8
  size_t lines = 0;   // image lines per matrix row (L: 1 unless a row is longer than the widest image)
  size_t height = 0;  // n_out * lines
  std::string why;    // when it does not fit: the limit it exceeds, in words
};

// A row of T = ceil(row_bytes / 128) * 8 texels takes L = ceil(T / W8) lines (W8: width_limit rounded down to
// a multiple of 8), each W = ceil(T / L) rounded up to a multiple of 8 texels wide. It fits when n_out * L
// lines are within height_limit and the image's bytes within max_bytes.
ImagePlan plan_weight_image(size_t row_bytes, int64_t n_out, size_t width_limit, size_t height_limit,
                            uint64_t max_bytes);

}  // namespace tilellm
