// Tokenizers from small hand-built GGUF files: errors for broken metadata, and Llama-2-style SentencePiece
// and GPT-2-style BPE behaviour on vocabularies small enough to work out by hand.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tilellm {
namespace {

// Writes a GGUF v3 file with metadata only (no tensors).
class GgufBuilder {
 public:
  GgufBuilder& str(const std::string& key, const std::string& v) {
    head(key, 8);
    put_str(v);
    return *this;
  }
  GgufBuilder& boolean(const std::string& key, bool v) {
    head(key, 7);
    kv_.push_back(v ? 1 : 0);
    return *this;
  }
  GgufBuilder& u32(const std::string& key, uint32_t v) {
    head(key, 4);
    put(v);
    return *this;
  }
  GgufBuilder& strings(const std::string& key, const std::vector<std::string>& v) {
    head(key, 9);
    put(uint32_t{8});
    put(uint64_t{v.size()});
    for (const auto& s : v) put_str(s);
    return *this;
  }
  GgufBuilder& floats(const std::string& key, const std::vector<float>& v) {
    head(key, 9);
    put(uint32_t{6});
    put(uint64_t{v.size()});
    for (float x : v) put(x);
    return *this;
  }
  GgufBuilder& ints(const std::string& key, const std::vector<int32_t>& v) {
    head(key, 9);
    put(uint32_t{5});
    put(uint64_t{v.size()});
    for (int32_t x : v) put(x);
    return *this;
  }
  std::string write(const std::string& name) const {
    const std::string path = (std::filesystem::path(TILELLM_BINARY_DIR) / ("tok_" + name + ".gguf")).string();
    std::string out = "GGUF";
    auto app = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
    app(uint32_t{3});
    app(uint64_t{0});
    app(n_);
    out += kv_;
    out.resize((out.size() + 31) / 32 * 32, '\0');
    std::ofstream(path, std::ios::binary) << out;
    return path;
  }

 private:
  template <typename T>
  void put(T v) {
    kv_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void put_str(const std::string& s) {
    put(uint64_t{s.size()});
    kv_ += s;
  }
  void head(const std::string& key, uint32_t type) {
    put_str(key);
    put(type);
    ++n_;
  }
  std::string kv_;
  uint64_t n_ = 0;
};

const std::string kSp = "\xE2\x96\x81";  // ▁

// A Llama-2-style SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, then a few pieces.
struct SpmVocab {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<float> scores{0, 0, 0};
  std::vector<int32_t> types{2, 3, 3};
  SpmVocab() {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      add(name, 0, 6);
    }
    for (auto [t, s] : std::vector<std::pair<std::string, float>>{{kSp, -1},
                                                                  {"H", -5},
                                                                  {"e", -5},
                                                                  {"l", -5},
                                                                  {"o", -5},
                                                                  {kSp + "H", -2},
                                                                  {"el", -3},
                                                                  {"ll", -1.5},
                                                                  {"lo", -4},
                                                                  {"llo", -1.8},
                                                                  {kSp + "He", -2.5},
                                                                  {kSp + "Hello", -0.5}}) {
      add(t, s, 1);
    }
  }
  void add(const std::string& t, float s, int32_t type) {
    tokens.push_back(t);
    scores.push_back(s);
    types.push_back(type);
  }
  int32_t id(const std::string& t) const {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == t) return static_cast<int32_t>(i);
    }
    return -1;
  }
  GgufBuilder gguf() const {
    GgufBuilder b;
    b.str("general.architecture", "llama")
        .str("tokenizer.ggml.model", "llama")
        .strings("tokenizer.ggml.tokens", tokens)
        .floats("tokenizer.ggml.scores", scores)
        .ints("tokenizer.ggml.token_type", types)
        .u32("tokenizer.ggml.bos_token_id", 1)
        .u32("tokenizer.ggml.eos_token_id", 2);
    return b;
  }
};

std::unique_ptr<Tokenizer> open_tok(const std::string& path) {
  auto f = GgufFile::open(path);
  return Tokenizer::from_gguf(*f);
}

