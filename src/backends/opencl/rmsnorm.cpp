// RMSNorm on the device, alone and fused with the residual add before it: one work-group per row, a group
// reduction of the sum of squares (rmsnorm.cl); decode's norm also rounded for the integer product after it.
// And the scale of a norm left to the products that read it (matmul.cpp's matmul_add_rmsnorm), applied where
// anything else reads it.
#include <algorithm>

#include "backends/opencl/opencl_backend.h"
#include "base/error.h"

namespace tilellm {

void OpenclBackend::rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  if (n_rows <= 0 || n <= 0) return;
  if (k_rmsnorm_.on_cpu) {
    host_in(x, n_rows * n);
    host_out(y, n_rows * n);
    return cpu_->rmsnorm(x, w, y, n_rows, n, eps);
  }
  if (n > opts_.max_width)
    fail("OpenCL backend: rmsnorm rows of {} exceed the width {} sized at start", n, opts_.max_width);
  const opencl::Buffer& xb = dev_in(x, n_rows * n, in_a_, "rmsnorm");
  const opencl::Buffer& wb = norm_weight(w, n);
  // In place (y == x) the kernel writes the buffer it reads, which it allows (rmsnorm.cl).
  const opencl::Buffer& yb = y == x ? xb : dev_out(y, n_rows * n, out_, "rmsnorm");
  // Decode's norm (one row, not in place) rounded for the integer product after it, as attention rounds
  // its output (rmsnorm.cl yq): the slot the rounding held now does not.
  const int slot = n_rows == 1 && y != x && rounds_output(y, n) ? (rounded_.slot == 0 ? 1 : 0) : -1;
  enqueue_rmsnorm(xb, wb, yb, n_rows, n, eps, slot);
  dev_done(y, n_rows * n, yb);
  if (slot >= 0) rounded_ = {reinterpret_cast<const uint8_t*>(y), n, slot};
}

void OpenclBackend::enqueue_rmsnorm(const opencl::Buffer& x, const opencl::Buffer& w, const opencl::Buffer& y,
                                    int64_t n_rows, int64_t n, float eps, int y_slot) {
  const opencl::Kernel& k = k_rmsnorm_;
  // One work-group per row, up to one float4 per item (64 to 1024 items, as the kernel and local memory
  // allow): each item's loads then do not queue behind each other (rmsnorm.cl).
  const size_t wg = reduction_wg(k, std::clamp<size_t>(size_t(n + 3) / 4, 64, 1024), 1);
  const cl_int nn = cl_int(n);
  opencl::set_arg(k, 0, x);
  opencl::set_arg(k, 1, w);
  opencl::set_arg(k, 2, y);
  opencl::set_arg(k, 3, nn);
  opencl::set_arg(k, 4, eps);
  opencl::set_local_arg(k, 5, wg * sizeof(float));
  if (y_slot >= 0)
    opencl::set_arg(k, 6, q8_slot(y_slot));
  else
    opencl::set_null_arg(k, 6);
  const size_t global[1] = {size_t(n_rows) * wg}, local[1] = {wg};
  rt_.launch(k, 1, global, local);
}

const opencl::Buffer& OpenclBackend::norm_weight(const float* w, int64_t n) {
  // The model's norm weights are on the device since upload_model; any other vector goes up now.
  if (auto it = norms_.find(w); it != norms_.end() && it->second.bytes == size_t(n) * sizeof(float))
    return it->second;
  rt_.write_now(vec_, 0, w, size_t(n) * sizeof(float));
  ++epoch_;
  return vec_;
}

void OpenclBackend::add_rmsnorm(float* acc, const float* x, const float* w, float* y, int64_t n_rows,
                                int64_t n, float eps) {
  if (n_rows <= 0 || n <= 0) return;
  if (k_add_rmsnorm_.on_cpu) return Backend::add_rmsnorm(acc, x, w, y, n_rows, n, eps);  // each op's own path
  if (n > opts_.max_width)
    fail("OpenCL backend: add_rmsnorm rows of {} exceed the width {} sized at start", n, opts_.max_width);
  if (y == acc || y == x) fail("internal: add_rmsnorm's output aliases an input");
  const opencl::Buffer& ab = dev_in(acc, n_rows * n, in_a_, "add_rmsnorm");
  const opencl::Buffer& xb = dev_in(x, n_rows * n, in_b_, "add_rmsnorm");
  const opencl::Buffer& wb = norm_weight(w, n);
  const opencl::Buffer& yb = dev_out(y, n_rows * n, out_, "add_rmsnorm");
  const opencl::Kernel& k = k_add_rmsnorm_;
  const size_t wg = reduction_wg(k, std::clamp<size_t>(size_t(n + 3) / 4, 64, 1024), 1);  // as rmsnorm
  const cl_int nn = cl_int(n);
  opencl::set_arg(k, 0, ab);
  opencl::set_arg(k, 1, xb);
  opencl::set_arg(k, 2, wb);
  opencl::set_arg(k, 3, yb);
  opencl::set_arg(k, 4, nn);
  opencl::set_arg(k, 5, eps);
  opencl::set_local_arg(k, 6, wg * sizeof(float));
  const size_t global[1] = {size_t(n_rows) * wg}, local[1] = {wg};
  rt_.launch(k, 1, global, local);
  dev_done(acc, n_rows * n, ab);
  dev_done(y, n_rows * n, yb);
}

void OpenclBackend::settle_norm(const void* p, size_t bytes, bool overwrite) {
  if (!pending_.y) return;
  const uint8_t* b = static_cast<const uint8_t*>(p);
  const size_t pb = size_t(pending_.n) * sizeof(float);
  if (b + bytes <= pending_.y || b >= pending_.y + pb) return;  // another range
  const PendingNorm pn = pending_;
  pending_ = {};
  forget_rounding(pn.y, size_t(pn.n) * sizeof(float));  // the rounding of its values before the scale
  if (overwrite && b <= pn.y && b + bytes >= pn.y + pb) return;  // all of it written anew: nothing to scale
  // y is the start of a mirrored array (matmul_add_rmsnorm), its device copy the newer one.
  enqueue_rms_scale(mirror_dev_[size_t(find_mirror(pn.y, pb, "rms_scale"))], pn.n);
}

void OpenclBackend::enqueue_rms_scale(const opencl::Buffer& y, int64_t n) {
  const opencl::Kernel& k = k_rms_scale_;
  const size_t wg = std::min<size_t>(64, k.max_wg);
  const cl_int nn = cl_int(n);
  opencl::set_arg(k, 0, y);
  opencl::set_arg(k, 1, norm_part_);
  opencl::set_arg(k, 2, nn);
  const size_t global[1] = {(size_t(n) + wg - 1) / wg * wg}, local[1] = {wg};
  rt_.launch(k, 1, global, local);
}

}  // namespace tilellm
