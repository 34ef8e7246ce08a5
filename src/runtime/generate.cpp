#include "runtime/generate.h"

#include <chrono>

#include "base/error.h"

namespace tilellm {

GenerateStats generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                       int64_t n_predict, const std::function<bool(int32_t)>& on_token, bool stop_at_eog,
                       const std::function<void()>& after_prompt) {
  using Clock = std::chrono::steady_clock;
  GenerateStats st;
  const Tokenizer& tok = session.model().tokenizer();
  if (prompt.empty() && !session.has_logits())
    fail("nothing to generate from: the prompt is empty and the session holds no logits");
  st.n_prompt = int64_t(prompt.size());
  const auto t0 = Clock::now();
  session.eval(prompt.data(), int64_t(prompt.size()));
  for (int32_t t : prompt) sampler.accept(t);
  st.prompt_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (after_prompt) after_prompt();
  const auto t1 = Clock::now();  // the prompt cache's save counts in neither speed

  for (int64_t i = 0; n_predict < 0 || i < n_predict; ++i) {
    const int32_t id = sampler.sample(session.logits());
    sampler.accept(id);
    if (stop_at_eog && tok.is_eog(id)) {
      st.hit_eog = true;
      break;
    }
    ++st.n_gen;
    if (!on_token(id)) break;
    if (n_predict >= 0 && i + 1 == n_predict) break;  // the last token needs no forward pass
    if (session.n_past() >= session.n_ctx()) {
      st.hit_context = true;
      break;
    }
    session.eval(&id, 1);
  }
  st.gen_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  return st;
}

}  // namespace tilellm
