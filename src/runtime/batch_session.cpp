#include "runtime/batch_session.h"

#include <algorithm>

#include "backends/registry.h"
#include "base/error.h"
#include "runtime/session_params.h"

namespace tilellm {
namespace {

const SessionOptions& batchable(const SessionOptions& o, int n_seq) {
  if (n_seq < 1) fail("a batch of sequences needs at least one, got {}", n_seq);
  const BackendEntry& e = require_backend(o.backend);
  if (!e.host && !e.multi_seq) {
    fail(
        "several sequences in one forward pass need a backend that holds a KV cache per sequence; the {} "
        "backend keeps one in its own memory",
        o.backend);
  }
  // Session's hybrid prefill (the host's tiles for prompts, KV rows sent up) is one conversation's; a batch
  // runs every pass on its backend, so a request for it is refused rather than ignored.
  if (o.prefill != PrefillMode::Gpu) {
    fail(
        "--prefill {} moves a single session's prompts to the host (run, chat, bench); a batch of sequences "
        "(serve, batched-bench) runs its prompts on the {} backend: leave --prefill at gpu",
        o.prefill == PrefillMode::Cpu ? "cpu" : "auto", o.backend);
  }
  return o;
}

}  // namespace

BatchSession::BatchSession(const Model& model, const SessionOptions& opts, int n_seq)
    : model_(model),
      opts_(batchable(opts, n_seq)),
      n_ctx_(session_context_size(model, opts, n_seq)),
      pool_(opts.n_threads > 0 ? opts.n_threads : ThreadPool::default_threads(), opts.cpus),
      rope_global_(n_ctx_, model.config().rope_dim, model.config().rope_base, model.config().rope_freq_scale,
                   model.weights().rope_factors(model.config(), n_ctx_), model.config().rope_attn_factor),
      rope_local_(model.config().swa_own_rope
                      ? RopeTable(n_ctx_, model.config().rope_dim, model.config().rope_base_swa,
                                  model.config().rope_freq_scale)
                      : RopeTable()),
      scratch_(model.config(), std::max<int64_t>(std::clamp<int64_t>(opts.n_batch, 1, n_ctx_), n_seq)),
      logits_(size_t(n_seq) * size_t(model.config().n_vocab) * sizeof(float)),
      tokens_(size_t(n_seq)),
      spans_(size_t(n_seq)),
      batch_(size_t(scratch_.n_batch)),
      seen_(size_t(n_seq)) {
  if (opts.n_batch <= 0) fail("batch size must be positive, got {}", opts.n_batch);
  if (opts.logits_all) fail("a batch of sequences keeps the logits of each sequence's last token only");
  const ModelConfig& c = model.config();
  // The host caches hold the sequences on the host backend; on a device backend (which holds a cache per
  // sequence, numbered as these are) only their geometry and number are used, unless its cache ops fell
  // back to the host.
  const BackendEntry& entry = require_backend(opts.backend);
  kv_.reserve(size_t(n_seq));
  for (int i = 0; i < n_seq; ++i) {
    kv_.emplace_back(c.n_layer, n_ctx_, c.n_head_kv, c.head_dim, opts.kv_type, entry.host);
    kv_.back().set_seq(i);
  }
  BackendParams p = session_backend_params(model, opts, pool_, kv_[0], scratch_.n_batch, n_seq);
  p.kv_seqs = n_seq;
  for (AlignedBuffer* a : scratch_.activations()) p.resident.push_back({a->as<void>(), a->size()});
  backend_ = entry.make(p);
  backend_->load_weights(model.weights().weight_set());
  if (backend_->needs_host_kv())
    for (KvCache& kv : kv_) kv.allocate();
  for (auto& t : tokens_) t.reserve(size_t(n_ctx_));
}

void BatchSession::eval(const Entry* entries, int n_entries) {
  if (n_entries <= 0) return;
  if (n_entries > n_seq()) fail("internal: {} entries for {} sequences", n_entries, n_seq());
  const int64_t V = model_.config().n_vocab;
  int64_t total = 0;
  std::fill(seen_.begin(), seen_.end(), uint8_t(0));
  for (int i = 0; i < n_entries; ++i) {
    const Entry& e = entries[i];
    if (e.seq < 0 || e.seq >= n_seq() || seen_[size_t(e.seq)] || e.n <= 0)
      fail("internal: entry {} names sequence {} (of {}) twice, or none, or has no tokens", i, e.seq,
           n_seq());
    seen_[size_t(e.seq)] = true;
    const int64_t past = int64_t(tokens_[size_t(e.seq)].size());
    if (past + e.n > n_ctx_) {
      fail_as(
          ErrorKind::ContextFull,
          "{} tokens do not fit in the context: {} are already in it and the context size is {} (raise it "
          "with -c)",
          e.n, past, n_ctx_);
    }
    for (int64_t t = 0; t < e.n; ++t)
      if (e.tokens[t] < 0 || e.tokens[t] >= V)
        fail("token id {} is outside the vocabulary of {}", e.tokens[t], V);
    total += e.n;
  }
  if (total > scratch_.n_batch) fail("internal: {} tokens in a pass of at most {}", total, scratch_.n_batch);
  int64_t at = 0;
  for (int i = 0; i < n_entries; ++i) {
    const Entry& e = entries[i];
    std::copy(e.tokens, e.tokens + e.n, batch_.begin() + at);
    spans_[size_t(i)] = SeqSpan{&kv_[size_t(e.seq)], int64_t(tokens_[size_t(e.seq)].size()), at, e.n};
    at += e.n;
  }
  const RopeTable& rope_local = model_.config().swa_own_rope ? rope_local_ : rope_global_;
  ForwardContext ctx{model_, *backend_, kv_[0], rope_global_, rope_local, scratch_};
  n_spans_ = 0;  // nothing valid while the pass runs (it may throw)
  forward_spans(ctx, batch_.data(), spans_.data(), n_entries, logits_.as<float>());
  n_spans_ = n_entries;
  for (int i = 0; i < n_entries; ++i) {
    std::vector<int32_t>& t = tokens_[size_t(entries[i].seq)];
    t.insert(t.end(), entries[i].tokens, entries[i].tokens + entries[i].n);  // within the reserved capacity
  }
}

const float* BatchSession::logits(int i) const {
  if (i < 0 || i >= n_spans_) fail("internal: logits of entry {} of a pass of {}", i, n_spans_);
  return logits_.as<float>() + size_t(i) * size_t(model_.config().n_vocab);
}

const float* BatchSession::hidden_states(int i, int64_t* n) const {
  // A device backend keeps the residual stream in its own memory: the host scratch is not current.
  if (!require_backend(opts_.backend).host)
    fail("hidden states are read on the host backend only; this batch runs on {}", opts_.backend);
  if (i < 0 || i >= n_spans_) fail("internal: hidden states of entry {} of a pass of {}", i, n_spans_);
  *n = spans_[size_t(i)].n;
  return scratch_.x.as<float>() + spans_[size_t(i)].begin * model_.config().n_embd;
}

void BatchSession::truncate(int seq, int64_t n) {
  std::vector<int32_t>& t = tokens_[size_t(seq)];
  if (n < int64_t(t.size())) t.resize(size_t(std::max<int64_t>(n, 0)));
}

size_t BatchSession::kv_bytes() const {
  // From the geometry: a device backend's caches have no host storage here.
  const KvCache& k = kv_[0];
  return kv_.size() * 2 * size_t(k.n_layer()) * size_t(k.n_ctx()) * k.row_bytes();
}

}  // namespace tilellm
