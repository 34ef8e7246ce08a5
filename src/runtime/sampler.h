// Token sampler: turns one row of logits into a token id, the way llama.cpp users expect from its default
// chain.
//
// Chain (the order of llama.cpp's common sampler with mirostat off; DRY, typical-p, XTC and top-n-sigma are
// not implemented, which equals llama.cpp with those at their "off" defaults):
//   1. Repetition penalty. Every token seen in the last `repeat_last_n` accepted tokens is penalized once,
//      however often it occurred: logit > 0 -> logit / repeat_penalty, logit <= 0 -> logit * repeat_penalty.
//   2. Top-k. Keep the k highest logits.
//   3. Top-p. Softmax (at temperature 1) over what is left, sorted descending; keep the shortest prefix whose
//      cumulative probability reaches top_p.
//   4. Min-p. Keep tokens whose logit >= max_logit + ln(min_p), i.e. p >= min_p * p_max (temperature 1).
//   5. Temperature. Divide the surviving logits by `temperature`. llama.cpp applies it here, after the
//      filters, so the filters never depend on the temperature; only the final draw does.
//   6. Draw. Softmax over the survivors, then one draw (algorithm below).
// temperature <= 0 replaces 3-6 by argmax over the penalized logits, ties going to the lowest id (the filters
// always keep the top token, so this is what llama.cpp's chain yields as well). Greedy draws no random
// number.
//
// Ordering: whenever the chain sorts, it sorts by (logit descending, id ascending), so ties at a top-k or
// top-p boundary keep the lower ids and every result is a pure function of (params, accepted tokens, logits,
// draws so far).
//
// Draw algorithm (fixed, so a seed reproduces a run on every platform with IEEE floats):
//   rng = std::mt19937_64 seeded with params.seed (0 is an ordinary seed, not "random"); reset() reseeds it.
//   u   = (rng() >> 11) * 2^-53, a uniform double in [0, 1); one rng() call per draw.
//   w_i = expf(logit_i - max_logit) over the survivors in their current order; S = sum of w_i (in double).
//   The pick is the first i with w_0 + ... + w_i > u * S, so a zero-weight token can never be picked.
//
// Memory: the constructor allocates every buffer (candidates: n_vocab entries; penalty window: repeat_last_n
// ids; penalty marks: n_vocab stamps). sample() and accept() never allocate, so they are safe inside the
// decode loop.
//
// Cost per call, n = n_vocab: greedy and top-k are one pass over the logits (top-k keeps a k-entry heap, so
// k=40 of a 262k vocabulary sorts nothing else). Without top-k, top-p sorts only the tokens that can be in
// the nucleus: first the best 256, then, if their mass is short of top_p, those in the logit buckets that
// reach it; an active min-p bounds that set first, since both filters keep a prefix of the same order.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace tilellm {

struct SamplerParams {
  float temperature = 0.8f;     // <= 0: greedy (argmax; ties -> lowest id). NaN/inf: error.
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // must lie in (0, 1]; 1: off
  float min_p = 0.05f;          // <= 0: off; must be <= 1
  float repeat_penalty = 1.0f;  // 1: off; must be finite and > 0. llama.cpp semantics (see step 1 above)
  int repeat_last_n = 64;       // window of recent accepted tokens the penalty looks at; 0: off; >= 0
  uint64_t seed = 0;            // same seed + same accepted tokens + same logits -> same choices
  // llama.cpp's repeat_last_n = -1 ("the context size") is the caller's to resolve: pass the number.
};

// One candidate after the chain: its id, its logit after penalty and temperature, and its probability of
// being drawn.
struct TokenProb {
  int32_t id;
  float logit;
  float p;
};

class Sampler {
 public:
  // Validates `p` (tilellm::Error naming the bad field and value) and allocates all buffers.
  Sampler(const SamplerParams& p, int32_t n_vocab);
  // The constructor's checks of `p` alone, allocating nothing.
  static void check(const SamplerParams& p);

  // Picks a token from `logits` (n_vocab floats, finite or -inf; not modified; a NaN is reported as an Error
  // naming its id, since it means a broken forward pass). Does not record the token: call accept() with it,
  // as with every prompt token, so the penalty window sees it.
  int32_t sample(const float* logits);

  // Records a token in the penalty window (a ring of the last repeat_last_n tokens). Throws if the id is
  // outside [0, n_vocab).
  void accept(int32_t token);

  // Forgets the window and reseeds the generator: a reset sampler repeats its choices from the start.
  void reset();

  const SamplerParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }

  // The candidates the last sample() drew from, with their final logits and probabilities (sum 1), in the
  // chain's order (descending when the chain sorted). Greedy: the single chosen token with p = 1. Valid until
  // the next sample(); used by tests and for reporting log-probabilities.
  std::span<const TokenProb> candidates() const { return {cand_.data(), n_cand_}; }

 private:
  void mark_window();
  float logit_at(const float* logits, size_t i) const;
  void top_k_select(const float* logits, size_t k);
  size_t top_p_cut(size_t n, bool sorted, double sum);
  size_t min_p_cut(size_t n, bool sorted);

  SamplerParams params_;
  int32_t n_vocab_;
  bool penalty_on_;

  std::vector<TokenProb> cand_;  // [n_vocab] working candidate array; prefix [0, n_cand_) is the current set
  size_t n_cand_ = 0;

  std::vector<int32_t> window_;  // [repeat_last_n] ring of accepted ids; oldest at window_head_ once full
  size_t window_head_ = 0;       // next slot to write
  size_t window_len_ = 0;        // valid entries, <= window_.size()

  // [n_vocab] per-token stamp: stamp_[t] == epoch_ means t was already penalized in this sample() call, so a
  // token repeated inside the window is penalized once (llama.cpp semantics) without a per-call set or map.
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;

  // Top-p on an unsorted set: a histogram of the probability mass over logit buckets finds which tokens can
  // be in the nucleus, so only those get sorted (see top_p_cut).
  static constexpr size_t kBuckets = 256;
  std::array<double, kBuckets> bucket_mass_{};

  std::mt19937_64 rng_;
};

}  // namespace tilellm
