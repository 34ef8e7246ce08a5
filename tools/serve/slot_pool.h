// The parallel slots and the bounded queue in front of them, stepped by one decode thread (continuous
// batching).
//
// Each step admits waiting jobs into free slots (the slot whose cache shares the longest prefix with the
// job's prompt, so a conversation's follow-up finds its own KV), then evaluates, in one Engine step, one
// token for every slot that is generating and, in what is left of the step's token budget, a chunk of the
// prompt of every slot that is still reading one (so a long prompt never stalls the others for more than a
// step). A job that waits or runs can be cancelled at any time (Job::cancel); its slot is free at the next
// step.
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
  // Makes the engine of n_slots sequences of opts.n_ctx cells each (every KV cache allocated here) and starts
  // the decode thread. max_queue: jobs that may wait for a slot.
  SlotPool(const Model& model, const SessionOptions& opts, int n_slots, int max_queue, Metrics& metrics);
  ~SlotPool();
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // Queues a job; false (and the job untouched) when the queue is full or the pool is stopping.
  bool submit(std::shared_ptr<Job> job);
  // Cancels every waiting and running job and ends the decode thread (each job finishes Cancelled).
  void stop();
  PoolGauges gauges() const;
  int64_t n_ctx() const { return engine_->n_ctx(); }
  // Bytes of the slots' KV caches in all, wherever they are held (on_host(): host memory; else the device's).
  size_t kv_bytes() const { return engine_->kv_bytes(); }
  bool batched() const { return engine_->batched(); }
  bool on_host() const { return engine_->on_host(); }

 private:
  void run();
  void admit();  // under m_
  void step();
  void finished(const JobResult& r);  // under m_

  Metrics& metrics_;
  const int max_queue_;
  std::unique_ptr<Engine> engine_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Engine::Entry> entries_;  // [n_slots] this step's entries
  std::vector<Slot*> owners_;           // [n_slots] the slot of each entry
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  int busy_ = 0;                  // slots with a job (under m_)
  std::vector<int64_t> kv_used_;  // [n_slots] tokens in each slot's cache as of its last step (under m_)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tilellm::serve
