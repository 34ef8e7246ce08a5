// The image weight path's layout plan (image_plan.h).
#include "backends/image_plan.h"

#include <fmt/format.h>

namespace tilellm {

ImagePlan plan_weight_image(size_t row_bytes, int64_t n_out, size_t width_limit, size_t height_limit,
                            uint64_t max_bytes) {
  ImagePlan p;
  const size_t w8 = width_limit / 8 * 8;
  const size_t texels =
      (row_bytes + kImageRowAlign - 1) / kImageRowAlign * (kImageRowAlign / kImageTexelBytes);
  if (w8 == 0) {
    p.why = fmt::format("the 2D image width limit of {} texels is below one 128-byte line", width_limit);
    return p;
  }
  p.lines = (texels + w8 - 1) / w8;
  p.width = ((texels + p.lines - 1) / p.lines + 7) / 8 * 8;
  p.height = size_t(n_out) * p.lines;
  const uint64_t bytes = uint64_t(p.width) * p.height * kImageTexelBytes;
  if (p.height > height_limit) {
    p.why = fmt::format("its image of {} x {} texels exceeds the 2D image limit of {} x {}", p.width,
                        p.height, width_limit, height_limit);
  } else if (bytes > max_bytes) {
    p.why = fmt::format("its image of {} bytes exceeds the device's largest allocation of {} bytes", bytes,
                        max_bytes);
  } else {
    p.fits = true;
  }
  return p;
}

}  // namespace tilellm
