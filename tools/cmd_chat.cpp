// `tilellm chat`: an interactive conversation on a terminal (or piped stdin). The whole conversation is
// re-rendered with the chat template each turn; only the tokens past the part already in the KV cache are
// evaluated.
//
// On a terminal, lines are read through libedit (line editing, and the messages of this chat recalled with
// the arrow keys). Ctrl-C stops the reply being written (what was written stays in the conversation); a
// second Ctrl-C — at the prompt, or before the reply has stopped — or Ctrl-D ends the chat. Commands:
// /clear (a new conversation), /save FILE and /load FILE (the session with its messages, through
// Session::save_state: the KV cache comes back, nothing is evaluated again), /help.
#include <editline/readline.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "commands.h"
#include "common.h"
#include "runtime/generate.h"
#include "tokenizer/chat_template.h"

namespace tilellm::cli {
namespace {

// Set by the SIGINT handler, read by the loop (lock-free atomics: safe in a handler).
std::atomic<bool> g_generating{false};  // a reply is being evaluated or written
std::atomic<bool> g_stop_reply{false};  // stop it
std::atomic<bool> g_quit{false};        // end the chat

void on_sigint(int) {
  if (g_generating.load() && !g_stop_reply.exchange(true)) return;  // the first Ctrl-C of a reply
  g_quit.store(true);
}

// libedit reads the terminal through this: a byte at a time, and end of input once a Ctrl-C has asked the
// chat to end (libedit itself would read on after the interrupted read).
int read_terminal_byte(FILE*) {
  for (;;) {
    if (g_quit.load()) return EOF;
    unsigned char c = 0;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n == 1) return c;
    if (n == 0 || errno != EINTR) return EOF;
  }
}

// One line of input without its newline; false at the end of input (Ctrl-D) or after a Ctrl-C there. On a
// terminal through libedit, with the line added to the history.
bool read_line(bool tty, std::string& line) {
  if (!tty) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    return !g_quit.load() && static_cast<bool>(std::getline(std::cin, line));
  }
  char* s = readline("> ");
  if (!s || g_quit.load()) {
    std::free(s);
    return false;
  }
  line = s;
  std::free(s);
  if (!line.empty() && line[0] != '/') add_history(line.c_str());
  return true;
}

// What /save keeps beside the session: the messages and the template they were rendered with.
std::string conversation_json(const std::vector<ChatMessage>& msgs, ChatFormat f) {
  nlohmann::json j;
  j["chat_format"] = std::string(chat_format_name(f));
  for (const ChatMessage& m : msgs) j["messages"].push_back({{"role", m.role}, {"content", m.content}});
  return j.dump();
}

std::vector<ChatMessage> conversation_from_json(const std::string& file, const std::string& text,
                                                ChatFormat f) {
  std::vector<ChatMessage> msgs;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("chat_format").get<std::string>() != chat_format_name(f)) {
      fail("{}: the conversation was written in the {} chat format, this chat uses {}", file,
           j.at("chat_format").get<std::string>(), chat_format_name(f));
    }
    for (const auto& m : j.value("messages", nlohmann::json::array()))
      msgs.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  } catch (const nlohmann::json::exception&) {
    fail("{}: the session holds no chat conversation (saved by `tilellm run --prompt-cache`?)", file);
  }
  return msgs;
}

}  // namespace