void expect_error(const std::string& path, const std::string& needle) {
  try {
    open_tok(path);
    ADD_FAILURE() << path << ": no error, expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TokenizerGguf, missing_tokens_array_is_a_clear_error) {
  expect_error(GgufBuilder().str("tokenizer.ggml.model", "llama").write("no_tokens"),
               "tokenizer.ggml.tokens");
}

TEST(TokenizerGguf, missing_tokenizer_model_is_a_clear_error) {
  expect_error(GgufBuilder().strings("tokenizer.ggml.tokens", {"a"}).write("no_model"),
               "tokenizer.ggml.model");
}

TEST(TokenizerGguf, unknown_tokenizer_model_is_named) {
  expect_error(GgufBuilder()
                   .str("tokenizer.ggml.model", "wordpiece")
                   .strings("tokenizer.ggml.tokens", {"a"})
                   .write("bad_model"),
               "wordpiece");
}

TEST(TokenizerGguf, unknown_bpe_pre_tokenizer_is_named) {
  expect_error(GgufBuilder()
                   .str("tokenizer.ggml.model", "gpt2")
                   .str("tokenizer.ggml.pre", "klingon")
                   .strings("tokenizer.ggml.tokens", {"a", "b"})
                   .strings("tokenizer.ggml.merges", {"a b"})
                   .write("bad_pre"),
               "klingon");
}

TEST(TokenizerGguf, bpe_without_merges_is_a_clear_error) {
  expect_error(GgufBuilder()
                   .str("tokenizer.ggml.model", "gpt2")
                   .str("tokenizer.ggml.pre", "gpt-2")
                   .strings("tokenizer.ggml.tokens", {"a", "b"})
                   .write("no_merges"),
               "tokenizer.ggml.merges");
}

TEST(TokenizerGguf, wrong_types_and_short_arrays_are_clear_errors) {
  expect_error(
      GgufBuilder().str("tokenizer.ggml.model", "llama").str("tokenizer.ggml.tokens", "a").write("tok_str"),
      "tokenizer.ggml.tokens");
  expect_error(GgufBuilder()
                   .str("tokenizer.ggml.model", "llama")
                   .strings("tokenizer.ggml.tokens", {"a", "b"})
                   .floats("tokenizer.ggml.scores", {1.0f})
                   .write("short_scores"),
               "tokenizer.ggml.scores");
  expect_error(GgufBuilder()
                   .str("tokenizer.ggml.model", "llama")
                   .strings("tokenizer.ggml.tokens", {"a", "a"})
                   .write("duplicate"),
               "twice");
}

TEST(TokenizerGguf, spm_adds_space_prefix_merges_by_score_and_falls_back_to_bytes) {
  const SpmVocab v;
  auto tok = open_tok(v.gguf().write("spm"));
  const int32_t hello = v.id(kSp + "Hello");
  const int32_t sp_h = v.id(kSp + "H");
  auto byte = [](int b) { return 3 + b; };

  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("Hello", false, false), (std::vector<int32_t>{hello}));
  EXPECT_EQ(tok->encode("Hello", true, false), (std::vector<int32_t>{1, hello}));
  EXPECT_EQ(tok->encode("Hi", false, false), (std::vector<int32_t>{sp_h, byte('i')}));
  EXPECT_EQ(tok->encode(" ", false, false), (std::vector<int32_t>{v.id(kSp), v.id(kSp)}));
  EXPECT_EQ(tok->encode("\xC3\xA9", false, false), (std::vector<int32_t>{v.id(kSp), byte(0xC3), byte(0xA9)}));
  // "<s>" is a control token: cut out only with parse_special, and the text after it gets a space prefix
  // again.
  EXPECT_EQ(tok->encode("<s>Hello", false, true), (std::vector<int32_t>{1, hello}));
  EXPECT_EQ(
      tok->encode("<s>Hello", false, false),
      (std::vector<int32_t>{v.id(kSp), byte('<'), byte('s'), byte('>'), v.id("H"), v.id("e"), v.id("llo")}));

  EXPECT_EQ(tok->decode({hello}), "Hello");  // the prefixed space is removed again
  EXPECT_EQ(tok->decode({sp_h, byte('i')}), "Hi");
  EXPECT_EQ(tok->decode({v.id(kSp), byte(0xC3), byte(0xA9)}), "\xC3\xA9");
  EXPECT_EQ(tok->decode({1, hello}), " Hello");  // as llama_detokenize without remove_special
  EXPECT_EQ(tok->decode({1, hello}, true), "<s> Hello");
  EXPECT_EQ(tok->token_to_piece(byte('i')), "i");
  EXPECT_TRUE(tok->is_eog(2));
}

TEST(TokenizerGguf, spm_space_prefix_can_be_turned_off) {
  const SpmVocab v;
  auto tok = open_tok(v.gguf().boolean("tokenizer.ggml.add_space_prefix", false).write("spm_noprefix"));
  EXPECT_EQ(tok->encode("Hello", false, false), (std::vector<int32_t>{v.id("H"), v.id("e"), v.id("llo")}));
  EXPECT_EQ(tok->decode({v.id(kSp + "Hello")}), " Hello");
}

TEST(TokenizerGguf, bpe_merges_by_rank_within_pre_tokenized_words) {
  const std::vector<std::string> tokens{"h",         "e",  "l",  "o",           "\xC4\xA0",      "w",
                                        "r",         "d",  "he", "ll",          "llo",           "hello",
                                        "\xC4\xA0w", "or", "ld", "\xC4\xA0wor", "\xC4\xA0world", "<|end|>"};
  const std::vector<std::string> merges{"h e", "l l",          "ll o", "he llo",        "\xC4\xA0 w",
                                        "o r", "\xC4\xA0w or", "l d",  "\xC4\xA0wor ld"};
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  auto tok = open_tok(GgufBuilder()
                          .str("tokenizer.ggml.model", "gpt2")
                          .str("tokenizer.ggml.pre", "gpt-2")
                          .strings("tokenizer.ggml.tokens", tokens)
                          .ints("tokenizer.ggml.token_type", types)
                          .strings("tokenizer.ggml.merges", merges)
                          .u32("tokenizer.ggml.eos_token_id", 17)
                          .write("bpe"));
  EXPECT_EQ(tok->encode("hello world", false, false), (std::vector<int32_t>{11, 16}));
  EXPECT_EQ(tok->encode("hello<|end|>", false, true), (std::vector<int32_t>{11, 17}));
  EXPECT_EQ(tok->encode("held", false, false), (std::vector<int32_t>{8, 14}));
  EXPECT_EQ(tok->decode({11, 16, 17}), "hello world");
  EXPECT_EQ(tok->decode({11, 16, 17}, true), "hello world<|end|>");
  EXPECT_TRUE(tok->is_eog(17));  // eos, and "<|end|>" is an end-of-turn text
  EXPECT_FALSE(tok->add_bos());
}

}  // namespace
}  // namespace tilellm
