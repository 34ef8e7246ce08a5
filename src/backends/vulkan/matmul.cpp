// Vulkan matmul (shaders/matmul.comp, and for one token of a block format matvec_q8.comp on the integer path
// or matvec.comp on the float one; prompts on matmul_coopmat.comp where the device has cooperative
// matrices): per device format, decode (1 token) on the matvecs' row groups, prompts on 128 x 128 tiles of
// cooperative matrices or 4-row x 4-token float tiles; an integer matvec that failed the self-check hands
// decode to the float matvec, a float matvec that failed to the matmul one, a cooperative-matrix GEMM to
// the float tiles, and the host backend multiplies only when none is left. A weight held in an image
// (--gpu-memory image) takes the same chain of the shaders' _image variants. One token's gate and up
// products on the integer path take matvec_q8_glu.comp with the gated unit (matmul_glu).
#include <algorithm>

#include "backends/q8_round.h"
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::record_quantize(const vulkan::Buffer& x, int64_t n, Q8Held held) {
  if (held.src == x.get() && held.n == n) return;
  if (n % 32 != 0) fail("internal: Vulkan integer products of an input of {} (not whole blocks of 32)", n);
  if (n > opts_.max_in_elems)
    fail("internal: Vulkan integer products of an input of {} past {}", n, opts_.max_in_elems);
  const uint32_t pc = uint32_t(n);
  uint32_t gx = 0, gy = 0;
  elementwise_groups(n / 32, p_quantize_.local_size, gx, gy);
  rt_.dispatch(p_quantize_, {&x, &q8x_}, &pc, gx, gy);
}

void VulkanBackend::record_matmul(const DeviceWeight& dw, int64_t n_tok, const vulkan::Buffer& x,
                                  const vulkan::Buffer& y) {
  const bool q8 = uses_q8(dw, n_tok);
  const bool one = n_tok == 1 && (q8 || !product(Product::Matvec, dw).on_cpu);
  const bool cm = uses_coopmat(dw, n_tok);
  const vulkan::Pipeline& p = product(q8    ? Product::MatvecQ8
                                      : one ? Product::Matvec
                                      : cm  ? Product::Coopmat
                                            : Product::Matmul,
                                      dw);
  // Rows and tokens of one work-group.
  const int64_t group_rows = q8                               ? q8_rows_
                             : cm                             ? kCoopmatRows
                             : !one                           ? kPrefillRows
                             : device_format_is_block(dw.fmt) ? mv_rows_
                                                              : kDecodeRows;
  const int64_t group_tokens = one ? 1 : cm ? kCoopmatTokens : 4;
  // One dispatch per buffer of rows, each writing its rows' columns of y; one for a matrix in an image.
  const size_t parts = dw.img ? 1 : dw.bufs.size();
  for (size_t b = 0; b < parts; ++b) {
    const int64_t r0 = int64_t(b) * dw.rows_per_buf, rows = std::min(dw.rows_per_buf, dw.n_out - r0);
    struct {
      uint32_t row_bytes, n_in, n_rows, n_tok, n_out, row0, img_width;
    } pc{dw.img ? dw.img_span : uint32_t(dw.row_bytes),
         uint32_t(dw.n_in),
         uint32_t(rows),
         uint32_t(n_tok),
         uint32_t(dw.n_out),
         uint32_t(r0),
         dw.img_width};
    // Row groups past the device's x limit continue in z (the shader joins them).
    uint64_t row_groups = (uint64_t(rows) + group_rows - 1) / group_rows;
    // The block formats' matvec may take several row groups a work-group (--vk-matvec's GROUPS).
    if (one && device_format_is_block(dw.fmt) && mv_groups_ > 0)
      row_groups = std::min<uint64_t>(row_groups, mv_groups_);
    const uint32_t gx = uint32_t(std::min<uint64_t>(row_groups, caps().max_group_count[0]));
    const uint32_t gz = uint32_t((row_groups + gx - 1) / gx);
    const uint32_t gy = uint32_t((n_tok + group_tokens - 1) / group_tokens);
    if (dw.img) {
      rt_.dispatch(p, dw.img, {q8 ? &q8x_ : &x, &y}, &pc, gx, gy, gz);
    } else {
      rt_.dispatch(p, {&dw.bufs[b], q8 ? &q8x_ : &x, &y}, &pc, gx, gy, gz);
    }
  }
}

void VulkanBackend::matmul(const Weight& w, const float* x, int64_t n_tok, float* y) {
  check_tokens(n_tok, "matmul");
  const Q8Held held = q8_held_;
  if (replaying(y)) return;
  q8_held_ = held;  // kept through dev_in, which clears it if it writes the buffer held
  const DeviceWeight& dw = find_weight(w, "matmul");
  const bool host = product(Product::Matmul, dw).on_cpu && !uses_coopmat(dw, n_tok) &&
                    (n_tok > 1 || (product(Product::Matvec, dw).on_cpu && !uses_q8(dw, n_tok)));
  if (host) {
    host_in(x, n_tok * w.n_in);
    host_out(y, n_tok * w.n_out);
    return cpu_->matmul(w, x, n_tok, y);
  }
  const vulkan::Buffer& dx = dev_in(x, n_tok * w.n_in, in_a_, "matmul");
  const vulkan::Buffer& dy = dev_out(y, n_tok * w.n_out, out_, "matmul");
  const bool q8 = uses_q8(dw, n_tok);
  if (q8) record_quantize(dx, w.n_in, q8_held_);
  record_matmul(dw, n_tok, dx, dy);
  if (q8 && dy.get() != dx.get()) q8_held_ = {dx.get(), w.n_in};  // the next product of x needs no rounding
  dev_done(y, n_tok * w.n_out, dy);
}

