// Sampler chain; the contract and the exact draw algorithm are documented in sampler.h.
// Every std algorithm used here (make/push/pop/sort_heap, nth_element, partition, sort) works in place, so
// sample() never allocates.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace tilellm {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Chain order: higher logit first, lower id on ties (deterministic boundaries for top-k / top-p).
bool before(const TokenProb& a, const TokenProb& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Without top-k, top-p first sorts only this many candidates: real next-token distributions are peaked, so
// the nucleus almost always fits, and the rest of the vocabulary is never ordered.
constexpr size_t kTopPFirstPass = 256;

// A penalty window this long would be a mistaken argument (e.g. a -1 cast), not a context length.
constexpr int kMaxWindow = 1 << 24;

}  // namespace

void Sampler::check(const SamplerParams& p) {
  if (!std::isfinite(p.temperature)) fail("sampler: temperature must be finite, got {}", p.temperature);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) fail("sampler: top_p must be in (0, 1], got {}", p.top_p);
  if (std::isnan(p.min_p) || p.min_p > 1.0f) fail("sampler: min_p must be <= 1 (<= 0: off), got {}", p.min_p);
  if (!(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f)) {
    fail("sampler: repeat_penalty must be finite and > 0 (1: off), got {}", p.repeat_penalty);
  }
  if (p.repeat_last_n < 0 || p.repeat_last_n > kMaxWindow) {
    fail(
        "sampler: repeat_last_n must be in [0, {}] (0: off; pass the context size for llama.cpp's -1), got "
        "{}",
        kMaxWindow, p.repeat_last_n);
  }
}

Sampler::Sampler(const SamplerParams& p, int32_t n_vocab) : params_(p), n_vocab_(n_vocab) {
  if (n_vocab <= 0) fail("sampler: n_vocab must be > 0, got {}", n_vocab);
  check(p);

  penalty_on_ = p.repeat_penalty != 1.0f && p.repeat_last_n > 0;
  cand_.resize(static_cast<size_t>(n_vocab));
  // The window is kept even with the penalty off so that accept() behaves the same in every mode.
  window_.resize(static_cast<size_t>(p.repeat_last_n));
  if (penalty_on_) stamp_.assign(static_cast<size_t>(n_vocab), 0);
  rng_.seed(p.seed);
}

void Sampler::accept(int32_t token) {
  if (token < 0 || token >= n_vocab_) {
    fail("sampler: accepted token id {} outside the vocabulary [0, {})", token, n_vocab_);
  }
  if (window_.empty()) return;
  window_[window_head_] = token;
  window_head_ = (window_head_ + 1) % window_.size();
  window_len_ = std::min(window_len_ + 1, window_.size());
}

void Sampler::reset() {
  window_head_ = 0;
  window_len_ = 0;
  rng_.seed(params_.seed);
}

// Step 1, part one: stamp every token in the window with a fresh epoch, so logit_at() penalizes each of them
// exactly once however often it occurs.
void Sampler::mark_window() {
  if (++epoch_ == 0) {  // the stamps wrapped after 2^32 calls: clear them so no stale stamp matches
    std::fill(stamp_.begin(), stamp_.end(), 0u);
    epoch_ = 1;
  }
  for (size_t i = 0; i < window_len_; ++i) stamp_[window_[i]] = epoch_;
}

// Step 1, part two: the logit of token i after the penalty. Dividing a negative logit would raise it, so
// llama.cpp multiplies those instead: a penalty > 1 always pushes a repeated token down.
float Sampler::logit_at(const float* logits, size_t i) const {
  float l = logits[i];
  if (std::isnan(l)) fail("sampler: logit of token {} is NaN", i);
  if (penalty_on_ && stamp_[i] == epoch_)
    l = l <= 0.0f ? l * params_.repeat_penalty : l / params_.repeat_penalty;
  return l;
}

