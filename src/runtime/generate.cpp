#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "runtime/telemetry/pacer.h"

namespace tilellm {

GenerateStats generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                       const GenerateOptions& opts, const std::function<bool(int32_t)>& on_token) {
  using Clock = std::chrono::steady_clock;
  GenerateStats st;
  const Tokenizer& tok = session.model().tokenizer();
  auto cancelled = [&] { return opts.cancel && opts.cancel->load(std::memory_order_relaxed); };
  if (prompt.empty() && !session.has_logits())
    fail("nothing to generate from: the prompt is empty and the session holds no logits");
  if (session.n_past() + int64_t(prompt.size()) > session.n_ctx()) {
    fail_as(ErrorKind::ContextFull,
            "the prompt has {} tokens but the context holds {} ({} are already in it; raise it with -c)",
            prompt.size(), session.n_ctx(), session.n_past());
  }
  const auto t0 = Clock::now();
  const int64_t n_batch = opts.cancel ? session.n_batch() : std::max<int64_t>(1, int64_t(prompt.size()));
  for (int64_t b = 0; b < int64_t(prompt.size()); b += n_batch) {
    if (cancelled()) {
      st.cancelled = true;
      return st;
    }
    const int64_t nb = std::min<int64_t>(n_batch, int64_t(prompt.size()) - b);
    const auto p0 = Clock::now();
    session.eval(prompt.data() + b, nb);
    if (opts.pacer) opts.pacer->after_pass(p0, Clock::now(), nb, false);
    for (int64_t i = b; i < b + nb; ++i) sampler.accept(prompt[size_t(i)]);
    st.n_prompt += nb;
  }
  st.prompt_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (opts.after_prompt) opts.after_prompt();
  const auto t1 = Clock::now();  // the prompt cache's save counts in neither speed

  for (int64_t i = 0; opts.n_predict < 0 || i < opts.n_predict; ++i) {
    if (cancelled()) {
      st.cancelled = true;
      break;
    }
    const auto s0 = Clock::now();
    const int32_t id = sampler.sample(session.logits());
    sampler.accept(id);
    if (opts.stop_at_eog && tok.is_eog(id)) {
      st.hit_eog = true;
      break;
    }
    ++st.n_gen;
    if (!on_token(id)) {
      st.stopped = true;
      break;
    }
    if (opts.n_predict >= 0 && i + 1 == opts.n_predict) break;  // the last token needs no forward pass
    if (session.n_past() >= session.n_ctx()) {
      st.hit_context = true;
      break;
    }
    session.eval(&id, 1);
    if (opts.pacer) opts.pacer->after_pass(s0, Clock::now(), 1, true);
  }
  st.gen_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  return st;
}

}  // namespace tilellm