void run_chat(const ChatArgs& a) {
  auto model = load_model(a.model);
  const Tokenizer& tok = model->tokenizer();
  const ChatTemplate tmpl = chat_template_for(*model, a.chat_template);
  Session session(*model, session_options(a.model));
  if (const std::string mem = session.device_memory_summary(); !mem.empty())
    std::fprintf(stderr, "%s\n", mem.c_str());
  Sampler sampler(pick_seed(a.sampling), int32_t(model->config().n_vocab));
  const bool tty = isatty(STDIN_FILENO);
  std::fprintf(
      stderr,
      "chat template: %s. Type a message; an empty line or end of input quits%s. Commands: /clear, "
      "/save FILE, /load FILE, /help.\n",
      tmpl.jinja ? "the model's own" : ("built-in " + std::string(chat_format_name(tmpl.format))).c_str(),
      tty ? "; Ctrl-C stops a reply, a second Ctrl-C quits" : "");
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read returns, so the loop sees g_quit
  struct sigaction old_sa {};
  sigaction(SIGINT, &sa, &old_sa);
  if (tty) {
    rl_catch_signals = 0;  // SIGINT comes to on_sigint, and read_terminal_byte ends the line
    rl_getc_function = read_terminal_byte;
    using_history();
  }

  std::vector<ChatMessage> msgs;
  auto start = [&] {
    msgs.clear();
    if (!a.system.empty()) msgs.push_back({"system", a.system});
  };
  start();
  std::string line;
  while (!g_quit.load() && read_line(tty, line) && !line.empty()) {
    if (line[0] == '/') {
      const size_t sp = line.find(' ');
      const std::string cmd = line.substr(0, sp);
      const std::string arg = sp == std::string::npos ? "" : std::string(python_strip(line.substr(sp + 1)));
      try {
        if (cmd == "/clear") {
          start();
          session.reset();
          std::fprintf(stderr, "[a new conversation]\n");
        } else if ((cmd == "/save" || cmd == "/load") && arg.empty()) {
          std::fprintf(stderr, "%s needs a file: %s FILE\n", cmd.c_str(), cmd.c_str());
        } else if (cmd == "/save") {
          session.save_state(arg, conversation_json(msgs, tmpl.format));
          std::fprintf(stderr, "[saved %zu messages, %lld tokens to %s]\n", msgs.size(),
                       (long long)session.n_past(), arg.c_str());
        } else if (cmd == "/load") {
          std::string data;
          session.load_state(arg, &data);
          try {
            msgs = conversation_from_json(arg, data, tmpl.format);
          } catch (const Error&) {
            // The cache now holds that file's tokens but the conversation is not this chat's: start anew.
            start();
            session.reset();
            throw;
          }
          std::fprintf(stderr, "[loaded %zu messages, %lld tokens from %s]\n", msgs.size(),
                       (long long)session.n_past(), arg.c_str());
        } else if (cmd == "/help") {
          std::fprintf(stderr,
                       "/clear      start a new conversation\n/save FILE  write the conversation and its "
                       "KV cache to FILE\n/load FILE  go on from a conversation saved by /save\n");
        } else {
          std::fprintf(stderr, "unknown command %s (/clear, /save FILE, /load FILE, /help)\n", cmd.c_str());
        }
      } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
      }
      continue;
    }
    msgs.push_back({"user", line});
    const std::vector<int32_t> all = tok.encode(render_chat(tmpl, msgs), true, true);
    const std::vector<int32_t>& cached = session.tokens();  // whose K/V are in the cache
    size_t common = 0;
    while (common < all.size() && common < cached.size() && all[common] == cached[common]) ++common;
    if (common == all.size()) --common;  // at least one token must be evaluated to get logits
    if (int64_t(all.size()) >= session.n_ctx()) {
      std::fprintf(
          stderr,
          "error: the conversation has %zu tokens, the context holds %lld; start a new chat (/clear) "
          "or raise -c\n",
          all.size(), (long long)session.n_ctx());
      msgs.pop_back();
      continue;
    }
    session.truncate(int64_t(common));
    const std::vector<int32_t> fresh(all.begin() + long(common), all.end());

    sampler.reset();
    std::string reply;
    Utf8Stream out;
    GenerateOptions go;
    go.n_predict = a.n_predict;
    go.cancel = &g_stop_reply;
    g_stop_reply.store(false);
    g_generating.store(true);
    const GenerateStats st = generate(session, sampler, fresh, go, [&](int32_t id) {
      const std::string piece = tok.token_to_piece(id);
      reply += piece;
      std::fputs(out.push(piece).c_str(), stdout);
      std::fflush(stdout);
      return true;
    });
    g_generating.store(false);
    std::fputs(out.flush().c_str(), stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    msgs.push_back({"assistant", reply});
    std::fprintf(stderr, "[%lld new prompt tokens | %lld tokens, %.2f t/s%s]\n", (long long)st.n_prompt,
                 (long long)st.n_gen, st.gen_ms > 0 ? 1000.0 * double(st.n_gen) / st.gen_ms : 0.0,
                 st.cancelled ? " | stopped by Ctrl-C" : "");
  }
  if (tty) std::fputs("\n", stdout);
  sigaction(SIGINT, &old_sa, nullptr);
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
