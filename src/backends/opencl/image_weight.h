// The image weight path's layout plan on OpenCL (--gpu-memory image; kernels/matmul_image.cl has the texel
// mapping, backends/image_plan.h the plan): whether a weight fits a 2D image of RGBA32UI texels under the
// device's limits (after the profile's clamp), and the image's shape when it does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/image_plan.h"
#include "backends/opencl/device.h"

namespace tilellm::opencl {

using tilellm::ImagePlan;
using tilellm::kImageRowAlign;
using tilellm::kImageTexelBytes;

// backends/image_plan.h's plan under caps' image2d_max_width/height and max_alloc_bytes, further lowered by
// max_width and max_height when they are non-zero (a test clamp, OpenclBackendOptions); a device without
// image support fits nothing.
ImagePlan plan_weight_image(const Capabilities& caps, size_t row_bytes, int64_t n_out, size_t max_width = 0,
                            size_t max_height = 0);

}  // namespace tilellm::opencl
