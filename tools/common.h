// Options and helpers shared by the tilellm subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "backend_args.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/chat_template.h"

namespace tilellm::cli {

struct ModelArgs {
  BackendArgs backend;  // --backend, --device, --device-profile
  std::string model;    // empty: the default model
  int threads = 0;      // 0: the CPUs this process may use (ThreadPool::default_threads)
  int64_t ctx = 0;      // 0: model's training context capped at 4096
  int64_t batch = 0;    // prompt tokens per forward pass; 0: the backend's (BackendEntry::prompt_batch)
  std::string kv_type = "f16";
  std::string cpu_mask;            // hex, like llama.cpp's -C; empty: no pinning
  std::string activations = "q8";  // q8: quantized like llama.cpp (fast); f32: the exact float path
  std::string weights = "native";  // --weights: backends/cpu/tiled_weight.h
  std::string kv_k, kv_v;          // llama.cpp's -ctk / -ctv (one type for both here); empty: not given
  std::vector<std::string> notes;  // what llama.cpp options that change nothing here say (printed on load)
};

void add_model_args(CLI::App* app, ModelArgs& a);
// A validator for an integer option: at least lo, said in one line ("must be at least 1, got 0").
CLI::Validator at_least(long long lo);
// The sampling options. seed_given stays false unless -s names a seed (-s -1 or none: a random seed, which
// pick_seed then draws and prints, as llama.cpp does).
struct SamplingArgs {
  SamplerParams params;
  bool seed_given = false;
};
void add_sampler_args(CLI::App* app, SamplingArgs& s);
// The sampler parameters with the seed fixed: the given one, or a random one printed to stderr.
SamplerParams pick_seed(const SamplingArgs& s);

// `tilellm chat`'s arguments, also what `run --conversation` (llama.cpp's -cnv) hands over.
struct ChatArgs {
  ModelArgs model;
  SamplingArgs sampling;
  std::string system;
  int64_t n_predict = -1;
  std::string chat_template;  // --chat-template NAME; empty: the model's
};
void run_chat(const ChatArgs& a);

// The model's chat template, or the built-in format `name` (--chat-template); a model without a template
// is warned about, naming the format used instead.
ChatTemplate chat_template_for(const Model& model, const std::string& name);
// The conversation through the template with the generation prompt; a fallback to the built-in format is
// reported on stderr.
std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs);

// Resolves the model path (the default model when none is given), loads it with a progress bar on a terminal,
// and prints a one-line description to stderr.
std::unique_ptr<Model> load_model(const ModelArgs& a);
SessionOptions session_options(const ModelArgs& a);

// Parses "1,2,3" into token ids.
std::vector<int32_t> parse_ids(const std::string& s);

}  // namespace tilellm::cli
