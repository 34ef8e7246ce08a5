// CUDA products (kernels/matmul.cu for prompts, kernels/matvec.cu for one token, kernels/matvec_tokens.cu
// for 2 .. cuda::kMatvecTokens tokens on the quantized path: a batch decode step): the float path for the
// F32/F16 formats and for --activations f32, the quantized path (int8 activations, kernels/quantize.cu)
// for the block formats otherwise; in the quantized mode, prompts of kHalfGemmTokens or more on cuBLAS's
// fp16 GEMM (kernels/matmul_half.cu makes its operands) over every format but F32 (--cuda-fp16-gemm all, the
// default), over F16 weights only (f16), or nowhere (off). q/k/v of one format are one launch in decode and
// batch decode, and so are gate/up (with their activation for one token). A kernel that failed its
// self-check hands its op to the host backend (a failed fp16 GEMM: to the int8 or float prompt kernel; a
// failed few-token kernel: to the prompt kernel).
#include "backends/cuda/cuda_backend.h"
#include "backends/f16_round.h"
#include "backends/q8_round.h"
#include "base/error.h"

namespace tilellm {

cuda::Q8 CudaBackend::q8_view(int set) const {
  return {q8_[set].q.as<int8_t>(), q8_[set].d.as<float>(), q8_[set].s.as<float>()};
}

void CudaBackend::q8_hold(int set, const float* src, int64_t rows, int64_t cols) {
  q8_[set].src = src;
  q8_[set].rows = rows;
  q8_[set].cols = cols;
}

int CudaBackend::q8_of(const float* dx, int64_t n_tok, int64_t n) {
  for (int set = 0; set < 2; ++set) {
    if (q8_[set].src == dx && q8_[set].rows == n_tok && q8_[set].cols == n) return set;
  }
  if (n % 32 != 0) fail("internal: CUDA quantized activations of a row of {} (not whole blocks of 32)", n);
  if (!q8_fits(n_tok * n))
    fail("CUDA backend: {} x {} activations exceed the quantization buffers sized at start", n_tok, n);
  const cuda::Q8 q8 = q8_view(0);
  launch("quantize_q8", [&](cudaStream_t s) { cuda::quantize_q8(dx, int(n_tok), int(n), q8, s); });
  q8_hold(0, dx, n_tok, n);
  return 0;
}

bool CudaBackend::half_gemm_of(const DeviceWeight& dw, int64_t n_tok) const {
  // Whole 16-byte rows of halves (cuBLAS's tensor-core alignment); F32 weights keep their precision.
  const bool format =
      opts_.half_gemm == CudaBackendOptions::HalfGemm::All ? dw.fmt != cuda::kF32 : dw.fmt == cuda::kF16;
  return blas_ && blas_->available() && n_tok >= kHalfGemmTokens && format && dw.n_in % 8 == 0 &&
         !k_matmul16_[dw.fmt].on_cpu;
}

bool CudaBackend::on_half_gemm(const Weight& w, int64_t n_tok) const {
  return half_gemm_of(find_weight(w, "on_half_gemm"), n_tok);
}

std::string CudaBackend::half_gemm_status() const {
  if (opts_.half_gemm == CudaBackendOptions::HalfGemm::Off) return "the int8 kernel (the fp16 GEMM is off)";
  if (!blas_ || !blas_->available()) return blas_ ? blas_->status() : "the int8 kernel";
  return fmt::format("{}+ tokens {}on {}'s fp16 GEMM", kHalfGemmTokens,
                     opts_.half_gemm == CudaBackendOptions::HalfGemm::All ? "" : "over F16 weights ",
                     blas_->status());
}

void CudaBackend::rounded_matmul_input(const Weight& w, const float* x, int64_t n_tok, float* out) const {
  if (on_half_gemm(w, n_tok)) return round_activations_f16_scaled(x, n_tok * w.n_in, out);
  if (!quantized(find_weight(w, "rounded_matmul_input").fmt)) {
    for (int64_t i = 0; i < n_tok * w.n_in; ++i) out[i] = x[i];
    return;
  }
  round_activations_q8(x, n_tok * w.n_in, out);
}

void CudaBackend::record_half_gemm(const DeviceWeight& dw, const float* dx, int64_t n_tok, float* dy) {
  // half_scale_: [alpha, beta, max |x| bits].
  float* scale = half_scale_.as<float>();
  launch("to_f16", [&](cudaStream_t s) {
    cuda::to_f16_scaled(dx, n_tok * dw.n_in, half_x_.get(), scale, half_scale_.as<unsigned>() + 2, s);
  });
  // The weights a chunk of whole rows at a time (a chunk and its product share one scratch buffer: the
  // stream orders them).
  const int64_t chunk = std::max<int64_t>(1, int64_t(half_w_.bytes() / (2 * size_t(dw.n_in))));
  const cuda::Matrix m = dw.matrix();
  for (int64_t r0 = 0; r0 < dw.n_out; r0 += chunk) {
    const int rows = int(std::min(chunk, dw.n_out - r0));
    launch(k_matmul16_[dw.fmt].name.c_str(), [&](cudaStream_t s) {
      cuda::weight_rows_f16(m, int(r0), rows, half_w_.get(), s);
      blas_->gemm_f16(half_w_.get(), rows, half_x_.get(), int(n_tok), int(dw.n_in), scale, scale + 1, dy + r0,
                      int(dw.n_out));
    });
  }
}

bool CudaBackend::on_matvec(const DeviceWeight& dw, int64_t n_tok) const {
  const int f = int(dw.fmt);
  if (n_tok == 1) return !k_matvec_[f].on_cpu;
  return quantized(dw.fmt) && n_tok <= cuda::kMatvecTokens && !k_matvec_few_[f].on_cpu;
}

void CudaBackend::launch_matvec(const cuda::MatvecJob& job, const cuda::Q8& q8) {
  const int f = job.w[0].fmt;
  if (job.n_tok == 1)
    launch(k_matvec_[f].name.c_str(), [&](cudaStream_t s) { cuda::matvec_q8(job, q8, s); });
  else
    launch(k_matvec_few_[f].name.c_str(), [&](cudaStream_t s) { cuda::matvec_tokens_q8(job, q8, s); });
}

void CudaBackend::record_matmul(const DeviceWeight& dw, const float* dx, int64_t n_tok, float* dy) {
  const int f = int(dw.fmt);
  if (half_gemm_of(dw, n_tok)) return record_half_gemm(dw, dx, n_tok, dy);
  const cuda::Matrix m = dw.matrix();
  const bool one = n_tok == 1 && !k_matvec_[f].on_cpu;
  if (quantized(dw.fmt)) {
    const cuda::Q8 q8 = q8_view(q8_of(dx, n_tok, dw.n_in));
    if (on_matvec(dw, n_tok)) {
      cuda::MatvecJob job;
      job.w[0] = m;
      job.y[0] = dy;
      job.n_tok = int(n_tok);
      launch_matvec(job, q8);
    } else {
      launch(k_matmul_[f].name.c_str(), [&](cudaStream_t s) { cuda::matmul_q8(m, q8, int(n_tok), dy, s); });
    }
  } else if (one) {
    launch(k_matvec_[f].name.c_str(), [&](cudaStream_t s) { cuda::matvec_f32(m, dx, dy, s); });
  } else {
    launch(k_matmul_[f].name.c_str(), [&](cudaStream_t s) { cuda::matmul_f32(m, dx, int(n_tok), dy, s); });
  }
}

void CudaBackend::matmul(const Weight& w, const float* x, int64_t n_tok, float* y) {
  check_tokens(n_tok, "matmul");
  if (replaying(y)) return;
  const DeviceWeight& dw = find_weight(w, "matmul");
  const int f = int(dw.fmt);
  if (k_matmul_[f].on_cpu && !half_gemm_of(dw, n_tok) && !on_matvec(dw, n_tok)) {
    host_in(x, n_tok * w.n_in);
    host_out(y, n_tok * w.n_out);
    return cpu_->matmul(w, x, n_tok, y);
  }
  if (n_tok == 1 && quantized(dw.fmt) && on_matvec(dw, 1)) {
    cuda::MatvecJob job;
    job.w[0] = dw.matrix();
    if (take_norm(x, job)) {  // the output product after the last layer's norm
      const cuda::Q8 q8 = q8_view(q8_of(dev_in(x, w.n_in, in_a_, "matmul"), 1, w.n_in));
      job.y[0] = dev_out(y, w.n_out, out_, "matmul");
      launch(k_matvec_norm_.name.c_str(), [&](cudaStream_t s) { cuda::matvec_q8(job, q8, s); });
      dev_done(y, w.n_out, job.y[0]);
      return;
    }
  }
  const float* dx = dev_in(x, n_tok * w.n_in, in_a_, "matmul");
  float* dy = dev_out(y, n_tok * w.n_out, out_, "matmul");
  record_matmul(dw, dx, n_tok, dy);
  dev_done(y, n_tok * w.n_out, dy);
}

void CudaBackend::matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                                int64_t n_tok) {
  // One launch in decode (one token, or one for each of a few sequences) when the products share a block
  // format on the quantized path and each output is a mirrored array of its own; otherwise one by one (the
  // input's rounding is still made once).
  bool together = n_tok <= cuda::kMatvecTokens && n <= 3 && mode_ != StepMode::Replaying;
  const DeviceWeight* dws[3] = {};
  for (int i = 0; i < n && together; ++i) {
    dws[i] = &find_weight(*ws[i], "matmul");
    together = quantized(dws[i]->fmt) && dws[i]->fmt == dws[0]->fmt && dws[i]->n_in == dws[0]->n_in &&
               on_matvec(*dws[i], n_tok) && ys[i] != x && is_mirror_start(ys[i], n_tok * ws[i]->n_out);
  }
  if (!together) return Backend::matmul_shared(ws, ys, n, x, n_tok);
  step_ops_ += uint64_t(n);  // as n matmuls count in a replay
  cuda::MatvecJob job;
  job.n = n;
  job.n_tok = int(n_tok);
  for (int i = 0; i < n; ++i) job.w[i] = dws[i]->matrix();
  const bool norm = take_norm(x, job);
  const float* dx = dev_in(x, n_tok * ws[0]->n_in, in_a_, "matmul");
  for (int i = 0; i < n; ++i) job.y[i] = dev_out(ys[i], n_tok * ws[i]->n_out, out_, "matmul");
  const cuda::Q8 q8 = q8_view(q8_of(dx, n_tok, ws[0]->n_in));
  if (norm)
    launch(k_matvec_norm_.name.c_str(), [&](cudaStream_t s) { cuda::matvec_q8(job, q8, s); });
  else
    launch_matvec(job, q8);
  for (int i = 0; i < n; ++i) dev_done(ys[i], n_tok * ws[i]->n_out, job.y[i]);
}

