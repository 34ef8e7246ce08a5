#include "step_log.h"

#include <algorithm>

namespace tilellm::serve {

StepLog::StepLog(size_t capacity) : ring_(std::max<size_t>(capacity, 1)) {}

void StepLog::record(Clock::time_point start, Clock::time_point end, int32_t n_tok, int32_t n_gen) {
  StepRecord r;
  r.t_s = seconds(start);
  r.ms = float(std::chrono::duration<double, std::milli>(end - start).count());
  r.n_tok = n_tok;
  r.n_gen = n_gen;
  std::lock_guard<std::mutex> lk(m_);
  r.id = next_++;
  ring_[size_t(r.id % ring_.size())] = r;
}

std::vector<StepRecord> StepLog::since(uint64_t after, size_t max, uint64_t* missed) const {
  std::lock_guard<std::mutex> lk(m_);
  const uint64_t last = next_ - 1;
  const uint64_t oldest = last >= ring_.size() ? last - ring_.size() + 1 : 1;  // the oldest still held
  uint64_t first = std::max(after + 1, oldest);
  if (missed) *missed = first > after + 1 ? first - after - 1 : 0;
  std::vector<StepRecord> out;
  for (uint64_t id = first; id <= last && out.size() < max; ++id)
    out.push_back(ring_[size_t(id % ring_.size())]);
  return out;
}

uint64_t StepLog::last_id() const {
  std::lock_guard<std::mutex> lk(m_);
  return next_ - 1;
}

}  // namespace tilellm::serve
