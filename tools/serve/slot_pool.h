// The parallel slots and the bounded queue in front of them, stepped by one decode thread.
//
// Each step of the decode thread admits waiting jobs into free slots (the slot whose cache shares the longest
// prefix with the job's prompt, so a conversation's follow-up finds its own KV), then advances every busy
// slot by one step — a prompt batch or one token — one slot after another. A slot's Session runs its own
// forward pass: the slots' tokens are not batched into one pass (the engine's forward pass takes one
// sequence; docs/SERVE.md says what batching across slots would need). A job that waits or runs can be
// cancelled at any time (Job::cancel); its slot is free after the next step.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "job.h"
#include "metrics.h"
#include "slot.h"

namespace tilellm::serve {

class SlotPool {
 public:
  // Makes n_slots sessions of opts.n_ctx cells each (every KV cache allocated here) and starts the decode
  // thread. max_queue: jobs that may wait for a slot.
  SlotPool(const Model& model, const SessionOptions& opts, int n_slots, int max_queue, Metrics& metrics);
  ~SlotPool();
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // Queues a job; false (and the job untouched) when the queue is full or the pool is stopping.
  bool submit(std::shared_ptr<Job> job);
  // Cancels every waiting and running job and ends the decode thread (each job finishes Cancelled).
  void stop();
  PoolGauges gauges() const;
  int64_t n_ctx() const { return n_ctx_; }
  // Bytes of the slots' host KV caches, summed (0 where the caches live on a device).
  size_t kv_bytes() const;

 private:
  void run();
  void admit();  // under m_

  Metrics& metrics_;
  const int max_queue_;
  int64_t n_ctx_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  int busy_ = 0;                  // slots with a job (under m_)
  std::vector<int64_t> kv_used_;  // [n_slots] tokens in each slot's cache as of its last step (under m_)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tilellm::serve
