// Request bodies of the OpenAI-style endpoints, parsed and checked: every field's type and range is checked
// here, and a bad one is an ApiError (HTTP 400) naming the field, so that nothing malformed reaches a slot.
//
// Sampling fields and their defaults (llama-server's, which are the engine's sampler defaults: sampler.h):
//   temperature 0.8, top_p 0.95, top_k 40, min_p 0.05, repeat_penalty 1 (off), repeat_last_n 64,
//   presence_penalty 0, frequency_penalty 0 (OpenAI's, applied to the tokens generated so far), seed random,
//   max_tokens (alias max_completion_tokens, n_predict) until the end of generation or the context.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "job.h"
#include "tokenizer/chat_template.h"

namespace tilellm::serve {

// An error answered as OpenAI does: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {})
      : std::runtime_error(message), status(status), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string param, code;
};

// The body as JSON (an object); 400 when it does not parse or is not an object.
nlohmann::json parse_body(const std::string& body);

// What chat and text completions share.
struct GenRequest {
  std::string model;  // empty: not given
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  GenParams params;            // params.max_tokens 0: not given
  bool seed_given = false;
};

struct ChatRequest : GenRequest {
  std::vector<ChatMessage> messages;
};

struct CompletionRequest : GenRequest {
  std::string prompt;               // a text prompt, tokenized with the model's special tokens
  std::vector<int32_t> prompt_ids;  // or token ids, used as they are (not empty when given)
};

struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> texts;                  // string inputs
  std::vector<std::vector<int32_t>> token_inputs;  // token-id inputs (either this or texts)
  bool base64 = false;                             // encoding_format "base64": little-endian float32, base64
};

ChatRequest parse_chat(const nlohmann::json& j);
CompletionRequest parse_completion(const nlohmann::json& j);
EmbeddingRequest parse_embedding(const nlohmann::json& j);

// /tokenize {"content": string, "add_special": bool} and /detokenize {"tokens": [int]}.
struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool with_pieces = false;
};
TokenizeRequest parse_tokenize(const nlohmann::json& j);
std::vector<int32_t> parse_detokenize(const nlohmann::json& j);

}  // namespace tilellm::serve
