// `tilellm serve`: an OpenAI-compatible HTTP server (tools/serve/, docs/SERVE.md) over --parallel slots.
//
// Start-up loads the model, makes every slot's session (all KV caches allocated here), binds the address
// and prints "listening on http://HOST:PORT". SIGTERM or SIGINT stop it: waiting and running requests are
// cancelled (whole replies get 503, streams an error event), the listener closes, and the process exits 0.
// The signals are blocked in every thread and taken by one thread of their own (sigwait), so that nothing
// runs inside a signal handler.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "base/error.h"
#include "commands.h"
#include "common.h"
#include "serve/server.h"

namespace tilellm::cli {
namespace {

struct ServeArgs {
  ModelArgs model;
  serve::ServeOptions serve;
  std::string chat_template;
};

void run_serve(const ServeArgs& a) {
  // Before any thread exists, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto model = load_model(a.model);
  const ChatTemplate tmpl = chat_template_for(*model, a.chat_template);
  const SessionOptions so = session_options(a.model);
  serve::Metrics metrics;
  serve::SlotPool pool(*model, so, a.serve.parallel, a.serve.max_queue, metrics);
  std::fprintf(
      stderr,
      "%d slots of %lld tokens each (KV cache %.1f MiB in all, in %s memory), queue of %d, %s backend, "
      "%s\n",
      a.serve.parallel, (long long)pool.n_ctx(), double(pool.kv_bytes()) / (1 << 20),
      pool.on_host() ? "host" : "device", a.serve.max_queue, so.backend.c_str(),
      pool.batched() ? "the slots' tokens batched into one forward pass per step"
                     : "one forward pass per slot per step (this backend holds one KV cache)");
  serve::HttpServer http(*model, tmpl, pool, metrics, a.serve);
  const int port = http.bind();
  if (a.serve.host != "127.0.0.1" && a.serve.host != "localhost" && a.serve.host != "::1" &&
      a.serve.api_key.empty())
    std::fprintf(stderr, "warning: listening on %s without --api-key: anyone who reaches it may use it\n",
                 a.serve.host.c_str());

  // Stops the pool, then the listener: again until listen() has returned, since a stop that comes before
  // the listener runs would be lost.
  std::atomic<bool> served{false};
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (!served.load()) std::fprintf(stderr, "%s: stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    pool.stop();
    while (!served.load()) {
      http.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::fprintf(stderr, "listening on http://%s:%d\n", a.serve.host.c_str(), port);
  http.listen();
  served.store(true);
  // listen() also returns when the listener fails: wake the signal thread so that it stops the rest.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
}

}  // namespace

void register_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* sub =
      app.add_subcommand("serve", "OpenAI-compatible HTTP server with parallel slots and a chat page");
  add_model_args(sub, a->model);
  serve::ServeOptions& s = a->serve;
  sub->add_option("--host", s.host, "address to listen on (default: 127.0.0.1, this machine only)");
  sub->add_option("--port", s.port, "port (0: any free one, printed)")->check(CLI::Range(0, 65535));
  sub->add_option("--parallel", s.parallel,
                  "slots: requests worked on at once, each with its own KV cache (llama-server's -np)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--max-queue", s.max_queue, "requests that may wait for a slot; more are answered 503")
      ->check(CLI::Range(0, 100000));
  sub->add_option("--api-key", s.api_key,
                  "require `Authorization: Bearer KEY` on every endpoint but /health");
  sub->add_option("--cors-origin", s.cors_origin, "send CORS headers allowing this origin (default: none)");
  sub->add_option("--max-body", s.max_body, "request body limit in bytes (413 beyond)")->check(at_least(1));
  sub->add_option("--max-tokens", s.max_tokens, "most tokens a request may generate (400 beyond)")
      ->check(at_least(1));
  sub->add_option("--alias", s.alias, "the model's id in the API (default: the file name)");
  sub->add_option("--http-threads", s.http_threads, "HTTP worker threads (default: parallel + max-queue + 8)")
      ->check(at_least(1));
  sub->add_option("--chat-template", a->chat_template,
                  "a built-in format instead of the model's template: chatml, gemma, llama2, llama3, phi3");
  sub->callback([a] { run_serve(*a); });
}

}  // namespace tilellm::cli
