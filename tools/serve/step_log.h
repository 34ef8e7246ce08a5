// The decode thread's steps, kept for `tilellm monitor --serve` (GET /metrics/steps): each engine step's
// start, wall time and tokens, in a ring of fixed size made at start (recording allocates nothing; the
// oldest steps are overwritten once it is full, and a reader that fell that far behind is told how many it
// missed).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tilellm::serve {

struct StepRecord {
  uint64_t id = 0;    // 1, 2, ... in the order the steps ran
  double t_s = 0;     // its start, seconds since the log was made (StepLog::now)
  float ms = 0;       // its wall time: the engine's evaluation and every slot's reading of its logits
  int32_t n_tok = 0;  // tokens evaluated (prompt chunks and generated tokens)
  int32_t n_gen = 0;  // of those, one for each generating slot: the tokens its clients waited the step for
};

class StepLog {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StepLog(size_t capacity = size_t(1) << 16);
  double now() const { return seconds(Clock::now()); }
  double seconds(Clock::time_point t) const { return std::chrono::duration<double>(t - epoch_).count(); }
  // From the decode thread.
  void record(Clock::time_point start, Clock::time_point end, int32_t n_tok, int32_t n_gen);
  // The steps with id > after, oldest first, at most `max` of them; `missed`: steps after `after` that were
  // overwritten before this read.
  std::vector<StepRecord> since(uint64_t after, size_t max, uint64_t* missed) const;
  uint64_t last_id() const;

 private:
  const Clock::time_point epoch_ = Clock::now();
  mutable std::mutex m_;
  std::vector<StepRecord> ring_;
  uint64_t next_ = 1;  // the id the next step gets
};

}  // namespace tilellm::serve
