// `tilellm run`: one prompt in, streamed text out, then a one-line speed summary on stderr.
#include <cstdio>

#include "base/error.h"
#include "commands.h"
#include "common.h"
#include "runtime/generate.h"
#include "tokenizer/chat_template.h"

namespace tilellm::cli {
namespace {

struct RunArgs {
  ModelArgs model;
  SamplerParams sampling;
  std::string prompt;
  std::string system;
  int64_t n_predict = 128;
  bool chat = false;
};

void run(const RunArgs& a) {
  auto model = load_model(a.model);
  const Tokenizer& tok = model->tokenizer();
  std::vector<int32_t> prompt;
  if (a.chat) {
    const ChatTemplate tmpl = chat_template_from_gguf(model->file().get_string_opt("tokenizer.chat_template"),
                                                      model->config().arch_name);
    std::vector<ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", a.prompt});
    prompt = tok.encode(apply_chat_template(tmpl, msgs, true), true, true);
  } else {
    prompt = tok.encode(a.prompt, true, false);
  }
  if (prompt.empty()) fail("the prompt is empty after tokenization");

  Session session(*model, session_options(a.model));
  if (const std::string mem = session.device_memory_summary(); !mem.empty())
    std::fprintf(stderr, "%s\n", mem.c_str());
  if (int64_t(prompt.size()) >= session.n_ctx()) {
    fail("the prompt has {} tokens but the context holds {} (raise it with -c)", prompt.size(),
         session.n_ctx());
  }
  Sampler sampler(a.sampling, int32_t(model->config().n_vocab));
  Utf8Stream out;
  if (!a.chat) {
    std::fputs(a.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  const GenerateStats st = generate(session, sampler, prompt, a.n_predict, [&](int32_t id) {
    std::fputs(out.push(tok.token_to_piece(id)).c_str(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputs(out.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "prompt: %lld tokens, %.2f t/s | generated: %lld tokens, %.2f t/s%s\n",
               (long long)st.n_prompt, st.prompt_ms > 0 ? 1000.0 * double(st.n_prompt) / st.prompt_ms : 0.0,
               (long long)st.n_gen, st.gen_ms > 0 ? 1000.0 * double(st.n_gen) / st.gen_ms : 0.0,
               st.hit_context ? " (stopped: context full)" : "");
}

}  // namespace

void register_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand("run", "generate text from a prompt");
  add_model_args(sub, a->model);
  add_sampler_args(sub, a->sampling);
  sub->add_option("-p,--prompt", a->prompt, "prompt text")->required();
  sub->add_option("-n,--n-predict", a->n_predict, "tokens to generate (-1: until end of text)")
      ->capture_default_str();
  sub->add_flag("--chat", a->chat, "wrap the prompt in the model's chat template");
  sub->add_option("--system", a->system, "system message (with --chat)");
  sub->callback([a] { run(*a); });
}

}  // namespace tilellm::cli
