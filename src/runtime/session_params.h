// What a session (runtime/session.h) and a batch of sessions (runtime/batch_session.h) ask of the machine
// and of a backend before they allocate anything: the context size, checked against the host memory it
// takes, and the backend's parameters for a forward pass of a given width.
#pragma once

#include <cstdint>

#include "backends/kv_cache.h"
#include "backends/registry.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "runtime/session.h"

namespace tilellm {

// The context's size (o.n_ctx, or the model's training context capped at 4096), refused before anything is
// allocated when the host memory it takes for n_seq sequences (their KV caches when the host holds them, the
// RoPE tables, the logits of every position when asked for) is more than the machine has available.
int64_t session_context_size(const Model& m, const SessionOptions& o, int n_seq = 1);

// backend_params(o), and the sizes of one forward pass over n_batch tokens (the widest op input, the largest
// output including n_logits rows of logits — every token's with o.logits_all —, the longest norm vector or
// RoPE row), the KV cache's geometry (the caller adds the activation arrays a device backend may keep in its
// memory).
BackendParams session_backend_params(const Model& m, const SessionOptions& o, ThreadPool& pool,
                                     const KvCache& kv, int64_t n_batch, int64_t n_logits = 1);

}  // namespace tilellm
