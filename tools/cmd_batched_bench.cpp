// `tilellm batched-bench`: llama-batched-bench's measurement on TileLLM — B sequences decoded together in
// one forward pass a step (runtime/batch_session.h, what `serve --parallel B` runs), the aggregate speed
// of their prompts and of their generation, in llama-batched-bench's table.
//
//   tilellm batched-bench -m a.gguf -npp 128 -ntg 128 -npl 1,2,4,8
//
// For every PP x TG x B: B sequences of PP random prompt tokens each, prefilled together (passes of at most
// -b tokens, sequences split across passes where they do not fit), then TG steps of one token for every
// sequence. One untimed round first (the prompts and 4 steps; the caches then emptied), so that a backend's
// first use of a shape (a recorded decode step, a self-check) is not timed. Columns as llama-batched-bench
// prints them: N_KV = B * (PP + TG), T_PP / S_PP the prompts' time and tokens/s (B * PP tokens), T_TG / S_TG
// the generation's (B * TG tokens), T / S both together.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "commands.h"
#include "common.h"
#include "runtime/batch_session.h"
#include "runtime/bench.h"

namespace tilellm::cli {
namespace {

struct BatchedBenchArgs {
  ModelArgs model;
  std::vector<std::string> npp{"128"}, ntg{"128"}, npl{"1,2,4,8"};
  std::string output = "md";
  uint32_t seed = 1234;
};

std::vector<int64_t> int_list(const std::vector<std::string>& v, const char* what, int64_t lo) {
  std::vector<int64_t> out;
  for (const auto& s : v) {
    for (int64_t x : bench::parse_int_list(s, what)) {
      if (x < lo) fail("{}: {} is below {}", what, x, lo);
      out.push_back(x);
    }
  }
  if (out.empty()) fail("{}: no values", what);
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The prompts of every sequence ([B][pp]) through passes of at most n_batch tokens.
void prefill(BatchSession& bs, const std::vector<std::vector<int32_t>>& prompts) {
  const int B = int(prompts.size());
  std::vector<int64_t> done(static_cast<size_t>(B), 0);
  std::vector<BatchSession::Entry> entries;
  for (;;) {
    entries.clear();
    int64_t budget = bs.n_batch();
    for (int s = 0; s < B && budget > 0; ++s) {
      const int64_t left = int64_t(prompts[size_t(s)].size()) - done[size_t(s)];
      if (left <= 0) continue;
      const int64_t n = std::min(left, budget);
      entries.push_back({s, prompts[size_t(s)].data() + done[size_t(s)], n});
      done[size_t(s)] += n;
      budget -= n;
    }
    if (entries.empty()) return;
    bs.eval(entries.data(), int(entries.size()));
  }
}

// `steps` passes of one token for every sequence; ids [steps][B].
void generate(BatchSession& bs, const std::vector<int32_t>& ids, int64_t steps) {
  const int B = bs.n_seq();
  std::vector<BatchSession::Entry> entries(static_cast<size_t>(B));
  for (int64_t i = 0; i < steps; ++i) {
    for (int s = 0; s < B; ++s) entries[size_t(s)] = {s, ids.data() + i * B + s, 1};
    bs.eval(entries.data(), B);
  }
}

void run_batched_bench(const BatchedBenchArgs& a) {
  const bool md = a.output == "md";
  const std::vector<int64_t> pps = int_list(a.npp, "-npp", 0), tgs = int_list(a.ntg, "-ntg", 0),
                             bs_list = int_list(a.npl, "-npl", 1);
  if (*std::max_element(pps.begin(), pps.end()) + *std::max_element(tgs.begin(), tgs.end()) == 0)
    fail("-npp and -ntg are all 0: no tokens to measure");
  auto model = load_model(a.model);
  const int64_t V = model->config().n_vocab;
  std::mt19937 rng(a.seed);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(V - 1));
  const SessionOptions base = session_options(a.model);
  if (md) {
    std::printf("\nmain: backend = %s, n_batch = %lld, n_threads = %d, commit = %s\n\n", base.backend.c_str(),
                static_cast<long long>(base.n_batch), base.n_threads, build_commit());
    std::printf("|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV",
                "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", "-------", "--------", "------", "--------",
                "----------", "----------", "----------", "----------", "----------", "----------");
  }
  for (int64_t pp : pps) {
    for (int64_t tg : tgs) {
      if (pp + tg == 0) continue;
      for (int64_t B : bs_list) {
        SessionOptions so = base;
        so.n_ctx = std::max<int64_t>(a.model.ctx, pp + tg);  // per sequence
        BatchSession bs(*model, so, int(B));
        std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(B),
                                                  std::vector<int32_t>(static_cast<size_t>(pp)));
        for (auto& p : prompts)
          for (auto& t : p) t = pick(rng);
        std::vector<int32_t> ids(static_cast<size_t>(tg * B));
        for (auto& t : ids) t = pick(rng);

        prefill(bs, prompts);  // untimed round
        generate(bs, ids, std::min<int64_t>(tg, 4));
        for (int s = 0; s < B; ++s) bs.truncate(s, 0);

        const auto t0 = std::chrono::steady_clock::now();
        prefill(bs, prompts);
        const double t_pp = seconds_since(t0);
        const auto t1 = std::chrono::steady_clock::now();
        generate(bs, ids, tg);
        const double t_tg = seconds_since(t1), t = t_pp + t_tg;
        const double s_pp = t_pp > 0 ? double(B * pp) / t_pp : 0, s_tg = t_tg > 0 ? double(B * tg) / t_tg : 0,
                     s = t > 0 ? double(B * (pp + tg)) / t : 0;
        if (md) {
          std::printf("|%6lld | %6lld | %4lld | %6lld | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n",
                      static_cast<long long>(pp), static_cast<long long>(tg), static_cast<long long>(B),
                      static_cast<long long>(B * (pp + tg)), t_pp, s_pp, t_tg, s_tg, t, s);
        } else {
          nlohmann::ordered_json j;
          j["n_kv_max"] = so.n_ctx * B;
          j["n_batch"] = bs.n_batch();
          j["backend"] = so.backend;
          j["n_threads"] = bs.n_threads();
          j["commit"] = build_commit();
          j["pp"] = pp;
          j["tg"] = tg;
          j["pl"] = B;
          j["n_kv"] = B * (pp + tg);
          j["t_pp"] = t_pp;
          j["speed_pp"] = s_pp;
          j["t_tg"] = t_tg;
          j["speed_tg"] = s_tg;
          j["t"] = t;
          j["speed"] = s;
          std::printf("%s\n", j.dump().c_str());
        }
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

void register_batched_bench(CLI::App& app) {
  auto a = std::make_shared<BatchedBenchArgs>();
  CLI::App* sub = app.add_subcommand(
      "batched-bench",
      "llama-batched-bench's table: B sequences prefilled and decoded together, aggregate tokens/s");
  add_model_args(sub, a->model);
  sub->add_option("--npp", a->npp, "prompt tokens of each sequence, comma list")->capture_default_str();
  sub->add_option("--ntg", a->ntg, "generated tokens of each sequence, comma list")->capture_default_str();
  sub->add_option("--npl", a->npl, "sequences decoded together (B), comma list")->capture_default_str();
  sub->add_option("-o,--output", a->output,
                  "md: llama-batched-bench's table; jsonl: its --output-format jsonl")
      ->check(CLI::IsMember({"md", "jsonl"}))
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "seed of the random token ids")->capture_default_str();
  sub->callback([a] { run_batched_bench(*a); });
}

}  // namespace tilellm::cli
