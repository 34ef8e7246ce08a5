// A loaded model: the mapped GGUF file, its hyper-parameters, its bound weights and its tokenizer.
// Immutable after load, so any number of sessions can share it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "format/gguf.h"
#include "model/config.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace tilellm {

struct LoadOptions {
  // Called with (bytes done, bytes total) while the weights are paged in; empty: no progress reporting.
  std::function<void(size_t, size_t)> progress;
};

class Model {
 public:
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& opts = {});

  const GgufFile& file() const { return *file_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  size_t weight_bytes() const { return weight_bytes_; }
  int64_t n_params() const { return n_params_; }

 private:
  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  size_t weight_bytes_ = 0;
  int64_t n_params_ = 0;
};

}  // namespace tilellm