// Step 2: the k best tokens into cand_[0, k), sorted. cand_[0, k) is a heap whose front is the worst kept
// token, so each of the n logits costs one comparison unless it displaces that token.
void Sampler::top_k_select(const float* logits, size_t k) {
  const auto heap_end = cand_.begin() + k;
  auto worst = [&] { return cand_.front().logit; };
  for (size_t i = 0; i < k; ++i) cand_[i] = {static_cast<int32_t>(i), logit_at(logits, i), 0.0f};
  std::make_heap(cand_.begin(), heap_end, before);
  for (size_t i = k; i < cand_.size(); ++i) {
    const float l = logit_at(logits, i);
    if (l < worst()) continue;  // the common case, decided on the logit alone
    const TokenProb c{static_cast<int32_t>(i), l, 0.0f};
    if (before(c, cand_.front())) {
      std::pop_heap(cand_.begin(), heap_end, before);
      cand_[k - 1] = c;
      std::push_heap(cand_.begin(), heap_end, before);
    }
  }
  std::sort_heap(cand_.begin(), heap_end, before);  // ascending in `before` = best first
}

// Step 3 on cand_[0, n), whose cand_[i].p already hold w_i = exp(l_i - max) and `sum` = sum of w over the set
// step 2 left (the softmax at temperature 1): keeps the shortest best-first prefix whose mass reaches
// top_p * sum. Returns the prefix length and leaves that prefix sorted.
size_t Sampler::top_p_cut(size_t n, bool sorted, double sum) {
  const double target = static_cast<double>(params_.top_p) * sum;
  double cum = 0.0;
  size_t i = 0;
  // Walks the sorted range [i, end); true (with i = kept count) once the mass reaches the target.
  auto walk = [&](size_t end) {
    for (; i < end; ++i) {
      cum += cand_[i].p;
      if (cum >= target) {
        ++i;
        return true;
      }
    }
    return false;
  };
  const auto b = cand_.begin();
  if (!sorted) {
    const size_t m = std::min(n, kTopPFirstPass);
    std::nth_element(b, b + (m - 1), b + n, before);
    std::sort(b, b + m, before);
    if (walk(m)) return i;
    if (m < n) {
      // The nucleus reaches past the first pass. Bucket the rest by logit (bucket 0 = highest), find the
      // bucket in which the mass reaches the target, and sort only the tokens in it and above: every one of
      // them comes before every token below it, so the sorted gathered range is exactly the next stretch of
      // the full order.
      float hi = kNegInf, lo = std::numeric_limits<float>::infinity();
      for (size_t j = m; j < n; ++j) {
        hi = std::max(hi, cand_[j].logit);
        if (cand_[j].logit > kNegInf) lo = std::min(lo, cand_[j].logit);
      }
      const float scale = hi > lo ? static_cast<float>(kBuckets) / (hi - lo) : 0.0f;
      // Monotone in the logit (rounding preserves order); -inf and NaN distances land in the last bucket.
      auto bucket = [&](float l) {
        const float d = (hi - l) * scale;
        return d < static_cast<float>(kBuckets - 1) ? static_cast<size_t>(d) : kBuckets - 1;
      };
      bucket_mass_.fill(0.0);
      for (size_t j = m; j < n; ++j) bucket_mass_[bucket(cand_[j].logit)] += cand_[j].p;
      size_t cut = kBuckets - 1;
      double acc = cum;
      for (size_t k = 0; k < kBuckets; ++k) {
        acc += bucket_mass_[k];
        if (acc >= target) {
          cut = k;
          break;
        }
      }
      const auto mid =
          std::partition(b + m, b + n, [&](const TokenProb& c) { return bucket(c.logit) <= cut; });
      std::sort(b + m, mid, before);
      if (walk(static_cast<size_t>(mid - b))) return i;
      // Summation order differs between the buckets and the walk; if rounding left it short, sort the rest.
      std::sort(mid, b + n, before);
      if (walk(n)) return i;
    }
    return n;
  }
  return walk(n) ? i : n;
}

