// A persistent pool of worker threads for data-parallel ops. The calling thread takes part, so a pool of n
// threads starts n-1 workers. Work is split into contiguous chunks handed out through one atomic counter; the
// call returns when every chunk is done. No allocation per call: the job is a function pointer plus context.
//
// A 135M model runs hundreds of ops per token, each a few microseconds, so waking a sleeping thread per op
// (a futex round trip each) would cost more than the op. Workers therefore spin on the job counter for a
// while after each job and only then sleep on a condition variable; the caller spins for completion.
//
// Fewer threads on demand (the pacing controller's second action, runtime/telemetry/pacer.h): set_active(n)
// lets only threads 0..n-1 take work; the others park on a condition variable of their own (they neither
// spin nor count as sleepers a job must wake) until the count rises again. size() stays the number of
// threads made, so scratch sized per thread at start remains valid.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace tilellm {

class ThreadPool {
 public:
  // cpus: when not empty, thread i (the caller is thread 0) is pinned to cpus[i % cpus.size()].
  explicit ThreadPool(int n_threads, const std::vector<int>& cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads made (the bound of every thread_index); active(): threads that take work now.
  int size() const { return n_threads_; }
  int active() const { return active_.load(std::memory_order_relaxed); }
  // Lets threads [0, n) take work from the next call on (n clamped to [1, size()]). Call it from the thread
  // that calls parallel_for, between calls; it returns once the workers have parked or resumed.
  void set_active(int n);

  // Calls f(begin, end, thread_index) over [0, n) in chunks of at least `grain` items.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& f) {
    if (n <= 0) return;
    using Fn_t = std::remove_reference_t<F>;
    auto tramp = [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<Fn_t*>(ctx))(b, e, t); };
    run(n, grain, tramp, const_cast<void*>(static_cast<const void*>(&f)));
  }

  // The CPUs this process can keep busy (usable_cpus in base/cpu_set.h).
  static int default_threads();
  // Whether waiting threads yield their CPU from the first check: more threads than CPUs (those of `cpus`
  // when given, else the usable ones).
  bool yields_at_once() const { return pause_spins_ == 0; }

 private:
  using Fn = void (*)(void*, int64_t, int64_t, int);
  void run(int64_t n, int64_t grain, Fn fn, void* ctx);
  void worker(int index);
  void work_on_current(int thread_index);

  int n_threads_;
  int pause_spins_ = 0;  // checks with a pause hint before a waiting thread yields (0: oversubscribed)
  std::vector<std::thread> workers_;
  // The current job; written by the caller before generation_ is bumped, read by workers after they see it.
  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  alignas(64) std::atomic<int64_t> next_{0};         // next chunk start
  alignas(64) std::atomic<int> pending_{0};          // workers still busy with the current job
  alignas(64) std::atomic<uint64_t> generation_{0};  // bumped once per job
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> active_{1};
  int parked_ = 0;  // workers parked by set_active (under mu_)
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable park_;      // parked workers wait here
  std::condition_variable park_ack_;  // set_active waits here for them
};

}  // namespace tilellm
