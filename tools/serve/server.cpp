#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "api_response.h"
#include "chat_page.h"
#include "server_impl.h"

namespace tilellm::serve {

using json = nlohmann::json;

bool same_secret(const std::string& given, const std::string& expected) {
  // Every byte of the longer string is looked at, whatever differs first.
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  const size_t n = std::max(given.size(), expected.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    diff |= a ^ b;
  }
  return diff == 0;
}

HttpServer::Impl::Impl(const Model& m, const ChatTemplate& t, SlotPool& p, Metrics& mt, const ServeOptions& o)
    : model(m), tmpl(t), pool(p), metrics(mt), opts(o) {
  model_id = opts.alias.empty() ? std::filesystem::path(model.file().path()).filename().string() : opts.alias;
  created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
}

void HttpServer::Impl::check_model(const std::string& name) const {
  if (!name.empty() && name != model_id)
    throw ApiError(404, "the model '" + name + "' does not exist; this server serves '" + model_id + "'",
                   "model", "model_not_found");
}

void HttpServer::Impl::send_json(httplib::Response& res, const json& j, int status) const {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void HttpServer::Impl::send_error(httplib::Response& res, const ApiError& e) const {
  if (e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, error_json(e.status, e.what(), e.param, e.code), e.status);
}

void HttpServer::Impl::add_routes() {
  // Every request: CORS headers when asked for, then the API key (all but the health check and the static
  // page, which holds no data and asks for the key itself).
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!opts.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", opts.cors_origin);
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      if (req.method == "OPTIONS") {
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (opts.api_key.empty() || req.path == "/health" || req.path == "/") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    const bool ok =
        auth.compare(0, prefix.size(), prefix) == 0 && same_secret(auth.substr(prefix.size()), opts.api_key);
    if (ok) return httplib::Server::HandlerResponse::Unhandled;
    send_error(
        res,
        ApiError(401, auth.empty() ? "no API key given (Authorization: Bearer KEY)" : "the API key is wrong",
                 "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Replies httplib makes itself (unknown path 404, body too big 413, unreadable request 400) get an error
  // object too.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = "request failed";
    if (res.status == 404) msg = "no endpoint " + req.method + " " + req.path;
    if (res.status == 413)
      msg = "the request body exceeds the limit of " + std::to_string(opts.max_body) + " bytes (--max-body)";
    if (res.status == 400) msg = "the request could not be read";
    send_json(res, error_json(res.status, msg), res.status);
  });
  http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    send_json(res, error_json(500, msg), 500);
  });
  http.set_logger([this](const httplib::Request&, const httplib::Response& res) {
    metrics.requests++;
    if (res.status >= 400) metrics.requests_errors++;
  });

  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(chat_page_html(), "text/html; charset=utf-8");
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const PoolGauges g = pool.gauges();
    send_json(
        res,
        {{"status", "ok"}, {"slots_idle", g.slots_total - g.slots_busy}, {"slots_processing", g.slots_busy}});
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.prometheus(pool.gauges()), "text/plain; version=0.0.4");
  });
  // The decode thread's steps after ?after=ID (0: all it holds), at most 65536 a reply, for `tilellm monitor
  // --serve`: [id, start s, ms, tokens evaluated, tokens generated] each, the server's clock now, the id to
  // ask after next, and how many steps were overwritten before this read.
  http.Get("/metrics/steps", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      uint64_t after = 0;
      if (req.has_param("after")) {
        const std::string v = req.get_param_value("after");
        char* end = nullptr;
        errno = 0;
        after = std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || errno != 0 || v[0] == '-')
          throw ApiError(400, "after: '" + v + "' is not a step id (a non-negative integer)", "after");
      }
      uint64_t missed = 0;
      const double now = metrics.steps.now();
      const std::vector<StepRecord> steps = metrics.steps.since(after, size_t(1) << 16, &missed);
      json rows = json::array();
      for (const StepRecord& r : steps) rows.push_back({r.id, r.t_s, r.ms, r.n_tok, r.n_gen});
      send_json(res, {{"now_s", now},
                      {"next_after", steps.empty() ? metrics.steps.last_id() : steps.back().id},
                      {"missed", missed},
                      {"steps", rows}});
    });
  });
  auto model_json = [this] {
    const ModelConfig& c = model.config();
    return json{{"id", model_id},
                {"object", "model"},
                {"created", created},
                {"owned_by", "tilellm"},
                {"meta",
                 {{"n_ctx_slot", pool.n_ctx()},
                  {"n_ctx_train", c.n_ctx_train},
                  {"n_vocab", c.n_vocab},
                  {"n_embd", c.n_embd},
                  {"n_params", model.n_params()},
                  {"arch", c.arch_name}}}};
  };
  for (const char* path : {"/v1/models", "/models"}) {
    http.Get(path, [this, model_json](const httplib::Request&, httplib::Response& res) {
      send_json(res, {{"object", "list"}, {"data", json::array({model_json()})}});
    });
  }
  http.Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      check_model(req.matches[1]);
      send_json(res, model_json());
    });
  });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const TokenizeRequest r = parse_tokenize(parse_body(req.body));
      const Tokenizer& tok = model.tokenizer();
      const std::vector<int32_t> ids = tok.encode(r.content, r.add_special, true);
      json tokens = json::array();
      for (int32_t id : ids) {
        if (r.with_pieces) {
          tokens.push_back({{"id", id}, {"piece", tok.token_to_piece(id, true)}});
        } else {
          tokens.push_back(id);
        }
      }
      send_json(res, {{"tokens", tokens}});
    });
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const std::vector<int32_t> ids = parse_detokenize(parse_body(req.body));
      const int32_t n_vocab = model.tokenizer().n_vocab();
      for (int32_t id : ids)
        if (id >= n_vocab)
          throw ApiError(400,
                         "'tokens' holds " + std::to_string(id) + ", outside the vocabulary of " +
                             std::to_string(n_vocab),
                         "tokens", "invalid_value");
      send_json(res, {{"content", model.tokenizer().decode(ids)}});
    });
  });
  add_generate_routes();
}

