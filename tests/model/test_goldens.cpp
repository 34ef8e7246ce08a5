// Real models against llama.cpp: greedy continuations of the golden prompts (tests/data/goldens/*.json,
// made with llama.cpp itself by tests/reference/make_model_goldens.py) must equal llama.cpp's token for
// token, except where the two may legitimately part. After a split the continuations are no longer
// comparable, so a case ends there.
//
// When may they part? Not only at llama.cpp's near-ties: llama.cpp rounds activations to 8 bits in every
// matmul and its logits move by up to ~0.5 from the exact ones (docs/REFERENCE.md). Run against itself
// with an f32 instead of an f16 KV cache, or with the prompt fed one token at a time, llama.cpp already
// departs from its own goldens at top-2 gaps up to 0.28 (SmolLM2) and 0.54 (Gemma 3) (docs/GOLDENS.md).
// So a split at step i is accepted when
//  (a) llama.cpp's own top-2 gap there is under 0.05 (a near-tie), or
//  (b) our token is the argmax of the exact float64 forward pass at that step (recorded with the goldens
//      along llama.cpp's trajectory): llama.cpp's choice was its rounding, ours is the exact answer, or
//  (c) with quantized activations only: the exact forward pass is itself within kQ8Noise of a tie there,
//      so the 8-bit rounding both engines apply may decide either way.
// Anything else is a bug. The float path (f32 activations) is checked with (a) and (b) only.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/paths.h"
#include "model/model.h"
#include "runtime/session.h"

namespace tilellm {
namespace {

constexpr float kNearTie = 0.05f;
// How far 8-bit activation rounding moves a top-2 gap from the exact one: along the golden trajectories
// llama.cpp's gaps differ from the exact forward pass's by up to 0.82 (SmolLM2) and 1.12 (Gemma 3), 99th
// percentile 0.50 and 0.65. 0.5 stays below the worst of that, while a wrong kernel (errors of whole logits)
// still fails.
constexpr float kQ8Noise = 0.5f;

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return int32_t(best);
}

void check_goldens(const std::string& golden_file, ActivationMode mode) {
  std::ifstream in(test::source_path("tests/data/goldens/" + golden_file));
  ASSERT_TRUE(in) << "golden file " << golden_file << " missing";
  const nlohmann::json g = nlohmann::json::parse(in);
  const std::string path = test::model_path(g.at("model").get<std::string>());
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so;
  so.n_ctx = 512;
  so.n_threads = 2;
  so.activations = mode;
  Session session(*model, so);
  const int64_t V = model->config().n_vocab;
  const bool quantized = mode == ActivationMode::Quantized;

  int n_cases = 0, n_exact = 0, n_tie = 0, n_exact_wins = 0, n_noise = 0, n_tokens = 0;
  for (const auto& c : g.at("cases")) {
    const auto prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto expect = c.at("generated").get<std::vector<int32_t>>();
    const auto gap = c.at("top2_gap").get<std::vector<float>>();
    const auto ref_argmax = c.at("ref_argmax").get<std::vector<int32_t>>();
    const auto ref_gap = c.at("ref_top2_gap").get<std::vector<float>>();
    ASSERT_EQ(expect.size(), gap.size());
    ASSERT_EQ(expect.size(), ref_argmax.size());
    ASSERT_EQ(expect.size(), ref_gap.size());
    // The tokenizer must reproduce llama.cpp's prompt tokens too.
    EXPECT_EQ(model->tokenizer().encode(c.at("prompt").get<std::string>(), true, false), prompt)
        << "prompt: " << c.at("prompt");
    session.reset();
    session.eval(prompt.data(), int64_t(prompt.size()));
    ++n_cases;
    bool exact = true;
    for (size_t i = 0; i < expect.size(); ++i) {
      const int32_t got = argmax(session.logits(), V);
      if (got != expect[i]) {
        exact = false;
        if (gap[i] < kNearTie) {
          ++n_tie;
        } else if (got == ref_argmax[i]) {
          ++n_exact_wins;
        } else if (quantized && ref_gap[i] < kQ8Noise) {
          ++n_noise;
        } else {
          ADD_FAILURE() << "prompt " << c.at("prompt") << ": step " << i << " gave " << got << ", llama.cpp "
                        << expect[i] << " (top-2 gap " << gap[i] << "), exact forward pass " << ref_argmax[i]
                        << " (top-2 gap " << ref_gap[i] << ")";
        }
        break;
      }
      ++n_tokens;
      if (i + 1 < expect.size()) session.eval(&got, 1);
    }
    n_exact += exact;
  }
  EXPECT_GE(n_cases, 8);
  std::printf(
      "%s (%s activations): %d cases, %d identical for all steps; splits: %d at llama.cpp near-ties, %d "
      "where the "
      "exact forward pass agrees with this engine, %d within 8-bit rounding noise of an exact tie; %d tokens "
      "matched\n",
      golden_file.c_str(), quantized ? "q8" : "f32", n_cases, n_exact, n_tie, n_exact_wins, n_noise,
      n_tokens);
}

TEST(Goldens, smollm2_greedy_matches_llama_cpp_q8) {
  check_goldens("smollm2.json", ActivationMode::Quantized);
}
TEST(Goldens, gemma3_greedy_matches_llama_cpp_q8) {
  check_goldens("gemma3.json", ActivationMode::Quantized);
}
TEST(Goldens, smollm2_greedy_matches_llama_cpp_f32) {
  check_goldens("smollm2.json", ActivationMode::F32);
}
TEST(Goldens, gemma3_greedy_matches_llama_cpp_f32) {
  check_goldens("gemma3.json", ActivationMode::F32);
}

}  // namespace
}  // namespace tilellm
