// A persistent pool of worker threads for data-parallel ops. The calling thread takes part, so a pool of n
// threads starts n-1 workers. Work is split into contiguous chunks handed out through one atomic counter; the
// call returns when every chunk is done. No allocation per call: the job is passed as a function pointer plus
// context.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tilellm {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls f(begin, end, thread_index) over [0, n) in chunks of at least `grain` items.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& f) {
    if (n <= 0) return;
    auto tramp = [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<F*>(ctx))(b, e, t); };
    run(n, grain, tramp, &f);
  }

  static int default_threads();

 private:
  using Fn = void (*)(void*, int64_t, int64_t, int);
  void run(int64_t n, int64_t grain, Fn fn, void* ctx);
  void worker(int index);
  void work_on_current(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped per job, guarded by mu_
  bool stop_ = false;
  // The current job, written before generation_ is bumped.
  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<int> active_{0};
};

}  // namespace tilellm
