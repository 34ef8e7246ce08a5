#include "job.h"

namespace tilellm::serve {

const char* finish_reason(Finish f) {
  switch (f) {
    case Finish::Length:
      return "length";
    case Finish::Running:
      return "null";
    default:
      return "stop";
  }
}

void Job::append(const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard<std::mutex> lk(m_);
    pending_ += text;
    all_ += text;
  }
  cv_.notify_all();
}

void Job::finish(const JobResult& r) {
  {
    std::lock_guard<std::mutex> lk(m_);
    result_ = r;
    done_ = true;
  }
  cv_.notify_all();
}

bool Job::poll(std::string* delta, JobResult* result, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(m_);
  cv_.wait_for(lk, timeout, [&] { return done_ || !pending_.empty(); });
  delta->swap(pending_);
  pending_.clear();
  if (done_) *result = result_;
  return done_;
}

bool Job::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(m_);
  return cv_.wait_for(lk, timeout, [&] { return done_; });
}

JobResult Job::wait(std::string* text) {
  std::unique_lock<std::mutex> lk(m_);
  cv_.wait(lk, [&] { return done_; });
  *text = all_;
  return result_;
}

}  // namespace tilellm::serve
