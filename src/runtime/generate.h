// The generation loop shared by the CLI's run/chat commands: evaluate a prompt, then sample token by token
// until an end-of-generation token, a stop string, or the token budget. Nothing is allocated per generated
// token.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/session.h"

namespace tilellm {

struct GenerateStats {
  int64_t n_prompt = 0;
  double prompt_ms = 0.0;
  int64_t n_gen = 0;
  double gen_ms = 0.0;  // from the first sampled token to the last
  bool hit_eog = false;
  bool hit_context = false;  // stopped because the context is full
};

// Appends `prompt` to the session, then generates up to n_predict tokens (n_predict < 0: until end of
// generation or a full context). on_token is called with each generated token; returning false stops
// generation. Each prompt and generated token is passed to sampler.accept(). End-of-generation tokens are not
// passed to on_token; with stop_at_eog false (llama.cpp's --ignore-eos) they are, and generation goes on.
// after_prompt, when given, runs once the prompt is evaluated (a prompt cache is saved there). An empty
// prompt continues from the session's logits (after load_state); a session without logits is an error.
GenerateStats generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                       int64_t n_predict, const std::function<bool(int32_t)>& on_token,
                       bool stop_at_eog = true, const std::function<void()>& after_prompt = {});

}  // namespace tilellm
