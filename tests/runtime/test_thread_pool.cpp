// ThreadPool::set_active (base/thread_pool.h): fewer threads on demand, the pacing controller's second
// measure. Only threads below the active count take work; every item is still done exactly once; the
// count can move up and down between jobs without a lost or doubled item or a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <vector>

#include "base/thread_pool.h"

namespace tilellm {
namespace {

// Runs n items, each counted once per visit, and returns the thread indices that took part.
std::set<int> run_items(ThreadPool& pool, int64_t n, std::vector<std::atomic<int>>& visits) {
  std::mutex mu;
  std::set<int> used;
  pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int t) {
    {
      std::lock_guard<std::mutex> lk(mu);
      used.insert(t);
    }
    for (int64_t i = b; i < e; ++i) {
      visits[size_t(i)].fetch_add(1);
      volatile double x = 0;  // a little work per item, so that workers get a share
      for (int k = 0; k < 200; ++k) x = x + double(k) * 1e-9;
    }
  });
  return used;
}

TEST(ThreadPool, only_active_threads_take_work_and_every_item_runs_once) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4);
  EXPECT_EQ(pool.active(), 4);
  const int64_t n = 4000;
  for (int active : {1, 3, 2, 4, 1}) {
    pool.set_active(active);
    EXPECT_EQ(pool.active(), active);
    EXPECT_EQ(pool.size(), 4);
    std::vector<std::atomic<int>> visits(n);
    const std::set<int> used = run_items(pool, n, visits);
    for (int t : used) EXPECT_LT(t, active) << "thread " << t << " worked with " << active << " active";
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[size_t(i)].load(), 1) << "item " << i;
  }
  // Out-of-range counts are clamped.
  pool.set_active(0);
  EXPECT_EQ(pool.active(), 1);
  pool.set_active(99);
  EXPECT_EQ(pool.active(), 4);
}

TEST(ThreadPool, the_active_count_moves_between_jobs_without_a_hang) {
  ThreadPool pool(3);
  std::mt19937 rng(5);
  for (int round = 0; round < 300; ++round) {
    pool.set_active(1 + int(rng() % 3));
    const int64_t n = 1 + int64_t(rng() % 500);
    std::atomic<int64_t> sum{0};
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int t) {
      ASSERT_LT(t, pool.active());
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i + 1);
    });
    ASSERT_EQ(sum.load(), n * (n + 1) / 2) << "round " << round;
  }
}

}  // namespace
}  // namespace tilellm
