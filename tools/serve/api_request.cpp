#include "api_request.h"

#include <cmath>
#include <limits>
#include <random>

namespace tilellm::serve {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  throw ApiError(400, "'" + field + "' " + what, field, "invalid_value");
}

const json* find(const json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const json& j, const char* name) {
  const json* v = find(j, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(name, "must be a number, got " + std::string(v->type_name()));
  const double d = v->get<double>();
  if (!std::isfinite(d)) bad(name, "must be finite");
  return d;
}

std::optional<int64_t> integer(const json& j, const char* name) {
  const json* v = find(j, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad(name, "must be an integer, got " + std::string(v->type_name()));
  return v->get<int64_t>();
}

std::optional<bool> boolean(const json& j, const char* name) {
  const json* v = find(j, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(name, "must be a boolean, got " + std::string(v->type_name()));
  return v->get<bool>();
}

std::optional<std::string> string(const json& j, const char* name) {
  const json* v = find(j, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad(name, "must be a string, got " + std::string(v->type_name()));
  return v->get<std::string>();
}

void in_range(const char* name, double v, double lo, double hi) {
  if (v < lo || v > hi)
    bad(name, "must lie in [" + json(lo).dump() + ", " + json(hi).dump() + "], got " + json(v).dump());
}

GenRequest parse_gen(const json& j) {
  GenRequest r;
  r.model = string(j, "model").value_or("");
  r.stream = boolean(j, "stream").value_or(false);
  if (const json* so = find(j, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "must be an object");
    r.include_usage = boolean(*so, "include_usage").value_or(false);
  }
  if (auto n = integer(j, "n"); n && *n != 1) bad("n", "must be 1 (one choice per request)");
  SamplerParams& s = r.params.sampler;
  if (auto v = number(j, "temperature")) in_range("temperature", *v, 0, 100), s.temperature = float(*v);
  if (auto v = number(j, "top_p")) in_range("top_p", *v, 1e-9, 1), s.top_p = float(*v);
  if (auto v = number(j, "min_p")) in_range("min_p", *v, 0, 1), s.min_p = float(*v);
  if (auto v = integer(j, "top_k")) in_range("top_k", double(*v), 0, 1e9), s.top_k = int(*v);
  if (auto v = number(j, "repeat_penalty"))
    in_range("repeat_penalty", *v, 1e-6, 100), s.repeat_penalty = float(*v);
  if (auto v = integer(j, "repeat_last_n"))
    in_range("repeat_last_n", double(*v), 0, 1e6), s.repeat_last_n = int(*v);
  if (auto v = number(j, "presence_penalty"))
    in_range("presence_penalty", *v, -2, 2), r.params.presence_penalty = float(*v);
  if (auto v = number(j, "frequency_penalty"))
    in_range("frequency_penalty", *v, -2, 2), r.params.frequency_penalty = float(*v);
  if (auto v = integer(j, "seed")) {
    s.seed = uint64_t(*v);
    r.seed_given = true;
  } else {
    s.seed = std::random_device{}() | uint64_t(std::random_device{}()) << 32;
  }
  for (const char* name : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    if (auto v = integer(j, name)) {
      if (*v < 1) bad(name, "must be at least 1, got " + std::to_string(*v));
      r.params.max_tokens = *v;
    }
  }
  if (const json* st = find(j, "stop")) {
    std::vector<std::string> stops;
    if (st->is_string()) {
      stops.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      for (const json& e : *st) {
        if (!e.is_string()) bad("stop", "must be a string or an array of strings");
        stops.push_back(e.get<std::string>());
      }
    } else {
      bad("stop", "must be a string or an array of strings, got " + std::string(st->type_name()));
    }
    if (stops.size() > 16) bad("stop", "holds at most 16 strings");
    for (const std::string& x : stops)
      if (!x.empty()) r.params.stop.push_back(x);
  }
  r.params.ignore_eos = boolean(j, "ignore_eos").value_or(false);
  return r;
}

// OpenAI's content: a string, or an array of parts of which the "text" ones are read.
std::string content_text(const json& c, size_t i) {
  const std::string field = "messages[" + std::to_string(i) + "].content";
  if (c.is_null()) return {};
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad(field, "must be a string or an array of content parts");
  std::string out;
  for (const json& part : c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad(field, "parts must be {\"type\": \"text\", \"text\": string} (only text is understood)");
    out += part["text"].get<std::string>();
  }
  return out;
}

}  // namespace

json parse_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what(), "", "invalid_json");
  }
  if (!j.is_object()) throw ApiError(400, "the body must be a JSON object", "", "invalid_json");
  return j;
}

