// Sampler tests. Every filter is checked against reference_chain() below: a deliberately plain implementation
// of the llama.cpp default chain (full sort, then cut) written independently of sampler.cpp's partial sorts
// and in-place compaction. Draw frequencies are checked with a chi-square bound; the fixed seeds make the
// tests deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <new>
#include <random>
#include <set>
#include <vector>

#include "../common/alloc_counter.h"
#include "base/error.h"
#include "runtime/sampler.h"

namespace tilellm {
namespace {

std::vector<float> random_logits(int32_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

int32_t argmax_lowest(const std::vector<float>& v) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(v.size()); ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

// Independent reference: token id -> probability of being drawn. `history` is every accepted token, oldest
// first.
std::map<int32_t, double> reference_chain(std::vector<float> logits, const SamplerParams& p,
                                          const std::vector<int32_t>& history) {
  if (p.repeat_penalty != 1.0f && p.repeat_last_n > 0) {
    std::set<int32_t> recent;
    const size_t n = history.size(), w = static_cast<size_t>(p.repeat_last_n);
    for (size_t i = n > w ? n - w : 0; i < n; ++i) recent.insert(history[i]);
    for (int32_t t : recent)
      logits[t] = logits[t] > 0 ? logits[t] / p.repeat_penalty : logits[t] * p.repeat_penalty;
  }
  if (p.temperature <= 0) return {{argmax_lowest(logits), 1.0}};

  std::vector<std::pair<float, int32_t>> c;  // (logit, id)
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) c.push_back({logits[i], i});
  std::sort(c.begin(), c.end(),
            [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });

  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(p.top_k);
  if (p.top_p < 1.0f) {
    double z = 0;
    for (auto& e : c) z += std::exp(static_cast<double>(e.first) - c[0].first);
    double cum = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      cum += std::exp(static_cast<double>(c[i].first) - c[0].first) / z;
      if (cum >= p.top_p) {
        c.resize(i + 1);
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    const float thr = c[0].first + std::log(p.min_p);
    std::vector<std::pair<float, int32_t>> kept;
    for (auto& e : c) {
      if (e.first >= thr) kept.push_back(e);
    }
    c = kept;
  }
  double z = 0;
  for (auto& e : c) z += std::exp(static_cast<double>(e.first / p.temperature) - c[0].first / p.temperature);
  std::map<int32_t, double> out;
  for (auto& e : c)
    out[e.second] = std::exp(static_cast<double>(e.first / p.temperature) - c[0].first / p.temperature) / z;
  return out;
}

// The sampler's candidate set and probabilities equal the reference's.
void expect_matches_reference(Sampler& s, const std::vector<float>& logits,
                              const std::vector<int32_t>& history) {
  const int32_t tok = s.sample(logits.data());
  const auto ref = reference_chain(logits, s.params(), history);
  std::map<int32_t, double> got;
  for (const TokenProb& c : s.candidates()) got[c.id] = c.p;
  ASSERT_EQ(got.size(), ref.size()) << "candidate set size differs from the reference";
  for (const auto& [id, pr] : ref) {
    auto it = got.find(id);
    ASSERT_NE(it, got.end()) << "reference token " << id << " missing from the sampler's candidates";
    EXPECT_NEAR(it->second, pr, 1e-5) << "token " << id;
  }
  EXPECT_TRUE(ref.count(tok)) << "sampled token " << tok << " is not in the reference set";
}

// Chi-square statistic of `counts` (over the reference support) against `probs`; cells with expectation < 5
// are pooled into one. Returns {statistic, degrees of freedom}.
std::pair<double, int> chi_square(const std::map<int32_t, double>& probs,
                                  const std::map<int32_t, int>& counts, int draws) {
  double stat = 0, small_e = 0, small_o = 0;
  int cells = 0;
  for (const auto& [id, pr] : probs) {
    const double e = pr * draws;
    const double o = counts.count(id) ? counts.at(id) : 0;
    if (e < 5) {
      small_e += e;
      small_o += o;
      continue;
    }
    stat += (o - e) * (o - e) / e;
    ++cells;
  }
  if (small_e > 0) {
    stat += (small_o - small_e) * (small_o - small_e) / std::max(small_e, 1e-9);
    ++cells;
  }
  return {stat, std::max(cells - 1, 1)};
}

// Mean + 6 standard deviations of a chi-square(df) variable: a correct sampler stays under it (p < 1e-6),
// while a wrong temperature or a wrong cut shifts the statistic by hundreds with 20000 draws.
double chi_square_bound(int df) {
  return df + 6.0 * std::sqrt(2.0 * df);
}

TEST(Sampler, greedy_is_argmax_with_ties_to_lowest_id) {
  for (int32_t n : {1, 7, 1001, 32003}) {
    for (float t : {0.0f, -1.0f}) {
      SamplerParams p;
      p.temperature = t;
      Sampler s(p, n);
      for (uint32_t seed = 0; seed < 5; ++seed) {
        auto l = random_logits(n, seed + 100 * n);
        EXPECT_EQ(s.sample(l.data()), argmax_lowest(l)) << "n=" << n << " seed=" << seed;
        ASSERT_EQ(s.candidates().size(), 1u);
        EXPECT_EQ(s.candidates()[0].p, 1.0f);
      }
    }
  }
  std::vector<float> l = {0.5f, 2.0f, -1.0f, 3.0f, 3.0f, 1.0f, 3.0f};
  SamplerParams p;
  p.temperature = 0;
  EXPECT_EQ(Sampler(p, 7).sample(l.data()), 3);
}

TEST(Sampler, top_k_one_equals_greedy) {
  for (int32_t n : {13, 4099}) {
    SamplerParams p;
    p.top_k = 1;
    p.temperature = 1.7f;
    p.seed = 42;
    Sampler s(p, n);
    for (uint32_t seed = 0; seed < 20; ++seed) {
      auto l = random_logits(n, seed);
      EXPECT_EQ(s.sample(l.data()), argmax_lowest(l));
    }
  }
}

TEST(Sampler, does_not_modify_logits) {
  auto l = random_logits(1001, 3);
  const auto copy = l;
  SamplerParams p;
  p.repeat_penalty = 1.3f;
  Sampler s(p, 1001);
  s.accept(5);
  s.sample(l.data());
  EXPECT_EQ(l, copy);
}

TEST(Sampler, each_filter_keeps_exactly_the_reference_set) {
  std::vector<SamplerParams> cases;
  auto add = [&](float t, int k, float tp, float mp) {
    SamplerParams p;
    p.temperature = t;
    p.top_k = k;
    p.top_p = tp;
    p.min_p = mp;
    cases.push_back(p);
  };
  add(1.0f, 0, 1.0f, 0.0f);     // no filter: full softmax
  add(1.0f, 25, 1.0f, 0.0f);    // top-k only
  add(1.0f, 0, 0.7f, 0.0f);     // top-p only
  add(1.0f, 0, 1.0f, 0.1f);     // min-p only
  add(0.8f, 40, 0.95f, 0.05f);  // llama.cpp defaults
  add(0.3f, 100, 0.5f, 0.01f);  // sharp
  add(2.5f, 7, 0.99f, 0.2f);    // flat
  add(1.0f, 0, 0.999f, 0.0f);   // nucleus wider than the partial-sort first pass
  add(1.2f, 0, 0.9f, 0.02f);    // top-p then min-p on a sorted set
  for (int32_t n : {17, 1001, 32003}) {
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      Sampler s(cases[ci], n);
      for (uint32_t seed = 0; seed < 4; ++seed) {
        // Scales 0.3 (flat: wide nucleus) to 4 (peaked) exercise both the short and the long top-p paths.
        auto l = random_logits(n, 1000 * n + 10 * ci + seed, seed == 0 ? 0.3f : 1.0f + seed);
        SCOPED_TRACE(::testing::Message() << "n=" << n << " case=" << ci << " seed=" << seed);
        expect_matches_reference(s, l, {});
      }
    }
  }
}

TEST(Sampler, penalty_then_filters_match_reference) {
  SamplerParams p;
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 16;
  p.seed = 9;
  const int32_t n = 503;
  Sampler s(p, n);
  std::vector<int32_t> history;
  std::mt19937 g(5);
  for (int step = 0; step < 60; ++step) {
    auto l = random_logits(n, 7000 + step, 2.0f);
    // Make the recent tokens strong contenders so the penalty decides membership in the top-k / nucleus.
    for (size_t i = history.size() > 16 ? history.size() - 16 : 0; i < history.size(); ++i)
      l[history[i]] += 4.0f;
    SCOPED_TRACE(step);
    expect_matches_reference(s, l, history);
    const int32_t t = (step % 3 == 0) ? static_cast<int32_t>(g() % 20) : s.candidates()[0].id;
    s.accept(t);
    history.push_back(t);
  }
}

TEST(Sampler, repetition_penalty_changes_exactly_the_recent_tokens) {
  const int32_t n = 101;
  std::vector<float> l = random_logits(n, 77);
  l[11] = 2.0f;  // accepted, then pushed out of the window
  l[50] = 3.0f;  // positive: divided
  l[3] = -2.0f;  // negative: multiplied; accepted twice, penalized once
  l[7] = 0.0f;   // zero stays zero
  l[9] = 1.25f;
  SamplerParams p;
  p.temperature = 1.0f;  // divides by 1: candidates() shows the penalized logits exactly
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.25f;
  p.repeat_last_n = 5;
  Sampler s(p, n);
  for (int32_t t : {11, 3, 50, 3, 7, 9}) s.accept(t);  // window (last 5): 3 50 3 7 9
  s.sample(l.data());
  ASSERT_EQ(s.candidates().size(), static_cast<size_t>(n));
  for (const TokenProb& c : s.candidates()) {
    float want = l[c.id];
    if (c.id == 50 || c.id == 9) want = l[c.id] / 1.25f;
    if (c.id == 3 || c.id == 7) want = l[c.id] * 1.25f;
    EXPECT_EQ(c.logit, want) << "token " << c.id;
  }
  // reset() empties the window: nothing is penalized any more.
  s.reset();
  s.sample(l.data());
  for (const TokenProb& c : s.candidates()) EXPECT_EQ(c.logit, l[c.id]) << "token " << c.id;
}

TEST(Sampler, same_seed_same_choices_and_reset_replays) {
  const int32_t n = 257;
  SamplerParams p;
  p.temperature = 1.5f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 1234;
  Sampler a(p, n), b(p, n);
  std::vector<int32_t> first;
  for (int i = 0; i < 500; ++i) {
    auto l = random_logits(n, i, 1.0f);
    const int32_t ta = a.sample(l.data());
    EXPECT_EQ(ta, b.sample(l.data())) << "draw " << i;
    first.push_back(ta);
  }
  a.reset();
  for (int i = 0; i < 500; ++i) {
    auto l = random_logits(n, i, 1.0f);
    ASSERT_EQ(a.sample(l.data()), first[i]) << "draw " << i << " after reset";
  }
}

TEST(Sampler, different_seeds_differ_but_share_the_distribution) {
  const int32_t n = 31;
  const auto l = random_logits(n, 555, 1.0f);
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  const auto ref = reference_chain(l, p, {});
  const int draws = 20000;
  std::vector<std::vector<int32_t>> seqs;
  for (uint64_t seed : {1ull, 2ull}) {
    p.seed = seed;
    Sampler s(p, n);
    std::map<int32_t, int> counts;
    std::vector<int32_t> seq;
    for (int i = 0; i < draws; ++i) {
      const int32_t t = s.sample(l.data());
      ++counts[t];
      seq.push_back(t);
    }
    auto [stat, df] = chi_square(ref, counts, draws);
    EXPECT_LT(stat, chi_square_bound(df)) << "seed " << seed;
    seqs.push_back(seq);
  }
  int same = 0;
  for (int i = 0; i < draws; ++i) same += seqs[0][i] == seqs[1][i];
  // Independent streams agree with probability sum p_i^2 per draw (well under 0.3 here), never almost always.
  double coincide = 0;
  for (auto& [id, pr] : ref) coincide += pr * pr;
  EXPECT_LT(same, draws * (coincide + 0.05)) << "seeds 1 and 2 produce (nearly) the same sequence";
}

TEST(Sampler, draw_frequencies_match_reference_probabilities) {
  struct Case {
    int32_t n;
    float t;
    int k;
    float tp, mp, scale;
  };
  for (const Case& c : {Case{7, 1.5f, 0, 1.0f, 0.0f, 1.0f}, Case{1001, 0.8f, 40, 0.95f, 0.05f, 1.0f},
                        Case{601, 1.0f, 0, 0.9f, 0.0f, 1.0f}, Case{999, 0.7f, 12, 1.0f, 0.1f, 0.5f}}) {
    SamplerParams p;
    p.temperature = c.t;
    p.top_k = c.k;
    p.top_p = c.tp;
    p.min_p = c.mp;
    p.seed = 2024 + c.n;
    const auto l = random_logits(c.n, 31 * c.n, c.scale);
    const auto ref = reference_chain(l, p, {});
    Sampler s(p, c.n);
    const int draws = 20000;
    std::map<int32_t, int> counts;
    for (int i = 0; i < draws; ++i) {
      const int32_t t = s.sample(l.data());
      ASSERT_TRUE(ref.count(t)) << "drew token " << t << " outside the reference set";
      ++counts[t];
    }
    auto [stat, df] = chi_square(ref, counts, draws);
    EXPECT_LT(stat, chi_square_bound(df)) << "n=" << c.n << " support=" << ref.size() << " df=" << df;
  }
}

TEST(Sampler, invalid_params_are_rejected_at_construction) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto bad = [](auto mutate) {
    SamplerParams p;
    mutate(p);
    return p;
  };
  const std::vector<SamplerParams> cases = {
      bad([&](SamplerParams& p) { p.temperature = nan; }),
      bad([&](SamplerParams& p) { p.temperature = inf; }),
      bad([&](SamplerParams& p) { p.top_p = 0.0f; }),
      bad([&](SamplerParams& p) { p.top_p = -0.5f; }),
      bad([&](SamplerParams& p) { p.top_p = 1.01f; }),
      bad([&](SamplerParams& p) { p.top_p = nan; }),
      bad([&](SamplerParams& p) { p.min_p = nan; }),
      bad([&](SamplerParams& p) { p.min_p = 1.5f; }),
      bad([&](SamplerParams& p) { p.repeat_penalty = 0.0f; }),
      bad([&](SamplerParams& p) { p.repeat_penalty = -1.1f; }),
      bad([&](SamplerParams& p) { p.repeat_penalty = nan; }),
      bad([&](SamplerParams& p) { p.repeat_penalty = inf; }),
      bad([&](SamplerParams& p) { p.repeat_last_n = -1; }),
  };
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_THROW(Sampler(cases[i], 10), Error) << "case " << i;
  EXPECT_THROW(Sampler(SamplerParams{}, 0), Error);
  // Accepted edge values: negative temperature (greedy), top_p 1 (off), negative min_p (off), min_p 1.
  SamplerParams ok;
  ok.temperature = -0.5f;
  ok.min_p = -1.0f;
  ok.top_p = 1.0f;
  EXPECT_NO_THROW(Sampler(ok, 10));
  ok.min_p = 1.0f;
  EXPECT_NO_THROW(Sampler(ok, 10));

  Sampler s(SamplerParams{}, 10);
  EXPECT_THROW(s.accept(10), Error);
  EXPECT_THROW(s.accept(-1), Error);
}

TEST(Sampler, sample_and_accept_do_not_allocate) {
  const int32_t n = 32003;
  SamplerParams p;
  p.repeat_penalty = 1.1f;
  p.top_k = 0;  // forces the top-p sort path
  p.top_p = 0.999f;
  const auto flat = random_logits(n, 1, 0.2f);
  const auto peaked = random_logits(n, 2, 5.0f);
  Sampler s(p, n);
  SamplerParams g = p;
  g.temperature = 0;
  Sampler greedy(g, n);

  const long before = test::allocation_count();
  for (int i = 0; i < 60; ++i) {
    const int32_t t = s.sample((i % 2 ? flat : peaked).data());
    s.accept(t);
    greedy.accept(greedy.sample(peaked.data()));
  }
  EXPECT_EQ(test::allocation_count() - before, 0);
  // The counter is live in this program: a direct call is seen (new-expressions may be elided by the
  // optimizer).
  void* volatile probe = ::operator new(16);
  ::operator delete(probe);
  EXPECT_EQ(test::allocation_count() - before, 1);
}

}  // namespace
}  // namespace tilellm
