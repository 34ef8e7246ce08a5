// One parallel slot: a Session of its own (its KV cache of n_ctx cells, scratch and backend, all allocated
// when the server starts) and the state of the job it works on. The decode thread advances it one step at a
// time — one prompt batch (at most n_batch tokens) or one generated token — so that the slots take turns.
//
// Between jobs the slot keeps its cached tokens: a new job whose prompt starts with them (a chat's follow-up
// turn) evaluates only the rest.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "job.h"
#include "model/model.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace tilellm::serve {

class Slot {
 public:
  Slot(const Model& model, const SessionOptions& opts);

  bool busy() const { return job_ != nullptr; }
  const Session& session() const { return session_; }
  // Tokens at the start of `prompt` already in this slot's cache.
  size_t common_prefix(const std::vector<int32_t>& prompt) const;
  // Takes a job: keeps the cached prefix it shares (all but the prompt's last token, whose logits are
  // needed), forgets the rest.
  void start(std::shared_ptr<Job> job);
  // One step. Returns the finished job's result when this step ended it (the slot is then free again).
  bool step(JobResult* done);
  const std::shared_ptr<Job>& job() const { return job_; }

 private:
  void prompt_step();
  void generate_step();
  // The text generated so far that no stop string can still claim; cuts at a stop string found.
  void emit(bool final);
  void end(Finish f, const std::string& error = {});
  const float* penalized_logits();

  const Model& model_;
  const Tokenizer& tok_;
  Session session_;
  std::shared_ptr<Job> job_;
  JobResult result_;
  size_t n_done_ = 0;           // prompt tokens of the job in the cache
  std::vector<double> pooled_;  // [n_embd] embedding jobs: sum of the normed hidden states

  Utf8Stream utf8_;
  std::string text_;  // the reply so far (complete UTF-8 characters)
  size_t sent_ = 0;   // bytes of text_ handed to the job
  int64_t n_gen_ = 0;
  std::vector<int32_t> counts_;   // [n_vocab] occurrences of each id in this reply (penalties)
  std::vector<int32_t> seen_;     // ids with counts_ > 0, to reset them and to penalize only them
  std::vector<float> penalized_;  // [n_vocab] logits after the presence/frequency penalties
  std::chrono::steady_clock::time_point t_start_, t_first_;
};

}  // namespace tilellm::serve
