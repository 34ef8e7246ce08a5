// Options and helpers shared by the tilellm subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "backend_args.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace tilellm::cli {

struct ModelArgs {
  BackendArgs backend;  // --backend, --device, --device-profile
  std::string model;    // empty: the default model
  int threads = 0;      // 0: all hardware threads
  int64_t ctx = 0;      // 0: model's training context capped at 4096
  int64_t batch = 64;   // prompt tokens per forward pass
  std::string kv_type = "f16";
  std::string cpu_mask;            // hex, like llama.cpp's -C; empty: no pinning
  std::string activations = "q8";  // q8: quantized like llama.cpp (fast); f32: the exact float path
  std::string weights = "native";  // --weights: backends/cpu/tiled_weight.h
};

void add_model_args(CLI::App* app, ModelArgs& a);
void add_sampler_args(CLI::App* app, SamplerParams& p);

// Resolves the model path (the default model when none is given), loads it with a progress bar on a terminal,
// and prints a one-line description to stderr.
std::unique_ptr<Model> load_model(const ModelArgs& a);
SessionOptions session_options(const ModelArgs& a);

// Parses "1,2,3" into token ids.
std::vector<int32_t> parse_ids(const std::string& s);

}  // namespace tilellm::cli
