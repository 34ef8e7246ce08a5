// The image weight path (--gpu-memory image): weights planned into 2D images (image_weight.h), uploaded row
// by row in the buffer path's device layout, and the matrix products that read them
// (kernels/matmul_image.cl). matmul.cpp dispatches to these for weights held in an image; a weight that
// cannot be held in one stays a buffer, and note_buffer_weight() says which and why.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backends/opencl/error.h"
#include "backends/opencl/image_weight.h"
#include "backends/opencl/opencl_backend.h"
#include "base/error.h"

namespace tilellm {
namespace opencl {

ImagePlan plan_weight_image(const Capabilities& caps, size_t row_bytes, int64_t n_out, size_t max_width,
                            size_t max_height) {
  if (!caps.images) {
    ImagePlan p;
    p.why = "the device has no image support";
    return p;
  }
  size_t wlim = caps.image2d_max_width, hlim = caps.image2d_max_height;
  if (max_width > 0) wlim = std::min(wlim, max_width);
  if (max_height > 0) hlim = std::min(hlim, max_height);
  return tilellm::plan_weight_image(row_bytes, n_out, wlim, hlim, caps.max_alloc_bytes);
}

}  // namespace opencl

namespace {

// The order of kMatmulKernels in opencl_backend.cpp (F32, F16, Q4_0, Q4_1, Q8_0); F32 has no image kernel.
// Index of a device format (OpenclBackend::DevFormat, as an int) into the image kernel tables: F16 .. Q8_0
// (1 .. 4) in their own order, KQ4 (8) at 5; F32 (0), the converted formats and KQ8 have none: -1.
int image_kernel_index(int fmt) {
  if (fmt >= 1 && fmt <= 4) return fmt;
  return fmt == 8 ? 5 : -1;
}

constexpr const char* kMatmulImageKernels[OpenclBackend::kImageKernels] = {
    nullptr,           "matmul_image_f16", "matmul_image_q4_0", "matmul_image_q4_1", "matmul_image_q8_0",
    "matmul_image_kq4"};
constexpr const char* kMatvecImageKernels[OpenclBackend::kImageKernels] = {
    nullptr,           "matvec_image_f16", "matvec_image_q4_0", "matvec_image_q4_1", "matvec_image_q8_0",
    "matvec_image_kq4"};

}  // namespace

void OpenclBackend::image_kernels() {
  for (int i = 1; i < kImageKernels; ++i) {
    k_matmul_img_[i] = rt_.kernel(image_program_, kMatmulImageKernels[i]);
    k_matvec_img_[i] = rt_.kernel(image_program_, kMatvecImageKernels[i]);
  }
}

bool OpenclBackend::has_image_kernel(DevFormat f) const {
  const int i = image_kernel_index(int(f));
  return i >= 0 && bool(k_matmul_img_[i].handle);
}

opencl::Kernel& OpenclBackend::matmul_image_kernel(DevFormat f) {
  const int i = image_kernel_index(int(f));
  if (i < 0 || !k_matmul_img_[i].handle)
    fail("internal: no OpenCL image matmul kernel for device format {}", int(f));
  return k_matmul_img_[i];
}

opencl::Kernel& OpenclBackend::matvec_image_kernel(DevFormat f) {
  const int i = image_kernel_index(int(f));
  if (i < 0 || !k_matvec_img_[i].handle)
    fail("internal: no OpenCL image matvec kernel for device format {}", int(f));
  return k_matvec_img_[i];
}

size_t OpenclBackend::image_weights() const {
  return size_t(
      std::count_if(weights_.begin(), weights_.end(), [](const auto& e) { return bool(e.second.img); }));
}

void OpenclBackend::note_buffer_weight(const std::string& name, const std::string& why) {
  std::string line = fmt::format("weight {} stays a buffer: {}", name, why);
  std::fprintf(stderr, "note: OpenCL --gpu-memory image: %s\n", line.c_str());
  buffer_weights_.push_back(std::move(line));
}

bool OpenclBackend::make_weight_image(DeviceWeight& dw, const std::string& name,
                                      const std::function<void(int64_t, uint8_t*)>& device_row) {
  if (!has_image_kernel(dw.fmt)) {
    note_buffer_weight(name, caps().images ? fmt::format("no image kernel reads {}", type_name(dw.host_type))
                                           : std::string("the device has no image support"));
    return false;
  }
  const opencl::ImagePlan plan = opencl::plan_weight_image(caps(), dw.row_bytes, dw.n_out,
                                                           opts_.image_max_width, opts_.image_max_height);
  if (!plan.fits) {
    note_buffer_weight(name, fmt::format("{} (profile {})", plan.why, caps().profile));
    return false;
  }
  cl_image_format fmt{CL_RGBA, CL_UNSIGNED_INT32};
  cl_image_desc desc{};
  desc.image_type = CL_MEM_OBJECT_IMAGE2D;
  desc.image_width = plan.width;
  desc.image_height = plan.height;
  cl_int err = CL_SUCCESS;
  opencl::MemHandle img(clCreateImage(rt_.context(), CL_MEM_READ_ONLY, &fmt, &desc, nullptr, &err));
  opencl::check(err, fmt::format("clCreateImage({} x {} RGBA32UI for {})", plan.width, plan.height, name));
  // A slab of rows at a time (~16 MiB), each row's device bytes at the start of its L lines, zero-padded.
  const size_t row_span = plan.lines * plan.width * opencl::kImageTexelBytes;
  const int64_t slab = std::max<int64_t>(1, int64_t(16 << 20) / int64_t(row_span));
  std::vector<uint8_t> lines(size_t(std::min(slab, dw.n_out)) * row_span);
  for (int64_t r0 = 0; r0 < dw.n_out; r0 += slab) {
    const int64_t nr = std::min(slab, dw.n_out - r0);
    std::memset(lines.data(), 0, lines.size());
    for (int64_t r = 0; r < nr; ++r) device_row(r0 + r, lines.data() + size_t(r) * row_span);
    const size_t origin[3] = {0, size_t(r0) * plan.lines, 0};
    const size_t region[3] = {plan.width, size_t(nr) * plan.lines, 1};
    opencl::check(
        clEnqueueWriteImage(rt_.queue(), img.get(), CL_TRUE, origin, region,
                            plan.width * opencl::kImageTexelBytes, 0, lines.data(), 0, nullptr, nullptr),
        "clEnqueueWriteImage");
  }
  dw.img = std::move(img);
  dw.img_width = int(plan.width);
  dw.img_lines = int(plan.lines);
  return true;
}

void OpenclBackend::enqueue_matvec_image(const DeviceWeight& dw, const opencl::Buffer& x,
                                         const opencl::Buffer& y) {
  constexpr int64_t kRows = 4;  // TL_MV_ROWS (common.cl)
  const opencl::Kernel& k = matvec_image_kernel(dw.fmt);
  // About one 32-weight unit per item, at least one SIMD width, at most 64.
  const int64_t want =
      std::clamp<int64_t>((dw.n_in + 31) / 32, int64_t(std::min<size_t>(k.wg_multiple, 64)), 64);
  const size_t wg = reduction_wg(k, size_t(want), 4);
  const cl_mem img = dw.img.get();
  const cl_int width = dw.img_width, lines = dw.img_lines, n_in = cl_int(dw.n_in), n_out = cl_int(dw.n_out);
  opencl::set_arg(k, 0, sizeof(cl_mem), &img);
  opencl::set_arg(k, 1, width);
  opencl::set_arg(k, 2, lines);
  opencl::set_arg(k, 3, n_in);
  opencl::set_arg(k, 4, n_out);
  opencl::set_arg(k, 5, x);
  opencl::set_arg(k, 6, y);
  opencl::set_local_arg(k, 7, wg * 4 * sizeof(float));
  const size_t global[1] = {size_t((dw.n_out + kRows - 1) / kRows) * wg}, local[1] = {wg};
  rt_.launch(k, 1, global, local);
}

void OpenclBackend::enqueue_matmul_image(const DeviceWeight& dw, int64_t n_tok, const opencl::Buffer& x,
                                         const opencl::Buffer& y) {
  const opencl::Kernel& k = matmul_image_kernel(dw.fmt);
  const int64_t want =
      std::clamp<int64_t>((dw.n_in + 31) / 32, int64_t(std::min<size_t>(k.wg_multiple, 64)), 64);
  const size_t wg = reduction_wg(k, size_t(want), 1);
  const cl_mem img = dw.img.get();
  const cl_int width = dw.img_width, lines = dw.img_lines, n_in = cl_int(dw.n_in), n_out = cl_int(dw.n_out);
  const cl_int nt = cl_int(n_tok);
  opencl::set_arg(k, 0, sizeof(cl_mem), &img);
  opencl::set_arg(k, 1, width);
  opencl::set_arg(k, 2, lines);
  opencl::set_arg(k, 3, n_in);
  opencl::set_arg(k, 4, n_out);
  opencl::set_arg(k, 5, nt);
  opencl::set_arg(k, 6, x);
  opencl::set_arg(k, 7, y);
  opencl::set_local_arg(k, 8, wg * sizeof(float));
  const size_t tiles = size_t((n_tok + kMatmulTile - 1) / kMatmulTile);
  const size_t global[2] = {size_t(dw.n_out) * wg, tiles}, local[2] = {wg, 1};
  rt_.launch(k, 2, global, local);
}

}  // namespace tilellm
