#include "runtime/thread_pool.h"

#include <algorithm>

namespace tilellm {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::default_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}

void ThreadPool::work_on_current(int thread_index) {
  for (;;) {
    const int64_t b = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (b >= n_) break;
    fn_(ctx_, b, std::min(n_, b + chunk_), thread_index);
  }
}

void ThreadPool::run(int64_t n, int64_t grain, Fn fn, void* ctx) {
  // About four chunks per thread balances uneven chunks without much counter traffic.
  const int64_t chunk =
      std::max<int64_t>(std::max<int64_t>(grain, 1), (n + 4 * n_threads_ - 1) / (4 * n_threads_));
  if (n_threads_ == 1 || n <= chunk) {
    fn(ctx, 0, n, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    chunk_ = chunk;
    next_.store(0, std::memory_order_relaxed);
    active_.store(n_threads_ - 1, std::memory_order_relaxed);
    ++generation_;
  }
  wake_.notify_all();
  work_on_current(0);
  std::unique_lock<std::mutex> lk(mu_);
  done_cv_.wait(lk, [this] { return active_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    work_on_current(index);
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(mu_);
      done_cv_.notify_one();
    }
  }
}

}  // namespace tilellm
