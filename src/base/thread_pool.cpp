#include "base/thread_pool.h"

#include <sched.h>

#include <algorithm>

#include "base/cpu_set.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TILELLM_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define TILELLM_PAUSE() asm volatile("yield")
#else
#define TILELLM_PAUSE() ((void)0)
#endif

namespace tilellm {
namespace {

// A waiting thread first spins with pause hints (the next op is usually microseconds away), then yields its
// core between checks (so that on an oversubscribed machine the thread it waits for can run), and a worker
// finally sleeps: about a millisecond in all, longer than the gap between two ops, shorter than a user's
// pause. A pool with more threads than CPUs yields from the first check: there the thread waited for is
// often not running, and pausing would hold its CPU for the rest of a time slice (SmolLM2 decode with 3
// threads on 2 CPUs ran at a quarter of its 2-thread speed).
constexpr int kPauseSpins = 2000;
constexpr int kYieldSpins = 2000;

inline void backoff(int spins, int pause_spins) {
  if (spins < pause_spins) {
    TILELLM_PAUSE();
  } else {
    sched_yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, const std::vector<int>& cpus) : n_threads_(std::max(1, n_threads)) {
  active_.store(n_threads_);
  std::vector<int> distinct = cpus;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const int cpu_count = distinct.empty() ? usable_cpus() : int(distinct.size());
  pause_spins_ = n_threads_ > cpu_count ? 0 : kPauseSpins;
  if (!cpus.empty()) pin_current_thread(cpus[0]);
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    const int cpu = cpus.empty() ? -1 : cpus[size_t(i) % cpus.size()];
    workers_.emplace_back([this, i, cpu] {
      if (cpu >= 0) pin_current_thread(cpu);
      worker(i);
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  park_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::default_threads() {
  return usable_cpus();
}

void ThreadPool::work_on_current(int thread_index) {
  for (;;) {
    const int64_t b = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (b >= n_) break;
    fn_(ctx_, b, std::min(n_, b + chunk_), thread_index);
  }
}

void ThreadPool::set_active(int n) {
  n = std::clamp(n, 1, n_threads_);
  if (n == active_.load()) return;
  std::unique_lock<std::mutex> lk(mu_);
  active_.store(n);
  wake_.notify_all();  // sleeping workers at or above n park
  park_.notify_all();  // parked workers below n resume
  // Workers n..size()-1 (size() - n of them) parked, every other one back in its loop: only then may a job
  // start, so that a resumed worker has taken the current generation as seen and no worker the job counts
  // on is still parked.
  park_ack_.wait(lk, [&] { return parked_ == n_threads_ - n; });
}

void ThreadPool::run(int64_t n, int64_t grain, Fn fn, void* ctx) {
  const int threads = active_.load(std::memory_order_relaxed);
  // About four chunks per thread balances uneven chunks without much counter traffic.
  const int64_t chunk = std::max<int64_t>(std::max<int64_t>(grain, 1), (n + 4 * threads - 1) / (4 * threads));
  if (threads == 1 || n <= chunk) {
    fn(ctx, 0, n, 0);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  chunk_ = chunk;
  next_.store(0, std::memory_order_relaxed);
  pending_.store(threads - 1, std::memory_order_relaxed);
  // seq_cst on generation_ and sleepers_: a worker that registered as a sleeper before this bump is seen here
  // and notified; one that registers after it sees the bump in its wait predicate.
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    wake_.notify_all();
  }
  work_on_current(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) backoff(spins, pause_spins_);
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    if (index >= active_.load(std::memory_order_acquire)) {
      // Parked by set_active: wait, spinning not at all, until this thread is counted again.
      std::unique_lock<std::mutex> lk(mu_);
      ++parked_;
      park_ack_.notify_all();
      park_.wait(lk, [&] { return stop_.load() || index < active_.load(); });
      --parked_;
      seen = generation_.load();  // no job runs while set_active waits for this thread
      park_ack_.notify_all();
      if (stop_.load()) return;
      continue;
    }
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spins = 0; g == seen; g = generation_.load(std::memory_order_acquire)) {
      if (stop_.load(std::memory_order_relaxed)) return;
      if (index >= active_.load(std::memory_order_relaxed)) break;
      if (++spins < pause_spins_ + kYieldSpins) {
        backoff(spins, pause_spins_);
        continue;
      }
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1);
      wake_.wait(lk, [&] { return stop_.load() || generation_.load() != seen || index >= active_.load(); });
      sleepers_.fetch_sub(1);
      spins = 0;
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    if (g == seen) continue;  // left the wait to park
    seen = g;
    work_on_current(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace tilellm