HttpServer::HttpServer(const Model& model, const ChatTemplate& tmpl, SlotPool& pool, Metrics& metrics,
                       const ServeOptions& opts)
    : impl_(std::make_unique<Impl>(model, tmpl, pool, metrics, opts)) {
  Impl& s = *impl_;
  const size_t threads =
      opts.http_threads > 0 ? size_t(opts.http_threads) : size_t(opts.parallel + opts.max_queue + 8);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_payload_max_length(opts.max_body);
  // cpp-httplib gives a connection's first request the keep-alive wait too (2 s, short so that SIGTERM does
  // not wait on idle connections): a client held up between connect and send (a loaded machine) would have
  // its connection closed unanswered. With TCP_DEFER_ACCEPT the kernel hands a connection over only once its
  // request has arrived (or after 30 s without one), so that wait starts with the request in hand.
  s.http.set_socket_options([&s](socket_t sock) {
    httplib::default_socket_options(sock);
    const int defer_s = 30;
    setsockopt(sock, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_s, sizeof(defer_s));
    if (s.binding) s.listen_fd = int(sock);
  });
  s.http.set_keep_alive_timeout(2);
  s.add_routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  Impl& s = *impl_;
  int port = s.opts.port;
  s.binding = true;
  if (port == 0) {
    port = s.http.bind_to_any_port(s.opts.host);
    if (port < 0) fail("cannot listen on {}: no port could be bound", s.opts.host);
  } else if (!s.http.bind_to_port(s.opts.host, port)) {
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", s.opts.host, port);
  }
  s.binding = false;
  // cpp-httplib listens with a backlog of 5: connections beyond it wait unaccepted, and on a loaded machine
  // (32 clients reconnecting after 503s, the accept loop held up) some were reset (serve_load under CI's
  // load: 2 of 40). Listening again on the bound socket raises the backlog to the system's.
  if (s.listen_fd >= 0) ::listen(s.listen_fd, SOMAXCONN);
  return port;
}

void HttpServer::listen() {
  impl_->http.listen_after_bind();
}

void HttpServer::stop() {
  impl_->http.stop();
}

}  // namespace tilellm::serve
