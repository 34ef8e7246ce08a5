// One parallel slot: sequence `seq` of the Engine (its KV cache allocated when the server starts) and the
// state of the job it works on. The SlotPool's decode thread drives every slot through the same step: it asks
// each busy slot for the tokens it wants evaluated (a prompt chunk, or the token sampled last step), runs
// them all in one Engine step, then lets each slot read its logits (sample the next token, stream its text,
// and perhaps finish).
//
// Between jobs the slot keeps its cached tokens: a new job whose prompt starts with them (a chat's follow-up
// turn) evaluates only the rest.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine.h"
#include "job.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tilellm::serve {

class Slot {
 public:
  Slot(const Model& model, Engine& engine, int seq);

  bool busy() const { return job_ != nullptr; }
  int seq() const { return seq_; }
  const std::shared_ptr<Job>& job() const { return job_; }
  // Tokens at the start of `prompt` already in this slot's cache.
  size_t common_prefix(const std::vector<int32_t>& prompt) const;
  // Takes a job: keeps the cached prefix it shares (all but the prompt's last token, whose logits are
  // needed), forgets the rest.
  void start(std::shared_ptr<Job> job);
  // Whether the job still has prompt tokens to evaluate.
  bool in_prompt() const { return n_done_ < job_->prompt.size(); }
  // The tokens to evaluate in this step, at most `budget` of them (>= 1); false when the job was cancelled
  // or has already ended (it is then finished, see take_result).
  bool next_entry(int64_t budget, Engine::Entry* e);
  // After the step: entry i's logits and hidden states are in the engine.
  void after_eval(int i);
  // The step failed: the job ends with this error.
  void fail(const std::string& error);
  // The finished job's result, once (the slot is then free); false while it runs.
  bool take_result(JobResult* r);

 private:
  void sample(const float* logits);
  // The text generated so far that no stop string can still claim; cuts at a stop string found.
  void emit(bool final);
  void end(Finish f, const std::string& error = {});
  const float* penalized_logits(const float* logits);

  const Model& model_;
  const Tokenizer& tok_;
  Engine& engine_;
  const int seq_;
  std::shared_ptr<Job> job_;
  // The job's sampler, made when it starts, always on the decode thread: its buffers (n_vocab candidates)
  // come and go in the same place, request after request.
  std::optional<Sampler> sampler_;
  JobResult result_;
  size_t n_done_ = 0;           // prompt tokens of the job in the cache
  int64_t n_fed_ = 0;           // tokens of the entry handed out this step
  int32_t next_token_ = 0;      // the token sampled last, evaluated in the next step
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
