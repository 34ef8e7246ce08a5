// The routes that run the model: /v1/chat/completions and /v1/completions (whole replies, or server-sent
// events ending in `data: [DONE]`), and /v1/embeddings. Each request becomes a Job in the SlotPool's queue;
// a full queue is 503 with Retry-After. A client that goes away cancels its job, which frees the slot at the
// decode thread's next step: a stream's when a write finds the connection closed, a whole reply's when its
// connection is seen closed while the job runs (peer_watch.h, checked every 50 ms).
#include <chrono>
#include <memory>

#include "api_response.h"
#include "peer_watch.h"
#include "server_impl.h"

namespace tilellm::serve {
namespace {

using json = nlohmann::json;

std::string sse(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

// The queue's answer for a job that could not wait.
ApiError queue_full(const SlotPool& pool) {
  const PoolGauges g = pool.gauges();
  return ApiError(503,
                  "the server is busy: " + std::to_string(g.slots_busy) + " slots working and " +
                      std::to_string(g.queue_depth) + " requests waiting (the queue holds " +
                      std::to_string(g.queue_capacity) + "); retry later",
                  "", "server_busy");
}

}  // namespace

void HttpServer::Impl::add_generate_routes() {
  // Prompt tokens checked against the limits, a sampler for the job, then queued and answered.
  auto generate = [this](const GenRequest& r, std::vector<int32_t> prompt, bool chat,
                         const httplib::Request& req, httplib::Response& res) {
    const int64_t n_ctx = pool.n_ctx();
    if (prompt.empty()) throw ApiError(400, "the prompt is empty", chat ? "messages" : "prompt");
    if (int64_t(prompt.size()) >= n_ctx)
      throw ApiError(400,
                     "the prompt has " + std::to_string(prompt.size()) + " tokens; a slot's context holds " +
                         std::to_string(n_ctx) + " (-c), which must leave room for at least one new token",
                     chat ? "messages" : "prompt", "context_length_exceeded");
    GenParams params = r.params;
    if (params.max_tokens > opts.max_tokens)
      throw ApiError(400,
                     "'max_tokens' is " + std::to_string(params.max_tokens) +
                         "; this server allows at most " + std::to_string(opts.max_tokens) +
                         " (--max-tokens)",
                     "max_tokens", "invalid_value");
    if (params.max_tokens == 0) params.max_tokens = opts.max_tokens;  // the context may end it sooner
    Sampler::check(params.sampler);
    auto job = std::make_shared<Job>(Job::Kind::Generate, std::move(prompt), params);
    if (!pool.submit(job)) {
      metrics.requests_rejected++;
      throw queue_full(pool);
    }
    const int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const ReplyHead head{(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++), model_id, now, chat};
    if (!r.stream) {
      const PeerWatch peer(req);
      while (!job->wait_for(std::chrono::milliseconds(50)))
        if (!job->cancel.load() && peer.gone()) job->cancel.store(true);
      std::string text;
      const JobResult res_ = job->wait(&text);
      if (res_.finish == Finish::Cancelled)
        throw ApiError(503, "the server is shutting down", "", "shutting_down");
      if (res_.finish == Finish::Error) throw ApiError(500, res_.error);
      return send_json(res, reply_json(head, text, res_));
    }
    res.set_header("Cache-Control", "no-cache");
    auto first = std::make_shared<bool>(true);
    const bool include_usage = r.include_usage;
    res.set_chunked_content_provider(
        "text/event-stream",
        [job, head, first, include_usage](size_t, httplib::DataSink& sink) {
          // The peer closed its end: stop the job (its slot is free after the next step).
          if (!sink.is_writable()) {
            job->cancel.store(true);
            return false;
          }
          std::string delta;
          JobResult r;
          const bool done = job->poll(&delta, &r, std::chrono::milliseconds(50));
          std::string out;
          if (*first || !delta.empty()) out += sse(chunk_json(head, delta, *first, nullptr));
          *first = false;
          if (done) {
            if (r.finish == Finish::Cancelled || r.finish == Finish::Error) {
              const int status = r.finish == Finish::Error ? 500 : 503;
              out += sse(
                  error_json(status, r.finish == Finish::Error ? r.error : "the server is shutting down"));
            } else {
              out += sse(chunk_json(head, "", false, &r));
              if (include_usage) out += sse(usage_chunk_json(head, r));
              out += "data: [DONE]\n\n";
            }
          }
          if (!out.empty() && !sink.write(out.data(), out.size())) {
            job->cancel.store(true);
            return false;
          }
          if (done) sink.done();
          return true;
        },
        [job](bool ok) {
          if (!ok) job->cancel.store(true);
        });
  };

  auto chat = [this, generate](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      ChatRequest r = parse_chat(parse_body(req.body));
      check_model(r.model);
      std::string warning;
      const std::string text = apply_chat_template(tmpl, r.messages, true, &warning);
      generate(r, model.tokenizer().encode(text, true, true), true, req, res);
    });
  };
  auto complete = [this, generate](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      CompletionRequest r = parse_completion(parse_body(req.body));
      check_model(r.model);
      if (r.prompt_ids.empty())
        return generate(r, model.tokenizer().encode(r.prompt, true, true), false, req, res);
      const int32_t n_vocab = model.tokenizer().n_vocab();
      for (int32_t id : r.prompt_ids) {
        if (id >= n_vocab)
          throw ApiError(400,
                         "'prompt' holds token id " + std::to_string(id) + "; the vocabulary has " +
                             std::to_string(n_vocab) + " tokens",
                         "prompt", "invalid_value");
      }
      generate(r, std::move(r.prompt_ids), false, req, res);
    });
  };
  auto embed = [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      EmbeddingRequest r = parse_embedding(parse_body(req.body));
      check_model(r.model);
      if (!pool.on_host())
        throw ApiError(501,
                       "embeddings pool hidden states read on the host backend; this server runs the model "
                       "on a device backend (--backend cpu serves them)",
                       "", "not_implemented");
      std::vector<std::vector<int32_t>> inputs = r.token_inputs;
      for (const std::string& t : r.texts) inputs.push_back(model.tokenizer().encode(t, true, false));
      const int32_t n_vocab = model.tokenizer().n_vocab();
      for (size_t i = 0; i < inputs.size(); ++i) {
        const std::string field = "input[" + std::to_string(i) + "]";
        if (inputs[i].empty()) throw ApiError(400, "'" + field + "' has no tokens", "input");
        if (int64_t(inputs[i].size()) > pool.n_ctx())
          throw ApiError(400,
                         "'" + field + "' has " + std::to_string(inputs[i].size()) +
                             " tokens; a slot's context holds " + std::to_string(pool.n_ctx()) + " (-c)",
                         "input", "context_length_exceeded");
        for (int32_t id : inputs[i])
          if (id >= n_vocab)
            throw ApiError(400, "'" + field + "' holds a token id outside the vocabulary", "input",
                           "invalid_value");
      }
      // One input after another, each a job in the queue like any request.
      std::vector<std::vector<float>> vecs;
      int64_t n_prompt = 0;
      for (auto& in : inputs) {
        auto job = std::make_shared<Job>(Job::Kind::Embed, std::move(in), GenParams{});
        if (!pool.submit(job)) {
          metrics.requests_rejected++;
          throw queue_full(pool);
        }
        std::string unused;
        const JobResult r_ = job->wait(&unused);
        if (r_.finish == Finish::Cancelled)
          throw ApiError(503, "the server is shutting down", "", "shutting_down");
        if (r_.finish == Finish::Error) throw ApiError(500, r_.error);
        vecs.push_back(r_.embedding);
        n_prompt += r_.n_prompt;
      }
      send_json(res, embeddings_json(model_id, vecs, n_prompt, r.base64));
    });
  };
  for (const char* prefix : {"/v1", ""}) {
    http.Post(std::string(prefix) + "/chat/completions", chat);
    http.Post(std::string(prefix) + "/completions", complete);
    http.Post(std::string(prefix) + "/embeddings", embed);
  }
}

}  // namespace tilellm::serve
