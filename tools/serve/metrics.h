// The server's counters (atomics, bumped from the HTTP and decode threads) and their Prometheus text form
// for GET /metrics, together with the slot pool's gauges read at the time of the scrape; and the log of the
// decode thread's steps (step_log.h) that GET /metrics/steps reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "step_log.h"

namespace tilellm::serve {

// The slot pool's state at one moment (SlotPool::gauges()).
struct PoolGauges {
  int slots_total = 0;
  int slots_busy = 0;
  int queue_depth = 0;  // requests waiting for a slot
  int queue_capacity = 0;
  int64_t kv_cells_used = 0;   // tokens held in the slots' caches, summed
  int64_t kv_cells_total = 0;  // slots x context
};

struct Metrics {
  std::atomic<uint64_t> requests{0};            // HTTP requests answered, every path
  std::atomic<uint64_t> requests_rejected{0};   // answered 503 because the queue was full
  std::atomic<uint64_t> requests_errors{0};     // answered 4xx/5xx
  std::atomic<uint64_t> requests_cancelled{0};  // client went away (or shutdown) before the end
  std::atomic<uint64_t> completions{0};         // generations finished (chat and completions)
  std::atomic<uint64_t> embeddings{0};
  std::atomic<uint64_t> prompt_tokens{0};         // prompt tokens of finished jobs (evaluated + reused)
  std::atomic<uint64_t> prompt_tokens_reused{0};  // of those, found in a slot's cache
  std::atomic<uint64_t> generated_tokens{0};
  std::atomic<uint64_t> prompt_us{0};  // time spent evaluating prompts, microseconds
  std::atomic<uint64_t> gen_us{0};     // time from first to last generated token, per job, summed
  StepLog steps;                       // every engine step (GET /metrics/steps)

  // Prometheus text exposition format (version 0.0.4).
  std::string prometheus(const PoolGauges& g) const;
};

}  // namespace tilellm::serve
