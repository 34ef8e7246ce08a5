// serve's step log (tools/serve/step_log.h), which GET /metrics/steps and `monitor --serve` read: ids in
// order, the ring's oldest steps overwritten once it is full and a reader that fell behind told how many it
// missed, the reply's bound, and the times and token counts as recorded.
#include <gtest/gtest.h>

#include "serve/step_log.h"

namespace tilellm::serve {
namespace {

TEST(StepLog, ring_keeps_the_newest_and_counts_what_a_reader_missed) {
  StepLog log(4);
  const StepLog::Clock::time_point t0 = StepLog::Clock::now();
  for (int i = 1; i <= 6; ++i)
    log.record(t0 + std::chrono::milliseconds(10 * i), t0 + std::chrono::milliseconds(10 * i + i), i, i % 2);
  EXPECT_EQ(log.last_id(), 6u);
  uint64_t missed = 99;
  std::vector<StepRecord> v = log.since(0, 100, &missed);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(missed, 2u);  // steps 1 and 2 were overwritten
  for (size_t k = 0; k < v.size(); ++k) {
    const int id = int(k) + 3;
    EXPECT_EQ(v[k].id, uint64_t(id));
    EXPECT_EQ(v[k].n_tok, id);
    EXPECT_EQ(v[k].n_gen, id % 2);
    EXPECT_NEAR(v[k].ms, float(id), 1e-3);
    EXPECT_NEAR(v[k].t_s - v[0].t_s, 0.010 * double(k), 1e-6);
  }
  v = log.since(4, 100, &missed);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(missed, 0u);
  EXPECT_EQ(v[0].id, 5u);
  v = log.since(2, 1, &missed);  // bounded reply: the reader asks again after the last id it got
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].id, 3u);
  EXPECT_EQ(missed, 0u);
  v = log.since(6, 100, &missed);
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(missed, 0u);
  v = log.since(1000, 100, &missed);  // ids past the last (a restarted server): nothing, nothing missed
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(missed, 0u);
}

}  // namespace
}  // namespace tilellm::serve
