// Decode capture and replay of the Vulkan backend (vulkan_backend.h, "Decode without per-token recording"):
// which pass is captured, replayed or recorded as usual, the mirrors' state a replay assumes and leaves, and
// the ops' early return in a replayed step.
#include <cstring>

#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::begin_forward(const ForwardStep& step) {
  check_tokens(step.n_tok, "begin_forward");
  pass_t0_ = std::chrono::steady_clock::now();
  pass_wait0_ = rt_.waited_ns();
  pass_is_decode_ = step.decode;
  if (mode_ != StepMode::Normal) {
    // The last pass ended in an error before end_forward: its capture is not kept.
    if (rt_.capturing()) rt_.end_capture();
    rt_.drop_capture();
    mode_ = StepMode::Normal;
  }
  step_ops_ = 0;
  deferred_k_ = 0;
  // A replayed step's ops check nothing (they do not run on the host): the positions are checked here, the
  // token ids by embed, before any of them reaches the device.
  for (int64_t t = 0; t < step.n_tok; ++t) {
    if (step.pos[t] < 0 || (opts_.kv_ctx > 0 && step.pos[t] >= opts_.kv_ctx))
      fail("position {} is outside the KV cache of {}", step.pos[t], opts_.kv_ctx);
  }
  if (step.decode && step.same_as_last && rt_.has_capture() && mirrors_.state_is(capture_begin_state_)) {
    mode_ = StepMode::Replaying;
    rt_.set_step_input(kPosSlot, step.pos, size_t(step.n_tok) * 4);
    std::memcpy(pos_held_.data(), step.pos, size_t(step.n_tok) * 4);
    pos_n_ = step.n_tok;
    return;
  }
  if (step.decode && !rt_.profiling()) {
    mode_ = StepMode::Capturing;
    capture_begin_state_ = mirrors_.state();
    rt_.begin_capture();
    std::memcpy(pos_held_.data(), step.pos, size_t(step.n_tok) * 4);
    pos_n_ = step.n_tok;
    rt_.step_input(kPosSlot, step.pos, size_t(step.n_tok) * 4, pos_dev_, 0);
    return;
  }
  // A prompt pass (or a profiled step) records as usual and leaves a kept capture alone: it reads its step
  // inputs afresh when replayed, and the mirrors' state it assumes is checked before a replay.
  dev_positions(step.pos, step.n_tok);
}

void VulkanBackend::end_forward() {
  const StepMode m = mode_;
  mode_ = StepMode::Normal;
  if (m == StepMode::Capturing) {
    if (rt_.end_capture()) {
      captured_ops_ = step_ops_;
      capture_end_state_ = mirrors_.state();
      ++captured_;
    }
  } else if (m == StepMode::Replaying) {
    if (step_ops_ != captured_ops_ || deferred_k_ != rt_.deferred_downloads()) {
      rt_.drop_capture();
      fail("internal: Vulkan replayed step made {} ops and {} host outputs, the captured one {} and {}",
           step_ops_, deferred_k_, captured_ops_, rt_.deferred_downloads());
    }
    rt_.replay();
    mirrors_.set_state(capture_end_state_);
    ++replayed_;
  }
  if (pass_is_decode_) {
    pass_times_.decode_passes += 1;
    pass_times_.replayed += m == StepMode::Replaying ? 1 : 0;
    pass_times_.wall_ns += double(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - pass_t0_)
            .count());
    pass_times_.wait_ns += double(rt_.waited_ns() - pass_wait0_);
  }
}

bool VulkanBackend::replaying(float* out0, float* out1) {
  ++step_ops_;
  q8_held_ = {};  // any op may write the buffer q8x_ was rounded from
  if (mode_ != StepMode::Replaying) return false;
  for (float* p : {out0, out1}) {
    if (p && find_mirror(p, 1, "replay") < 0) rt_.set_deferred_destination(deferred_k_++, p);
  }
  return true;
}

}  // namespace tilellm
