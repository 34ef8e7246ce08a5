// Several sequences over one loaded model, run together (continuous batching): one backend with its
// prepared weights, one thread pool, one activation scratch, and n_seq FB-KV caches of n_ctx cells each —
// everything allocated in the constructor; eval() allocates nothing. One eval() is one forward pass over the
// tokens of any subset of the sequences (model/forward.h forward_spans): the matmuls see all their rows at
// once, attention runs per sequence on its own cache.
//
// The host backend, whose cache ops work on whichever host cache they are handed, and the device backends
// that hold one cache per sequence in their own memory (BackendEntry::multi_seq; each host KvCache here
// names its sequence, KvCache::seq(), and holds no storage unless the backend's cache ops fell back to the
// host).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/kv_cache.h"
#include "base/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"
#include "runtime/session.h"

namespace tilellm {

class BatchSession {
 public:
  // opts as for a Session (n_ctx per sequence; n_batch at least n_seq, raised to it otherwise). Throws
  // tilellm::Error for a backend with one cache only or when the caches do not fit in memory.
  BatchSession(const Model& model, const SessionOptions& opts, int n_seq);

  // One sequence's tokens in a pass: `n` tokens appended at positions tokens(seq).size().. of sequence `seq`.
  struct Entry {
    int seq;
    const int32_t* tokens;
    int64_t n;
  };
  // One forward pass over the entries (distinct sequences, n >= 1 each, at most n_batch() tokens in all).
  // Throws tilellm::Error, leaving every sequence unchanged, when an entry does not fit in its context or a
  // token is outside the vocabulary.
  void eval(const Entry* entries, int n_entries);
  // Logits [n_vocab] of the last token of entry i of the last eval().
  const float* logits(int i) const;
  // Entry i's rows of the last eval()'s final residual stream, before the output norm: [n][n_embd]. On the
  // host backend only (throws tilellm::Error on a device backend).
  const float* hidden_states(int i, int64_t* n) const;

  int n_seq() const { return int(kv_.size()); }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_batch() const { return scratch_.n_batch; }
  const std::vector<int32_t>& tokens(int seq) const { return tokens_[size_t(seq)]; }
  // Forgets sequence seq's tokens from position n on.
  void truncate(int seq, int64_t n);
  size_t kv_bytes() const;
  const Model& model() const { return model_; }
  int n_threads() const { return pool_.size(); }

 private:
  const Model& model_;
  SessionOptions opts_;
  int64_t n_ctx_;
  ThreadPool pool_;
  std::vector<KvCache> kv_;  // [n_seq] each [layer][K,V][n_ctx][kv_dim] (backends/kv_cache.h), seq() = index
  RopeTable rope_global_;
  RopeTable rope_local_;
  ForwardScratch scratch_;
  AlignedBuffer logits_;  // [n_seq][n_vocab]: one row per entry of the last eval()
  std::unique_ptr<Backend> backend_;
  std::vector<std::vector<int32_t>> tokens_;  // [n_seq][n_past of each]; capacity n_ctx, reserved up front
  std::vector<SeqSpan> spans_;                // [n_seq] the last eval()'s spans
  std::vector<int32_t> batch_;                // [n_batch] the last eval()'s tokens, sequence after sequence
  std::vector<uint8_t> seen_;                 // [n_seq] eval()'s check that no sequence comes twice
  int n_spans_ = 0;
};

}  // namespace tilellm
