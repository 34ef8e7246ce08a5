// HttpServer's insides, shared by the files that register its routes (server.cpp: setup, auth, errors and
// the small endpoints; routes_generate.cpp: completions, chat and embeddings).
#pragma once

#include <httplib.h>

#include <atomic>
#include <string>

#include "api_request.h"
#include "base/error.h"
#include "server.h"

namespace tilellm::serve {

struct HttpServer::Impl {
  const Model& model;
  const ChatTemplate& tmpl;
  SlotPool& pool;
  Metrics& metrics;
  ServeOptions opts;
  std::string model_id;
  int64_t created = 0;  // the server's start, as the models' "created"
  std::atomic<uint64_t> next_id{1};
  httplib::Server http;
  // The listening socket: the last one the socket-options hook saw while bind() ran (a host name may give
  // several addresses, tried in turn).
  int listen_fd = -1;
  bool binding = false;

  Impl(const Model& m, const ChatTemplate& t, SlotPool& p, Metrics& mt, const ServeOptions& o);
  void add_routes();
  void add_generate_routes();

  // 404 when a request names another model (an empty name is this one).
  void check_model(const std::string& name) const;
  // Sends an error object with its status.
  void send_error(httplib::Response& res, const ApiError& e) const;
  void send_json(httplib::Response& res, const nlohmann::json& j, int status = 200) const;
  // Runs a handler, turning ApiError and tilellm::Error into error replies (400 for the latter: they come
  // from checking the request, e.g. the sampler's parameters or a token id).
  template <class F>
  void guarded(httplib::Response& res, F&& f) const {
    try {
      f();
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, ApiError(400, e.what()));
    }
  }
};

}  // namespace tilellm::serve
