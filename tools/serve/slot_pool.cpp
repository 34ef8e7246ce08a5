#include "slot_pool.h"

#include "base/error.h"

namespace tilellm::serve {

SlotPool::SlotPool(const Model& model, const SessionOptions& opts, int n_slots, int max_queue,
                   Metrics& metrics)
    : metrics_(metrics),
      max_queue_(max_queue),
      engine_(make_engine(model, opts, n_slots)),
      entries_(size_t(n_slots)),
      owners_(size_t(n_slots)),
      kv_used_(size_t(n_slots)) {
  for (int i = 0; i < n_slots; ++i) slots_.push_back(std::make_unique<Slot>(model, *engine_, i));
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
  g.kv_cells_total = engine_->n_ctx() * int64_t(slots_.size());
  return g;
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

void SlotPool::finished(const JobResult& r) {
  --busy_;
  if (r.finish == Finish::Cancelled) metrics_.requests_cancelled++;
  if (r.finish != Finish::Stop && r.finish != Finish::Length) return;
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

void SlotPool::step() {
  // Generating slots first (one token each), then prompt chunks from what the step's budget leaves.
  int n = 0, n_gen = 0;
  int64_t budget = engine_->step_budget();
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& s : slots_) {
      if (!s->busy() || s->in_prompt() != (pass == 1) || budget <= 0) continue;
      if (!s->next_entry(std::min(budget, engine_->entry_budget()), &entries_[size_t(n)])) continue;
      budget -= entries_[size_t(n)].n;
      n_gen += pass == 0 ? 1 : 0;
      owners_[size_t(n++)] = s.get();
    }
  }
  const StepLog::Clock::time_point t0 = StepLog::Clock::now();
  try {
    engine_->eval(entries_.data(), n);
    for (int i = 0; i < n; ++i) owners_[size_t(i)]->after_eval(i);
  } catch (const Error& e) {
    for (int i = 0; i < n; ++i) owners_[size_t(i)]->fail(e.what());
  }
  if (n > 0) {
    int64_t n_tok = 0;
    for (int i = 0; i < n; ++i) n_tok += entries_[size_t(i)].n;
    metrics_.steps.record(t0, StepLog::Clock::now(), int32_t(n_tok), n_gen);
  }
  std::lock_guard<std::mutex> lk(m_);
  for (auto& s : slots_) {
    kv_used_[size_t(s->seq())] = int64_t(engine_->tokens(s->seq()).size());
    JobResult r;
    if (s->take_result(&r)) finished(r);
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
    step();
  }
}

}  // namespace tilellm::serve
