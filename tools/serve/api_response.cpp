#include "api_response.h"

#include <cstring>

namespace tilellm::serve {

using json = nlohmann::json;

json usage_json(const JobResult& r) {
  return {{"prompt_tokens", r.n_prompt},
          {"completion_tokens", r.n_gen},
          {"total_tokens", r.n_prompt + r.n_gen},
          {"prompt_tokens_details", {{"cached_tokens", r.n_cached}}}};
}

namespace {

json timings_json(const JobResult& r) {
  const int64_t evaluated = r.n_prompt - r.n_cached;
  return {{"prompt_n", evaluated},
          {"prompt_ms", r.prompt_ms},
          {"prompt_per_second", r.prompt_ms > 0 ? 1000.0 * double(evaluated) / r.prompt_ms : 0.0},
          {"predicted_n", r.n_gen},
          {"predicted_ms", r.gen_ms},
          {"predicted_per_second", r.gen_ms > 0 ? 1000.0 * double(r.n_gen) / r.gen_ms : 0.0},
          {"cache_n", r.n_cached}};
}

json head_json(const ReplyHead& h, bool chunk) {
  const char* object = h.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", h.id},
          {"object", object},
          {"created", h.created},
          {"model", h.model},
          {"system_fingerprint", "tilellm"}};
}

json finish_value(const JobResult* r) {
  return r ? json(finish_reason(r->finish)) : json(nullptr);
}

}  // namespace

json reply_json(const ReplyHead& h, const std::string& text, const JobResult& r) {
  json j = head_json(h, false);
  json choice = {{"index", 0}, {"finish_reason", finish_reason(r.finish)}, {"logprobs", nullptr}};
  if (h.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(r);
  j["timings"] = timings_json(r);
  return j;
}

json chunk_json(const ReplyHead& h, const std::string& text, bool first, const JobResult* finish) {
  json j = head_json(h, true);
  json choice = {{"index", 0}, {"finish_reason", finish_value(finish)}, {"logprobs", nullptr}};
  if (h.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!finish) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  if (finish) j["timings"] = timings_json(*finish);
  return j;
}

json usage_chunk_json(const ReplyHead& h, const JobResult& r) {
  json j = head_json(h, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(r);
  return j;
}

json error_json(int status, const std::string& message, const std::string& param, const std::string& code) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 503 ? "unavailable_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

std::string base64_encode(const void* data, size_t n) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v =
        uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out += abc[v >> 18 & 63];
    out += abc[v >> 12 & 63];
    out += i + 1 < n ? abc[v >> 6 & 63] : '=';
    out += i + 2 < n ? abc[v & 63] : '=';
  }
  return out;
}

json embeddings_json(const std::string& model, const std::vector<std::vector<float>>& vecs, int64_t n_prompt,
                     bool base64) {
  json data = json::array();
  for (size_t i = 0; i < vecs.size(); ++i) {
    // base64 holds the floats' bytes as they are in memory: little-endian on every platform this builds for.
    json e = base64 ? json(base64_encode(vecs[i].data(), vecs[i].size() * sizeof(float))) : json(vecs[i]);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", e}});
  }
  return {{"object", "list"},
          {"data", data},
          {"model", model},
          {"usage", {{"prompt_tokens", n_prompt}, {"total_tokens", n_prompt}}}};
}

}  // namespace tilellm::serve
