// Response bodies in OpenAI's shapes (and llama-server's for /tokenize, /detokenize): whole replies, the
// chunks of a stream, usage, errors, the model list and embeddings.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "job.h"

namespace tilellm::serve {

// What every reply of one request names: its id ("chatcmpl-N" / "cmpl-N"), the model, the creation time.
struct ReplyHead {
  std::string id;
  std::string model;
  int64_t created = 0;
  bool chat = true;  // chat.completion(.chunk) or text_completion
};

nlohmann::json usage_json(const JobResult& r);
// A whole reply: the text, its finish reason and usage, and llama-server's "timings".
nlohmann::json reply_json(const ReplyHead& h, const std::string& text, const JobResult& r);
// One stream chunk: the first one of a chat carries the role; `finish` set on the last one (then text empty).
nlohmann::json chunk_json(const ReplyHead& h, const std::string& text, bool first, const JobResult* finish);
// The chunk after the last one when stream_options.include_usage asks for it: no choices, the usage.
nlohmann::json usage_chunk_json(const ReplyHead& h, const JobResult& r);
// {"error": {...}} with OpenAI's type for the status.
nlohmann::json error_json(int status, const std::string& message, const std::string& param = {},
                          const std::string& code = {});
// Embeddings: float arrays, or base64 of little-endian float32 (encoding_format "base64").
nlohmann::json embeddings_json(const std::string& model, const std::vector<std::vector<float>>& vecs,
                               int64_t n_prompt, bool base64);
std::string base64_encode(const void* data, size_t n);

}  // namespace tilellm::serve
