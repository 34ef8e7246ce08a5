// `tilellm run`: one prompt in, streamed text out, then a one-line speed summary on stderr.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "commands.h"
#include "common.h"
#include "runtime/generate.h"
#include "tokenizer/chat_template.h"

namespace tilellm::cli {
namespace {

struct RunArgs {
  ModelArgs model;
  SamplingArgs sampling;
  std::string prompt;
  std::string file;                  // -f: the prompt from a file
  std::vector<std::string> reverse;  // -r: stop once the text ends with one of these
  std::string system;
  std::string chat_template;
  int64_t n_predict = 128;
  bool chat = false;
  bool ignore_eos = false;
  bool conversation = false;      // llama.cpp's -cnv: the chat command
  std::string prompt_cache;       // --prompt-cache FILE: the session after the prompt, reused by later runs
  bool prompt_cache_all = false;  // also save it after the generation
  bool prompt_cache_ro = false;   // use the file, never write it
  bool verbose_prompt = false;
  bool verbose = false;  // -v: how the session was set up (--prefill auto's speeds and choice)
};

// --prompt-cache: restores the file into the session when it exists and keeps the longest prefix of the
// prompt it holds (at least one token is left to evaluate, unless the whole prompt and its logits are
// there, as llama.cpp's prompt cache does); returns how many prompt tokens were reused.
size_t restore_prompt_cache(Session& session, const std::string& file, const std::vector<int32_t>& prompt) {
  if (!std::filesystem::exists(file)) {
    std::fprintf(stderr, "prompt cache: %s does not exist yet; it will be written after the prompt\n",
                 file.c_str());
    return 0;
  }
  session.load_state(file);
  const std::vector<int32_t>& cached = session.tokens();
  size_t n = 0;
  while (n < prompt.size() && n < cached.size() && prompt[n] == cached[n]) ++n;
  if (!(n == prompt.size() && cached.size() == n && session.has_logits())) {
    if (n == prompt.size()) --n;  // the prompt's last token is evaluated again for its logits
    session.truncate(int64_t(n));
  }
  std::fprintf(stderr, "prompt cache: %s: reused %zu of %zu prompt tokens\n", file.c_str(), n, prompt.size());
  return n;
}

// llama.cpp's --verbose-prompt: the prompt as the model sees it, then each token, on stderr.
void print_prompt(const Tokenizer& tok, const std::string& text, const std::vector<int32_t>& ids) {
  std::fprintf(stderr, "prompt: \"%s\"\nnumber of tokens in prompt = %zu\n", text.c_str(), ids.size());
  for (int32_t id : ids) std::fprintf(stderr, "%6d -> '%s'\n", id, std::string(tok.token_text(id)).c_str());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the prompt file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void run(RunArgs a) {
  if (!a.file.empty()) {
    if (!a.prompt.empty()) fail("give the prompt once: -p TEXT or -f FILE, not both");
    a.prompt = read_file(a.file);
  }
  if ((a.prompt_cache_all || a.prompt_cache_ro) && a.prompt_cache.empty())
    fail("--prompt-cache-all and --prompt-cache-ro go with --prompt-cache FILE");
  if (a.prompt_cache_all && a.prompt_cache_ro)
    fail("--prompt-cache-all writes the file and --prompt-cache-ro never does: give one of them");
  if (a.conversation) {
    // llama-cli -cnv: an interactive chat, -p (when given) its system message.
    ChatArgs c;
    c.model = a.model;
    c.sampling = a.sampling;
    c.system = !a.system.empty() ? a.system : a.prompt;
    c.n_predict = a.n_predict;
    c.chat_template = a.chat_template;
    return run_chat(c);
  }
  if (a.prompt.empty()) fail("no prompt: give one with -p TEXT or -f FILE");
  auto model = load_model(a.model);
  const Tokenizer& tok = model->tokenizer();
  std::vector<int32_t> prompt;
  std::string text = a.prompt;
  if (a.chat || !a.chat_template.empty()) {
    const ChatTemplate tmpl = chat_template_for(*model, a.chat_template);
    std::vector<ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", a.prompt});
    text = render_chat(tmpl, msgs);
    prompt = tok.encode(text, true, true);
  } else {
    prompt = tok.encode(a.prompt, true, false);
  }
  if (a.verbose_prompt) print_prompt(tok, text, prompt);
  if (prompt.empty()) fail("the prompt is empty after tokenization");

  Session session(*model, session_options(a.model));
  if (const std::string mem = session.device_memory_summary(); !mem.empty())
    std::fprintf(stderr, "%s\n", mem.c_str());
  if (const PrefillSpeeds* ps = session.prefill_speeds(); ps && a.verbose) {
    std::fprintf(stderr,
                 "prefill auto: %s %.1f t/s at %lld tokens a pass, the host's tiles %.1f t/s at %lld (%s): "
                 "prompt batches on %s\n",
                 std::string(session.backend_name()).c_str(), ps->device_tps,
                 static_cast<long long>(ps->device_tokens), ps->host_tps, static_cast<long long>(ps->tokens),
                 ps->source.c_str(), ps->host_faster() ? "the host" : "the device");
  }
  if (int64_t(prompt.size()) >= session.n_ctx()) {
    fail("the prompt has {} tokens but the context holds {} (raise it with -c)", prompt.size(),
         session.n_ctx());
  }
  Sampler sampler(pick_seed(a.sampling), int32_t(model->config().n_vocab));
  std::vector<int32_t> fresh = prompt;  // what is left to evaluate
  if (!a.prompt_cache.empty()) {
    const size_t reused = restore_prompt_cache(session, a.prompt_cache, prompt);
    for (size_t i = 0; i < reused; ++i) sampler.accept(prompt[i]);  // as if they had been evaluated here
    fresh.erase(fresh.begin(), fresh.begin() + long(reused));
  }
  const bool save_cache = !a.prompt_cache.empty() && !a.prompt_cache_ro;
  Utf8Stream out;
  const bool chat = a.chat || !a.chat_template.empty();
  if (!chat) {
    std::fputs(a.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  std::string generated;  // for the reverse prompts
  bool reversed = false;
  GenerateOptions go;
  go.n_predict = a.n_predict;
  go.stop_at_eog = !a.ignore_eos;
  go.after_prompt = [&] {
    if (save_cache && !fresh.empty()) session.save_state(a.prompt_cache);
  };
  const GenerateStats st = generate(session, sampler, fresh, go, [&](int32_t id) {
    const std::string piece = tok.token_to_piece(id);
    std::fputs(out.push(piece).c_str(), stdout);
    std::fflush(stdout);
    if (a.reverse.empty()) return true;
    generated += piece;
    for (const std::string& r : a.reverse) {
      if (!r.empty() && generated.size() >= r.size() &&
          generated.compare(generated.size() - r.size(), r.size(), r) == 0)
        reversed = true;
    }
    return !reversed;
  });
  if (save_cache && a.prompt_cache_all) session.save_state(a.prompt_cache);
  std::fputs(out.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "prompt: %lld tokens, %.2f t/s | generated: %lld tokens, %.2f t/s%s\n",
               (long long)st.n_prompt, st.prompt_ms > 0 ? 1000.0 * double(st.n_prompt) / st.prompt_ms : 0.0,
               (long long)st.n_gen, st.gen_ms > 0 ? 1000.0 * double(st.n_gen) / st.gen_ms : 0.0,
               st.hit_context ? " (stopped: context full)"
               : reversed     ? " (stopped: reverse prompt)"
                              : "");
}

}  // namespace

void register_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand("run", "generate text from a prompt");
  add_model_args(sub, a->model);
  add_sampler_args(sub, a->sampling);
  sub->add_option("-p,--prompt", a->prompt, "prompt text");
  sub->add_option("-f,--file", a->file, "the prompt from a file");
  sub->add_option("-n,--n-predict", a->n_predict,
                  "tokens to generate (-1: until end of text or a full context)")
      ->capture_default_str()
      ->check(at_least(-1));
  sub->add_flag("--chat", a->chat, "wrap the prompt in the model's chat template");
  sub->add_option(
      "--chat-template", a->chat_template,
      "wrap the prompt in a built-in format instead of the model's template: chatml, gemma, llama2, "
      "llama3, phi3");
  sub->add_option("--system", a->system, "system message (with --chat; -sys)");
  sub->add_option("-r,--reverse-prompt", a->reverse,
                  "stop once the generated text ends with this (repeatable)");
  sub->add_flag("--ignore-eos", a->ignore_eos, "go on past end-of-generation tokens");
  sub->add_flag("-v,--verbose", a->verbose,
                "print how the session was set up: with --prefill auto, the two speeds it measured (or kept "
                "from an earlier run) and where prompts go");
  sub->add_flag("--verbose-prompt", a->verbose_prompt,
                "print the prompt as the model sees it (after the chat template) and its tokens");
  sub->add_option("--prompt-cache", a->prompt_cache,
                  "a file holding the session after the prompt: restored when it exists (a file from another "
                  "model, context size or cache type is refused), the prompt's cached prefix reused, and "
                  "written after the prompt");
  sub->add_flag("--prompt-cache-all", a->prompt_cache_all,
                "with --prompt-cache: also write the file after the generation (the generated text "
                "cached too)");
  sub->add_flag("--prompt-cache-ro", a->prompt_cache_ro, "with --prompt-cache: use the file, never write it");
  sub->add_flag("--conversation,!--no-conversation", a->conversation,
                "llama.cpp's -cnv: an interactive chat (`tilellm chat`), -p its system message; -no-cnv: a "
                "plain completion (the default)");
  sub->callback([a] { run(*a); });
}

}  // namespace tilellm::cli
