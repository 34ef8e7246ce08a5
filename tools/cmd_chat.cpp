// `tilellm chat`: an interactive conversation on a terminal (or piped stdin). The whole conversation is
// re-rendered with the chat template each turn; only the tokens past the part already in the KV cache are
// evaluated.
#include <cstdio>
#include <iostream>

#include "base/error.h"
#include "commands.h"
#include "common.h"
#include "runtime/generate.h"
#include "tokenizer/chat_template.h"

namespace tilellm::cli {

void run_chat(const ChatArgs& a) {
  auto model = load_model(a.model);
  const Tokenizer& tok = model->tokenizer();
  const ChatTemplate tmpl = chat_template_for(*model, a.chat_template);
  Session session(*model, session_options(a.model));
  if (const std::string mem = session.device_memory_summary(); !mem.empty())
    std::fprintf(stderr, "%s\n", mem.c_str());
  Sampler sampler(pick_seed(a.sampling), int32_t(model->config().n_vocab));
  std::fprintf(
      stderr, "chat template: %s. Type a message; an empty line or end of input quits.\n",
      tmpl.jinja ? "the model's own" : ("built-in " + std::string(chat_format_name(tmpl.format))).c_str());

  std::vector<ChatMessage> msgs;
  if (!a.system.empty()) msgs.push_back({"system", a.system});
  std::vector<int32_t> cached;  // tokens whose K/V are in the session, in order
  std::string line;
  for (;;) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line.empty()) break;
    msgs.push_back({"user", line});
    const std::vector<int32_t> all = tok.encode(render_chat(tmpl, msgs), true, true);
    size_t common = 0;
    while (common < all.size() && common < cached.size() && all[common] == cached[common]) ++common;
    if (common == all.size()) --common;  // at least one token must be evaluated to get logits
    if (int64_t(all.size()) >= session.n_ctx()) {
      std::fprintf(stderr,
                   "error: the conversation has %zu tokens, the context holds %lld; start a new chat or "
                   "raise -c\n",
                   all.size(), (long long)session.n_ctx());
      break;
    }
    session.truncate(int64_t(common));
    cached.assign(all.begin(), all.begin() + long(common));
    const std::vector<int32_t> fresh(all.begin() + long(common), all.end());
    cached.insert(cached.end(), fresh.begin(), fresh.end());

    sampler.reset();
    std::string reply;
    Utf8Stream out;
    const GenerateStats st = generate(session, sampler, fresh, a.n_predict, [&](int32_t id) {
      const std::string piece = tok.token_to_piece(id);
      reply += piece;
      cached.push_back(id);
      std::fputs(out.push(piece).c_str(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::fputs(out.flush().c_str(), stdout);
    std::fputs("\n", stdout);
    // A token cut off by -n was sampled but never evaluated: keep `cached` equal to what the cache holds.
    cached.resize(size_t(session.n_past()));
    msgs.push_back({"assistant", reply});
    std::fprintf(stderr, "[%lld tokens, %.2f t/s]\n", (long long)st.n_gen,
                 st.gen_ms > 0 ? 1000.0 * double(st.n_gen) / st.gen_ms : 0.0);
  }
}

void register_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* sub = app.add_subcommand("chat", "interactive chat with the model's chat template");
  add_model_args(sub, a->model);
  add_sampler_args(sub, a->sampling);
  sub->add_option("--system", a->system, "system message");
  sub->add_option("-n,--n-predict", a->n_predict, "most tokens per reply (-1: until end of turn)")
      ->check(at_least(-1));
  sub->add_option("--chat-template", a->chat_template,
                  "a built-in format instead of the model's template: chatml, gemma, llama2, llama3, phi3");
  sub->callback([a] { run_chat(*a); });
}

}  // namespace tilellm::cli
