#include "slot_pool.h"

namespace tilellm::serve {

SlotPool::SlotPool(const Model& model, const SessionOptions& opts, int n_slots, int max_queue,
                   Metrics& metrics)
    : metrics_(metrics), max_queue_(max_queue), kv_used_(size_t(n_slots)) {
  for (int i = 0; i < n_slots; ++i) slots_.push_back(std::make_unique<Slot>(model, opts));
  n_ctx_ = slots_.front()->session().n_ctx();
  thread_ = std::thread([this] { run(); });
}

SlotPool::~SlotPool() {
  stop();
}

bool SlotPool::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lk(m_);
    // A job may wait only when no slot is free for it at the next step, beyond the queue's bound.
    const int free_slots = int(slots_.size()) - busy_;
    if (stopping_ || int(queue_.size()) >= max_queue_ + free_slots) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return true;
}

void SlotPool::stop() {
  {
    std::lock_guard<std::mutex> lk(m_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

PoolGauges SlotPool::gauges() const {
  std::lock_guard<std::mutex> lk(m_);
  PoolGauges g;
  g.slots_total = int(slots_.size());
  g.slots_busy = busy_;
  g.queue_depth = int(queue_.size());
  g.queue_capacity = max_queue_;
  for (int64_t n : kv_used_) g.kv_cells_used += n;
  g.kv_cells_total = n_ctx_ * int64_t(slots_.size());
  return g;
}

size_t SlotPool::kv_bytes() const {
  size_t n = 0;
  for (const auto& s : slots_) n += s->session().host_kv_bytes();
  return n;
}

void SlotPool::admit() {
  while (!queue_.empty() && busy_ < int(slots_.size())) {
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    if (job->cancel.load()) {  // gone before it started
      JobResult r;
      r.finish = Finish::Cancelled;
      r.n_prompt = int64_t(job->prompt.size());
      job->finish(r);
      metrics_.requests_cancelled++;
      continue;
    }
    // The free slot whose cache shares the longest prefix with the prompt.
    Slot* best = nullptr;
    size_t best_n = 0;
    for (auto& s : slots_) {
      if (s->busy()) continue;
      const size_t n = s->common_prefix(job->prompt);
      if (!best || n > best_n) best = s.get(), best_n = n;
    }
    best->start(std::move(job));
    ++busy_;
  }
}

void SlotPool::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_.wait(lk, [&] { return stopping_ || busy_ > 0 || !queue_.empty(); });
      if (stopping_) {
        for (auto& j : queue_) j->cancel.store(true);
        for (auto& s : slots_)
          if (s->busy()) s->job()->cancel.store(true);
      }
      admit();
      if (stopping_ && busy_ == 0) return;
    }
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = *slots_[i];
      JobResult r;
      const bool finished = s.step(&r);
      std::lock_guard<std::mutex> lk(m_);
      kv_used_[i] = s.session().n_past();
      if (!finished) continue;
      --busy_;
      if (r.finish == Finish::Cancelled) metrics_.requests_cancelled++;
      if (r.finish == Finish::Stop || r.finish == Finish::Length) {
        metrics_.prompt_tokens += uint64_t(r.n_prompt);
        metrics_.prompt_tokens_reused += uint64_t(r.n_cached);
        metrics_.generated_tokens += uint64_t(r.n_gen);
        metrics_.prompt_us += uint64_t(r.prompt_ms * 1000.0);
        metrics_.gen_us += uint64_t(r.gen_ms * 1000.0);
        if (r.embedding.empty()) {
          metrics_.completions++;
        } else {
          metrics_.embeddings++;
        }
      }
    }
  }
}

}  // namespace tilellm::serve
