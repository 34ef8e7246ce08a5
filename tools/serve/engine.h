// What the slots run on: n_seq sequences over one model, each with the tokens in its cache; one step
// evaluates a run of tokens for any subset of them and hands back each one's last logits.
//
// Two ways, chosen by the backend: on the host backend and on a device backend that holds a KV cache per
// sequence (BackendEntry::multi_seq: OpenCL, Vulkan, CUDA) all the step's tokens go through one forward pass
// (runtime/batch_session.h: the matmuls see every slot's rows at once, so aggregate throughput grows with
// the slots); on a backend with a single cache each slot is a Session of its own (its own backend and
// weights) and the step evaluates them one after another.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/batch_session.h"
#include "runtime/session.h"

namespace tilellm::serve {

class Engine {
 public:
  using Entry = BatchSession::Entry;
  virtual ~Engine() = default;
  virtual int n_seq() const = 0;
  virtual int64_t n_ctx() const = 0;
  // Tokens one step may evaluate in all, and for one sequence.
  virtual int64_t step_budget() const = 0;
  virtual int64_t entry_budget() const = 0;
  virtual const std::vector<int32_t>& tokens(int seq) const = 0;
  virtual void truncate(int seq, int64_t n) = 0;
  // One step over the entries (distinct sequences). Throws tilellm::Error.
  virtual void eval(const Entry* entries, int n) = 0;
  // Of entry i of the last eval(): its last token's logits [n_vocab], its rows of the final residual stream
  // (before the output norm) [n][n_embd].
  virtual const float* logits(int i) const = 0;
  virtual const float* hidden_states(int i, int64_t* n) const = 0;
  // The slots' KV caches in all, wherever they are held (on_host(): host memory; else the device's).
  virtual size_t kv_bytes() const = 0;
  // Whether a step is one forward pass (true) or one per sequence.
  virtual bool batched() const = 0;
  // Whether the model runs on the host backend (hidden states, and so embeddings, are read there only).
  virtual bool on_host() const = 0;
};

// n_seq sequences of opts.n_ctx tokens each: batched where the backend allows, a Session each otherwise.
std::unique_ptr<Engine> make_engine(const Model& model, const SessionOptions& opts, int n_seq);

}  // namespace tilellm::serve
