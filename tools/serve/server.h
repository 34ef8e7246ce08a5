// `tilellm serve`'s HTTP side: cpp-httplib's server with the OpenAI-style routes, the API key check, the
// limits (body size, prompt length, max_tokens), errors as OpenAI error objects, and the chat page.
// Generation and embeddings go through the SlotPool; tokenize, detokenize, models, health and metrics are
// answered on the HTTP thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "metrics.h"
#include "model/model.h"
#include "slot_pool.h"
#include "tokenizer/chat_template.h"

namespace tilellm::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";  // loopback unless asked otherwise
  int port = 8080;                 // 0: any free port (the one bound is printed)
  int parallel = 1;                // slots
  int max_queue = 64;              // requests that may wait for a slot; more get 503
  std::string api_key;             // empty: no key needed
  std::string cors_origin;         // empty: no CORS headers at all
  size_t max_body = 1 << 20;       // request body bytes; more get 413
  int64_t max_tokens = 4096;       // the most a request may ask for (max_tokens); more get 400
  std::string alias;               // the model's id in the API; empty: the file name
  int http_threads = 0;            // 0: parallel + max_queue + 8, so that every queued request has a thread
};

// Whether two secrets are equal, in time that depends only on their lengths (no early exit on a difference).
bool same_secret(const std::string& given, const std::string& expected);

class HttpServer {
 public:
  HttpServer(const Model& model, const ChatTemplate& tmpl, SlotPool& pool, Metrics& metrics,
             const ServeOptions& opts);
  ~HttpServer();
  // Binds host:port; the port bound (useful with port 0). Throws tilellm::Error when it cannot bind.
  int bind();
  // Serves until stop(); returns then.
  void listen();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tilellm::serve
