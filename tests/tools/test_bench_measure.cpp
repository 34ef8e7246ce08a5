// The benchmark's measurement core on a tiny random model: one sample per repetition, the depth kept in the
// cache, a test that does not fit refused with an error naming the context, and the per-model facts every row
// carries. No timing is asserted (speed is shown by bench/compare_llama.sh, never by a unit test).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "../common/tiny_model.h"
#include "base/error.h"
#include "model/model.h"
#include "runtime/bench.h"
#include "runtime/session.h"

namespace tilellm::bench {
namespace {

class BenchMeasure : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ =
        (std::filesystem::temp_directory_path() / ("tilellm_bench_" + std::to_string(::getpid()) + ".gguf"))
            .string();
    test::tiny_model(test::TinySpec{}).write(path_);
    model_ = Model::load(path_).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    std::filesystem::remove(path_);
  }
  static Session session(int64_t n_ctx) {
    SessionOptions o;
    o.n_ctx = n_ctx;
    o.n_threads = 1;
    o.n_batch = 8;
    return Session(*model_, o);
  }
  static inline std::string path_;
  static inline Model* model_ = nullptr;
};

TEST_F(BenchMeasure, one_sample_per_repetition_for_every_kind_of_test) {
  for (const TestSpec& t : {TestSpec{20, 0, 0}, TestSpec{0, 7, 0}, TestSpec{12, 5, 0}, TestSpec{9, 4, 11}}) {
    Session s(*model_, [&] {
      SessionOptions o;
      o.n_ctx = t.n_depth + t.n_prompt + t.n_gen;  // exactly what the CLI sizes it to
      o.n_threads = 1;
      o.n_batch = 8;
      return o;
    }());
    const std::vector<uint64_t> ns = measure(s, t, 3, 42);
    EXPECT_EQ(ns.size(), 3u) << test_name(t);
    for (uint64_t x : ns) EXPECT_GT(x, 0u) << test_name(t);
    // After the last run the cache holds the depth and every timed token.
    EXPECT_EQ(s.n_past(), t.n_depth + t.n_prompt + t.n_gen) << test_name(t);
  }
}

TEST_F(BenchMeasure, test_larger_than_the_context_is_refused) {
  Session s = session(16);
  try {
    measure(s, TestSpec{12, 5, 0}, 1, 1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
}

TEST_F(BenchMeasure, weight_bytes_per_token_counts_matrices_output_and_one_embedding_row) {
  EXPECT_EQ(model_type(*model_).rfind("llama ", 0), 0u) << model_type(*model_);
  // Recounted from the file's tensor list: every 2-D layer matrix, the output matrix (the embedding when the
  // output is tied), and one row of the embedding table.
  const GgufFile& f = model_->file();
  uint64_t want = 0;
  const GgufTensor* out = f.tensor("output.weight");
  const GgufTensor* emb = f.tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  want += (out ? out : emb)->nbytes + emb->nbytes / uint64_t(emb->rows());
  for (const GgufTensor& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) == 0 && t.ne.size() == 2) want += t.nbytes;
  }
  EXPECT_EQ(weight_bytes_per_token(*model_), want);
}

}  // namespace
}  // namespace tilellm::bench