void VulkanBackend::rounded_matmul_input(const Weight& w, const float* x, int64_t n_tok, float* out) const {
  if (uses_q8(find_weight(w, "rounded_matmul_input"), n_tok)) return round_activations_q8(x, w.n_in, out);
  std::copy(x, x + n_tok * w.n_in, out);
}

void VulkanBackend::matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                                  int64_t n_tok) {
  // A replayed step only counts its ops (matmul does); more than 4 products are not kept together.
  bool together = mode_ != StepMode::Replaying && n <= 4;
  for (int i = 0; i < n && together; ++i) {
    const DeviceWeight& dw = find_weight(*ws[i], "matmul");
    together = (!product(Product::Matmul, dw).on_cpu || uses_coopmat(dw, n_tok)) &&
               (n_tok > 1 || uses_q8(dw, n_tok) || !product(Product::Matvec, dw).on_cpu) && ys[i] != x &&
               is_mirror_start(ys[i], n_tok * ws[i]->n_out);
  }
  if (!together) return Backend::matmul_shared(ws, ys, n, x, n_tok);
  check_tokens(n_tok, "matmul");
  const vulkan::Buffer& dx = dev_in(x, n_tok * ws[0]->n_in, in_a_, "matmul");
  // Each output is its own mirror (checked above): dev_out returns that mirror's buffer.
  const vulkan::Buffer* dy[4] = {};
  for (int i = 0; i < n; ++i) {
    step_ops_ += 1;
    dy[i] = &dev_out(ys[i], n_tok * ws[i]->n_out, out_, "matmul");
  }
  // One rounding of the shared input serves every integer product of it.
  bool q8 = false;
  for (int i = 0; i < n; ++i) q8 = q8 || uses_q8(find_weight(*ws[i], "matmul"), n_tok);
  if (q8) record_quantize(dx, ws[0]->n_in, q8_held_);
  rt_.begin_independent();
  for (int i = 0; i < n; ++i) record_matmul(find_weight(*ws[i], "matmul"), n_tok, dx, *dy[i]);
  rt_.end_independent();
  for (int i = 0; i < n; ++i) dev_done(ys[i], n_tok * ws[i]->n_out, *dy[i]);
  bool overwritten = false;
  for (int i = 0; i < n; ++i) overwritten = overwritten || dy[i]->get() == dx.get();
  if (q8 && !overwritten) q8_held_ = {dx.get(), ws[0]->n_in};
}

vulkan::Pipeline* VulkanBackend::fused_glu(const DeviceWeight& g, const DeviceWeight& u, FfnAct act,
                                           const float* x, const float* out) {
  vulkan::Pipeline& p = p_matmul_glu_q8_[int(g.fmt)][act == FfnAct::SiLU ? 0 : 1];
  const bool fits = p.pipeline && !p.on_cpu && uses_q8(g, 1) && uses_q8(u, 1) && u.fmt == g.fmt && !g.img &&
                    !u.img && g.bufs.size() == 1 && u.bufs.size() == 1 && u.row_bytes == g.row_bytes &&
                    u.n_in == g.n_in && u.n_out == g.n_out && out != x;
  return fits ? &p : nullptr;
}

void VulkanBackend::matmul_glu(const Weight& w_gate, const Weight& w_up, const float* x, int64_t n_tok,
                               FfnAct act, float* out, float* up) {
  if (n_tok != 1) return Backend::matmul_glu(w_gate, w_up, x, n_tok, act, out, up);
  const DeviceWeight& g = find_weight(w_gate, "matmul");
  const DeviceWeight& u = find_weight(w_up, "matmul");
  vulkan::Pipeline* p = fused_glu(g, u, act, x, out);
  if (!p) return Backend::matmul_glu(w_gate, w_up, x, n_tok, act, out, up);
  // The reference's two products and gated unit, as a replayed step counts them; a replay places out's
  // deferred download as the capture made it (dev_done), once.
  const Q8Held held = q8_held_;
  step_ops_ += 2;
  if (replaying(out)) return;
  q8_held_ = held;
  const vulkan::Buffer& dx = dev_in(x, g.n_in, in_a_, "matmul");
  const vulkan::Buffer& dy = dev_out(out, g.n_out, out_, "matmul_glu");
  record_quantize(dx, g.n_in, q8_held_);
  // The output's rounding for the down product, where it is whole blocks that fit the rounding buffers.
  const bool round = g.n_out % 32 == 0 && g.n_out <= opts_.max_in_elems;
  struct {
    uint32_t row_bytes, n_in, n_rows, round_out;
  } pc{uint32_t(g.row_bytes), uint32_t(g.n_in), uint32_t(g.n_out), round ? 1u : 0u};
  const uint64_t groups = (uint64_t(g.n_out) + glu_rows_ - 1) / glu_rows_;
  const uint32_t gx = uint32_t(std::min<uint64_t>(groups, caps().max_group_count[0]));
  const uint32_t gz = uint32_t((groups + gx - 1) / gx);
  rt_.dispatch(*p, {&g.bufs[0], &q8x_, &dy, &u.bufs[0], &q8y_, &glu_counters_}, &pc, gx, 1, gz);
  dev_done(out, g.n_out, dy);
  q8_held_ = {};
  if (round) {
    std::swap(q8x_, q8y_);
    q8_held_ = {dy.get(), g.n_out};
  }
}

}  // namespace tilellm
