// Decode capture and replay of the CUDA backend (cuda_backend.h, "Decode without per-token launches"):
// which pass is captured, replayed or run eagerly, the state of the mirrors and the Q8 buffers a replay
// assumes and leaves, and the ops' early return in a replayed step.
#include <cstring>

#include "backends/cuda/cuda_backend.h"
#include "base/error.h"

namespace tilellm {

void CudaBackend::begin_forward(const ForwardStep& step) {
  check_tokens(step.n_tok, "begin_forward");
  if (mode_ != StepMode::Normal) {
    // The last pass ended in an error before end_forward: its capture is not kept.
    if (rt_.capturing()) rt_.interrupt_capture();
    rt_.drop_capture();
    mode_ = StepMode::Normal;
    pos_n_ = -1;  // what its capture meant to place in pos_dev_ is not there
  }
  pending_norm_ = {};  // a pass that ended in an error may have left one
  step_pos_ = step.pos;
  step_pos_n_ = step.n_tok;
  step_ops_ = 0;
  deferred_k_ = 0;
  for (Q8Set& set : q8_)
    set.src = nullptr;  // every pass makes its own roundings: a capture and its replays alike
  // A replayed step's ops check nothing (they do not run on the host): the positions are checked here, the
  // token ids by embed, before any of them reaches the device.
  for (int64_t t = 0; t < step.n_tok; ++t) {
    if (step.pos[t] < 0 || (opts_.kv_ctx > 0 && step.pos[t] >= opts_.kv_ctx))
      fail("position {} is outside the KV cache of {}", step.pos[t], opts_.kv_ctx);
  }
  const size_t pos_bytes = size_t(step.n_tok) * sizeof(int32_t);
  // A decode step of one sequence or of several (a BatchSession's, each sequence's positions at its offset
  // in the step input).
  const bool replayable = step.decode || step.batch_decode;
  if (replayable && step.same_as_last && rt_.has_capture() && mirrors_.state_is(capture_begin_state_)) {
    mode_ = StepMode::Replaying;
    rt_.set_step_input(kPosSlot, step.pos, pos_bytes);
    std::memcpy(pos_held_.data(), step.pos, pos_bytes);
    pos_n_ = step.n_tok;
    return;
  }
  if (replayable && !rt_.profiling()) {
    mode_ = StepMode::Capturing;
    capture_begin_state_ = mirrors_.state();
    rt_.begin_capture();
    std::memcpy(pos_held_.data(), step.pos, pos_bytes);
    pos_n_ = step.n_tok;
    rt_.step_input(kPosSlot, step.pos, pos_bytes, pos_dev_, 0);
    return;
  }
  // A prompt (or a profiled step) runs eagerly; the decode capture is kept for the next decode step, which
  // replays it when the mirrors are as the capture began (otherwise it captures again).
  dev_positions(step.pos, step.n_tok);
}

void CudaBackend::end_forward() {
  flush_norm();  // the pass's last norm, where no product read it
  const StepMode m = mode_;
  mode_ = StepMode::Normal;
  step_pos_ = nullptr;
  if (m == StepMode::Capturing) {
    const bool was_capturing = rt_.capturing();
    if (was_capturing && rt_.end_capture()) {
      captured_ops_ = step_ops_;
      capture_end_state_ = mirrors_.state();
      for (int i = 0; i < 2; ++i) {
        capture_q8_[i].src = q8_[i].src;
        capture_q8_[i].rows = q8_[i].rows;
        capture_q8_[i].cols = q8_[i].cols;
      }
      ++captured_;
    }
    rt_.deliver();
  } else if (m == StepMode::Replaying) {
    if (step_ops_ != captured_ops_ || deferred_k_ != rt_.deferred_downloads()) {
      rt_.drop_capture();
      fail("internal: CUDA replayed step made {} ops and {} host outputs, the captured one {} and {}",
           step_ops_, deferred_k_, captured_ops_, rt_.deferred_downloads());
    }
    rt_.replay();
    rt_.deliver();
    mirrors_.set_state(capture_end_state_);
    for (int i = 0; i < 2; ++i) q8_hold(i, capture_q8_[i].src, capture_q8_[i].rows, capture_q8_[i].cols);
    ++replayed_;
  }
}

bool CudaBackend::replaying(float* out0) {
  ++step_ops_;
  if (mode_ != StepMode::Replaying) return false;
  if (out0 && mirrors_.find(out0, 1, "replay") < 0) rt_.set_deferred_destination(deferred_k_++, out0);
  return true;
}

}  // namespace tilellm
