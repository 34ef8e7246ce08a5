#include "model/model.h"

#include "base/error.h"

namespace tilellm {

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& opts) {
  auto m = std::make_unique<Model>();
  m->file_ = GgufFile::open(path);
  m->config_ = ModelConfig::from_gguf(*m->file_);
  m->weights_ = ModelWeights::bind(*m->file_, m->config_);
  m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
  if (m->tokenizer_->n_vocab() != m->config_.n_vocab) {
    fail("{}: the tokenizer has {} tokens but the model's vocabulary is {}", path, m->tokenizer_->n_vocab(),
         m->config_.n_vocab);
  }
  for (const GgufTensor& t : m->file_->tensors()) {
    m->weight_bytes_ += t.nbytes;
    m->n_params_ += t.nelements();
  }
  // Page the weights in once now (reading one byte per page), so the first
  // token is not slowed by page faults and a long load shows its progress.
  const size_t total = m->weight_bytes_;
  size_t done = 0, last_report = 0;
  volatile uint8_t sink = 0;
  for (const GgufTensor& t : m->file_->tensors()) {
    for (size_t off = 0; off < t.nbytes; off += 4096) sink = sink + t.data[off];
    done += t.nbytes;
    if (opts.progress && (done - last_report > total / 100 || done == total)) {
      opts.progress(done, total);
      last_report = done;
    }
  }
  return m;
}

}  // namespace tilellm