ChatRequest parse_chat(const json& j) {
  ChatRequest r;
  static_cast<GenRequest&>(r) = parse_gen(j);
  const json* m = find(j, "messages");
  if (!m) bad("messages", "is required");
  if (!m->is_array() || m->empty()) bad("messages", "must be a non-empty array");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& e = (*m)[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!e.is_object()) bad(field, "must be an object");
    const std::string role = string(e, "role").value_or("");
    if (role != "system" && role != "user" && role != "assistant" && role != "developer")
      bad(field + ".role", "must be system, developer, user or assistant, got '" + role + "'");
    r.messages.push_back(
        {role == "developer" ? "system" : role, content_text(e.value("content", json()), i)});
  }
  return r;
}

CompletionRequest parse_completion(const json& j) {
  CompletionRequest r;
  static_cast<GenRequest&>(r) = parse_gen(j);
  const json* p = find(j, "prompt");
  if (!p) bad("prompt", "is required");
  // Token ids as llama-server takes them: [id, ...] or [[id, ...]] (one prompt a request).
  auto ids = [&](const json& a) {
    if (a.empty()) bad("prompt", "holds an empty token array");
    for (const json& t : a) {
      if (!t.is_number_integer()) bad("prompt", "token arrays must hold integers");
      const int64_t x = t.get<int64_t>();
      if (x < 0 || x > std::numeric_limits<int32_t>::max()) bad("prompt", "holds a token id out of range");
      r.prompt_ids.push_back(int32_t(x));
    }
  };
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    ids(*p);
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_array()) {
    ids((*p)[0]);
  } else {
    bad("prompt", "must be a string, an array of one string, or token ids ([id, ...] or [[id, ...]])");
  }
  return r;
}

EmbeddingRequest parse_embedding(const json& j) {
  EmbeddingRequest r;
  r.model = string(j, "model").value_or("");
  const std::string fmt = string(j, "encoding_format").value_or("float");
  if (fmt != "float" && fmt != "base64") bad("encoding_format", "must be float or base64, got '" + fmt + "'");
  r.base64 = fmt == "base64";
  const json* in = find(j, "input");
  if (!in) bad("input", "is required");
  auto ids = [&](const json& a) {
    std::vector<int32_t> v;
    for (const json& t : a) {
      if (!t.is_number_integer()) bad("input", "token arrays must hold integers");
      const int64_t x = t.get<int64_t>();
      if (x < 0 || x > std::numeric_limits<int32_t>::max()) bad("input", "holds a token id out of range");
      v.push_back(int32_t(x));
    }
    return v;
  };
  if (in->is_string()) {
    r.texts.push_back(in->get<std::string>());
  } else if (in->is_array() && !in->empty() && (*in)[0].is_number_integer()) {
    r.token_inputs.push_back(ids(*in));
  } else if (in->is_array() && !in->empty()) {
    for (const json& e : *in) {
      if (e.is_string()) {
        if (!r.token_inputs.empty()) bad("input", "mixes strings and token arrays");
        r.texts.push_back(e.get<std::string>());
      } else if (e.is_array()) {
        if (!r.texts.empty()) bad("input", "mixes strings and token arrays");
        r.token_inputs.push_back(ids(e));
      } else {
        bad("input", "must be a string, an array of strings, or token arrays");
      }
    }
  } else {
    bad("input", "must be a string, an array of strings, or token arrays (non-empty)");
  }
  if (r.texts.size() + r.token_inputs.size() > 256) bad("input", "holds at most 256 inputs");
  return r;
}

TokenizeRequest parse_tokenize(const json& j) {
  TokenizeRequest r;
  auto c = string(j, "content");
  if (!c) bad("content", "is required");
  r.content = *c;
  r.add_special = boolean(j, "add_special").value_or(false);
  r.with_pieces = boolean(j, "with_pieces").value_or(false);
  return r;
}

std::vector<int32_t> parse_detokenize(const json& j) {
  const json* t = find(j, "tokens");
  if (!t) bad("tokens", "is required");
  if (!t->is_array()) bad("tokens", "must be an array of integers");
  std::vector<int32_t> ids;
  for (const json& e : *t) {
    if (!e.is_number_integer()) bad("tokens", "must be an array of integers");
    const int64_t x = e.get<int64_t>();
    if (x < 0 || x > std::numeric_limits<int32_t>::max()) bad("tokens", "holds an id out of range");
    ids.push_back(int32_t(x));
  }
  return ids;
}

}  // namespace tilellm::serve
