// One request's work as the decode thread sees it, and the channel its results go back through: the HTTP
// thread that made the job waits on it (whole replies) or drains it piece by piece (streams); the decode
// thread appends text and finishes it. Everything here is guarded by the job's own mutex, except `cancel`,
// which either side may set at any time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace tilellm::serve {

// How a generation ends, as OpenAI names it ("stop": an end-of-generation token or a stop string; "length":
// max_tokens or the context), or why it did not finish.
enum class Finish { Running, Stop, Length, Cancelled, Error };
const char* finish_reason(Finish f);

struct GenParams {
  SamplerParams sampler;
  int64_t max_tokens = 0;          // > 0: the server resolves "unset" to what the context leaves
  std::vector<std::string> stop;   // stop strings: the text ends before the first one found
  float presence_penalty = 0.0f;   // OpenAI's: subtracted once from every token generated so far
  float frequency_penalty = 0.0f;  // OpenAI's: subtracted once per occurrence so far
  bool ignore_eos = false;         // llama-server's: end-of-generation tokens do not end the reply
};

struct JobResult {
  Finish finish = Finish::Running;
  std::string error;     // Finish::Error: why
  int64_t n_prompt = 0;  // prompt tokens of the request
  int64_t n_cached = 0;  // of those, reused from the slot's cache (not evaluated again)
  int64_t n_gen = 0;     // generated tokens
  double prompt_ms = 0, gen_ms = 0;
  std::vector<float> embedding;  // embedding jobs: [n_embd], unit length
};

class Job {
 public:
  enum class Kind { Generate, Embed };
  Job(Kind k, std::vector<int32_t> prompt, GenParams params)
      : kind(k), prompt(std::move(prompt)), params(std::move(params)) {}

  const Kind kind;
  const std::vector<int32_t> prompt;
  const GenParams params;
  std::atomic<bool> cancel{false};

  // Decode thread: text that may be sent (stop strings already cut), then the end.
  void append(const std::string& text);
  void finish(const JobResult& r);

  // HTTP thread: waits up to `timeout` for new text or the end; moves the new text to *delta. True once the
  // job has finished (its result then in *result); *delta may hold the last text with it.
  bool poll(std::string* delta, JobResult* result, std::chrono::milliseconds timeout);
  // Waits up to `timeout` for the end; true once the job has finished.
  bool wait_for(std::chrono::milliseconds timeout);
  // Waits for the end; the whole text in *text.
  JobResult wait(std::string* text);

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::string pending_;  // appended, not yet taken by poll()
  std::string all_;      // everything appended
  bool done_ = false;
  JobResult result_;
};

}  // namespace tilellm::serve