void CudaBackend::matmul_glu(const Weight& w_gate, const Weight& w_up, const float* x, int64_t n_tok,
                             FfnAct act, float* out, float* up) {
  if (n_tok == 1 && mode_ != StepMode::Replaying) {
    const DeviceWeight& g = find_weight(w_gate, "matmul");
    const DeviceWeight& u = find_weight(w_up, "matmul");
    const int ai = act == FfnAct::SiLU ? 0 : 1;
    if (quantized(g.fmt) && g.fmt == u.fmt && g.n_in == u.n_in && g.n_out == u.n_out &&
        !k_matvec_[int(g.fmt)].on_cpu && !k_glu_[ai].on_cpu && out != x && is_mirror_start(out, g.n_out)) {
      step_ops_ += 3;  // the reference's two products and glu, as a replay counts them
      cuda::MatvecJob job;
      job.n = 2;
      job.glu = ai;
      job.w[0] = g.matrix();
      job.w[1] = u.matrix();
      const bool norm = take_norm(x, job);
      const float* dx = dev_in(x, g.n_in, in_a_, "matmul");
      job.y[0] = dev_out(out, g.n_out, out_, "matmul_glu");
      const int in_set = q8_of(dx, 1, g.n_in);
      // The output rounded too (for the down product), into the other set: this launch reads in_set.
      const bool round_out = g.n_out % 32 == 0 && q8_fits(g.n_out);
      if (round_out) {
        job.out_q8 = q8_view(1 - in_set);
        job.counters = glu_counters_.as<int>();
      }
      if (norm)
        launch(k_matvec_norm_.name.c_str(),
               [&](cudaStream_t s) { cuda::matvec_q8(job, q8_view(in_set), s); });
      else
        launch_matvec(job, q8_view(in_set));
      dev_done(out, g.n_out, job.y[0]);
      if (round_out) q8_hold(1 - in_set, job.y[0], 1, g.n_out);
      return;
    }
  }
  Backend::matmul_glu(w_gate, w_up, x, n_tok, act, out, up);
}

}  // namespace tilellm
