// CPU masks, pinning and the reported CPU set.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
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

TEST(CpuSet, pinned_pool_computes_every_item_once) {
  // Built on its own thread, so that pinning the caller (thread 0 of the pool) does not pin the test runner.
  std::thread t([] {
    ThreadPool pool(3, {0});
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
}

}  // namespace
}  // namespace tilellm
