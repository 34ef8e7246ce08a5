// The generation loop shared by the CLI's run/chat commands and the C API: evaluate a prompt, then sample
// token by token until an end-of-generation token, a stop, or the token budget. Nothing is allocated per
// generated token.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/session.h"

namespace tilellm {
namespace telemetry {
class Pacer;
}

struct GenerateOptions {
  int64_t n_predict = -1;  // most tokens to generate; < 0: until end of generation or a full context
  // End-of-generation tokens end the loop and are not passed to on_token; false (llama.cpp's --ignore-eos):
  // they are passed on like any token and generation goes on.
  bool stop_at_eog = true;
  // Runs once the prompt is evaluated (a prompt cache is saved there); empty: nothing.
  std::function<void()> after_prompt;
  // Set from any thread (or a signal handler) to stop before the next prompt batch or the next token; the
  // loop only reads it. Null: never.
  const std::atomic<bool>* cancel = nullptr;
  // Each forward pass is handed to it (telemetry/pacer.h): each prompt batch as one pass, each decode step
  // (sampling the token and evaluating it) as another; its pauses count in gen_ms. Null: no pacing.
  telemetry::Pacer* pacer = nullptr;
};

struct GenerateStats {
  int64_t n_prompt = 0;  // prompt tokens evaluated
  double prompt_ms = 0.0;
  int64_t n_gen = 0;
  double gen_ms = 0.0;  // from the first sampled token to the last
  bool hit_eog = false;
  bool hit_context = false;  // stopped because the context is full
  bool stopped = false;      // on_token returned false
  bool cancelled = false;    // *cancel was set
};

// Appends `prompt` to the session (in batches of the session's n_batch, so that a cancel is seen between
// them; the session makes the same batches of a whole prompt), then generates. on_token is called with each
// generated token; returning false stops generation. Each prompt and generated token is passed to
// sampler.accept(). An empty prompt continues from the session's logits (after load_state); a session
// without logits is an error.
GenerateStats generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                       const GenerateOptions& opts, const std::function<bool(int32_t)>& on_token);

}  // namespace tilellm
