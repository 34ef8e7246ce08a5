// CPU masks, pinning and the reported CPU set.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <string>
#include <thread>

#include "base/cpu_set.h"
#include "base/error.h"
#include "base/thread_pool.h"

namespace tilellm {
namespace {

TEST(CpuSet, parses_hex_masks_like_llama_cpp) {
  EXPECT_EQ(parse_cpu_mask("0x3"), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_cpu_mask("5"), (std::vector<int>{0, 2}));
  EXPECT_EQ(parse_cpu_mask("0XF0"), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(parse_cpu_mask("100"), (std::vector<int>{8}));
  EXPECT_EQ(parse_cpu_mask("aB"), (std::vector<int>{0, 1, 3, 5, 7}));
  for (const char* bad : {"", "0x", "0", "0x00", "xyz", "12g", "-1"}) {
    EXPECT_THROW(parse_cpu_mask(bad), Error) << bad;
  }
}

TEST(CpuSet, pinned_thread_reports_its_one_cpu) {
  std::string seen;
  std::thread t([&] {
    pin_current_thread(0);
    seen = affinity_list();
  });
  t.join();
  EXPECT_EQ(seen, "0");
  const std::string all = affinity_list();  // this thread is not pinned
  EXPECT_NE(all, "unknown");
  EXPECT_EQ(all.find_first_not_of("0123456789,-"), std::string::npos) << all;
}

TEST(CpuSet, a_bandwidth_limit_gives_whole_cpus) {
  EXPECT_EQ(cpus_of_quota(-1, 100000), 0);  // v1's -1, v2's "max": no limit
  EXPECT_EQ(cpus_of_quota(200000, 100000), 2);
  EXPECT_EQ(cpus_of_quota(150000, 100000), 1);  // rounded down: a third thread would be throttled
  EXPECT_EQ(cpus_of_quota(50000, 100000), 1);
  EXPECT_EQ(cpus_of_quota(400000, 50000), 8);
  EXPECT_EQ(cpus_of_quota(100000, 0), 0);
}

TEST(CpuSet, usable_cpus_follow_the_affinity_mask) {
  int pinned = 0;
  std::thread t([&] {
    pin_current_thread(0);
    pinned = usable_cpus();
  });
  t.join();
  EXPECT_EQ(pinned, 1);
  // Unpinned: at least one, at most the CPUs of the mask.
  const std::string all = affinity_list();
  int in_mask = 0;
  for (size_t i = 0; i < all.size();) {
    const size_t end = all.find(',', i);
    const std::string range = all.substr(i, end == std::string::npos ? std::string::npos : end - i);
    const size_t dash = range.find('-');
    in_mask += dash == std::string::npos ? 1 : std::stoi(range.substr(dash + 1)) - std::stoi(range) + 1;
    i = end == std::string::npos ? all.size() : end + 1;
  }
  EXPECT_GE(usable_cpus(), 1);
  EXPECT_LE(usable_cpus(), in_mask);
  EXPECT_EQ(ThreadPool::default_threads(), usable_cpus());
}

TEST(CpuSet, pinned_pool_computes_every_item_once) {
  // Built on its own thread, so that pinning the caller (thread 0 of the pool) does not pin the test runner.
  std::thread t([] {
    ThreadPool pool(3, {0});
    EXPECT_TRUE(pool.yields_at_once());  // 3 threads on one CPU
    std::vector<std::atomic<int>> hits(1001);
    for (int rep = 0; rep < 50; ++rep) {
      pool.parallel_for(int64_t(hits.size()), 7, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
      });
    }
    for (auto& h : hits) EXPECT_EQ(h.load(), 50);
    EXPECT_EQ(affinity_list(), "0");
  });
  t.join();
  ThreadPool fits(1);
  EXPECT_FALSE(fits.yields_at_once());
  ThreadPool over(usable_cpus() + 1);
  EXPECT_TRUE(over.yields_at_once());
}

}  // namespace
}  // namespace tilellm