// Step 4 on cand_[0, n): keeps logit >= max + ln(min_p). The top token always passes (ln(min_p) <= 0).
size_t Sampler::min_p_cut(size_t n, bool sorted) {
  float max_l = cand_[0].logit;
  if (!sorted) {
    for (size_t i = 1; i < n; ++i) max_l = std::max(max_l, cand_[i].logit);
  }
  const float threshold = max_l + std::log(params_.min_p);
  if (sorted) {
    size_t i = 1;
    while (i < n && cand_[i].logit >= threshold) ++i;
    return i;
  }
  size_t kept = 0;  // stable in-place compaction: nothing needs sorting if nothing was sorted before
  for (size_t i = 0; i < n; ++i) {
    if (cand_[i].logit >= threshold) cand_[kept++] = cand_[i];
  }
  return kept;
}

int32_t Sampler::sample(const float* logits) {
  const size_t nv = cand_.size();
  if (penalty_on_) mark_window();

  if (params_.temperature <= 0.0f) {
    size_t best = 0;
    float best_l = logit_at(logits, 0);
    for (size_t i = 1; i < nv; ++i) {
      const float l = logit_at(logits, i);
      if (l > best_l) {  // strict: the lowest id wins a tie
        best = i;
        best_l = l;
      }
    }
    cand_[0] = {static_cast<int32_t>(best), best_l, 1.0f};
    n_cand_ = 1;
    return cand_[0].id;
  }

  size_t n = nv;
  bool sorted = false;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < nv) {
    n = static_cast<size_t>(params_.top_k);
    top_k_select(logits, n);
    sorted = true;
  } else {
    for (size_t i = 0; i < nv; ++i) cand_[i] = {static_cast<int32_t>(i), logit_at(logits, i), 0.0f};
  }
  if (params_.top_p < 1.0f) {
    float max_l = kNegInf;
    for (size_t i = 0; i < n; ++i) max_l = std::max(max_l, cand_[i].logit);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      cand_[i].p = std::exp(cand_[i].logit - max_l);
      sum += cand_[i].p;
    }
    // Top-p and min-p each keep a prefix of the same best-first order, so the result is the shorter prefix.
    // Applying min-p first (an O(n) compaction) while top-p keeps the full set's normalizer gives the
    // identical set, and top-p then sorts at most the min-p survivors instead of a nucleus that can span most
    // of a flat vocabulary.
    if (params_.min_p > 0.0f && !sorted) n = min_p_cut(n, false);
    n = top_p_cut(n, sorted, sum);
    sorted = true;
  }
  if (params_.min_p > 0.0f) n = min_p_cut(n, sorted);

  float max_l = kNegInf;
  for (size_t i = 0; i < n; ++i) {
    // Division (not multiplication by 1/t) so the scaled logits equal llama.cpp's bit for bit.
    cand_[i].logit /= params_.temperature;
    max_l = std::max(max_l, cand_[i].logit);
  }
  n_cand_ = n;
  if (max_l == kNegInf) {
    // Every survivor is -inf (all logits masked): no distribution exists; the first candidate is the only
    // deterministic answer, and it is reported with p = 1.
    cand_[0].p = 1.0f;
    n_cand_ = 1;
    return cand_[0].id;
  }

  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cand_[i].p = std::exp(cand_[i].logit - max_l);
    sum += cand_[i].p;
  }
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double target = u * sum;
  double run = 0.0;
  size_t pick = n;
  for (size_t i = 0; i < n; ++i) {
    run += cand_[i].p;
    if (run > target) {
      pick = i;
      break;
    }
  }
  if (pick == n) {  // u * sum rounded up to sum: take the last token that has any weight
    pick = n - 1;
    while (pick > 0 && cand_[pick].p == 0.0f) --pick;
  }
  for (size_t i = 0; i < n; ++i) cand_[i].p = static_cast<float>(cand_[i].p / sum);
  return cand_[pick].id;
}

}  // namespace tilellm
