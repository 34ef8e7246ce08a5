// Tokenizer tests: ids equal llama.cpp's on recorded goldens for the real models, encode -> decode round
// trips, Utf8Stream on split characters, and clear errors for broken tokenizer metadata.
//
// Models come from $TILELLM_MODELS_DIR or <source>/models (scripts/fetch_models.sh puts them there). A
// missing model fails the test, it is not skipped. Goldens: tests/data/tokenizer/<model>.json, recorded by
// tests/reference/make_tokenizer_goldens.py with llama.cpp's llama-tokenize.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/error.h"
#include "format/gguf.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

namespace tilellm {
namespace {

namespace fs = std::filesystem;

std::string models_dir() {
  if (const char* d = std::getenv("TILELLM_MODELS_DIR")) return d;
  return std::string(TILELLM_SOURCE_DIR) + "/models";
}

constexpr const char* kSmol = "SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr const char* kGemma = "gemma-3-270m-q4_k_m.gguf";

// Loaded once per model for the whole program: Gemma's 262k-token vocabulary takes a moment.
const Tokenizer* load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  const std::string path = models_dir() + "/" + name;
  if (!fs::exists(path)) {
    ADD_FAILURE() << "model file " << path
                  << " is missing: run scripts/fetch_models.sh (or set TILELLM_MODELS_DIR)";
    return nullptr;
  }
  auto gguf = GgufFile::open(path);
  auto tok = Tokenizer::from_gguf(*gguf);
  return cache.emplace(name, std::move(tok)).first->second.get();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// JSON-quoted text for messages; invalid UTF-8 shows as U+FFFD.
std::string show(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? ", " : "") << ids[i];
  s << "]";
  return s.str();
}

struct GoldenResult {
  int matched = 0, total = 0;                // encode ids
  int decode_matched = 0, decode_total = 0;  // decode / decode with special texts
};

// A text field of a golden case, stored as "<name>" or, when not valid UTF-8, "<name>_hex"; false if absent.
bool golden_text(const nlohmann::json& c, const std::string& name, std::string& out) {
  if (c.contains(name)) {
    out = c.at(name).get<std::string>();
    return true;
  }
  if (c.contains(name + "_hex")) {
    out = from_hex(c.at(name + "_hex").get<std::string>());
    return true;
  }
  return false;
}

// Runs every golden case of `json_path` against `tok`: encode must give the ids, and decode of those ids must
// give what llama_detokenize gave (where recorded).
GoldenResult check_goldens(const Tokenizer& tok, const std::string& json_path) {
  GoldenResult r;
  std::ifstream in(json_path);
  EXPECT_TRUE(in.good()) << "missing goldens " << json_path << " (tests/reference/make_tokenizer_goldens.py)";
  if (!in.good()) return r;
  const nlohmann::json doc = nlohmann::json::parse(in);
  int reported = 0;
  for (const auto& c : doc.at("cases")) {
    std::string text;
    golden_text(c, "text", text);
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    const auto got = tok.encode(text, c.at("add_special").get<bool>(), c.at("parse_special").get<bool>());
    ++r.total;
    if (got == want) {
      ++r.matched;
    } else if (reported++ < 10) {
      ADD_FAILURE() << "text " << show(text) << " add_special=" << c.at("add_special")
                    << " parse_special=" << c.at("parse_special") << "\n  llama.cpp: " << ids_str(want)
                    << "\n  ours:      " << ids_str(got);
    }
    for (bool special : {false, true}) {
      std::string decoded;
      if (!golden_text(c, special ? "decoded_special" : "decoded", decoded)) continue;
      ++r.decode_total;
      const std::string ours = tok.decode(want, special);
      if (ours == decoded) {
        ++r.decode_matched;
      } else if (reported++ < 10) {
        ADD_FAILURE() << "decode" << (special ? " (special)" : "") << " of " << ids_str(want)
                      << "\n  llama.cpp: " << show(decoded) << "\n  ours:      " << show(ours);
      }
    }
  }
  return r;
}

void report(const std::string& what, const GoldenResult& r) {
  std::printf("[ goldens  ] %s: %d/%d strings encode as llama.cpp, %d/%d decodes match\n", what.c_str(),
              r.matched, r.total, r.decode_matched, r.decode_total);
  EXPECT_GT(r.total, 0);
  EXPECT_EQ(r.matched, r.total);
  EXPECT_EQ(r.decode_matched, r.decode_total);
}

std::string golden_path(const std::string& model) {
  return std::string(TILELLM_SOURCE_DIR) + "/tests/data/tokenizer/" + fs::path(model).stem().string() +
         ".json";
}

TEST(Tokenizer, smollm2_ids_equal_llama_cpp_goldens) {
  const Tokenizer* tok = load(kSmol);
  ASSERT_NE(tok, nullptr);
  report(kSmol, check_goldens(*tok, golden_path(kSmol)));
}

TEST(Tokenizer, gemma3_ids_equal_llama_cpp_goldens) {
  const Tokenizer* tok = load(kGemma);
  ASSERT_NE(tok, nullptr);
  report(kGemma, check_goldens(*tok, golden_path(kGemma)));
}

// llama.cpp's vocabulary-only test GGUFs (Llama 2 SPM = TinyLlama's tokenizer, Phi-3, Llama 3, Qwen2, GPT-2,
// StarCoder, Command-R, and "default" pre-tokenizer files) live in its source tree, which is the reference
// oracle of tests/reference/llama_cpp_env.sh rather than part of this repository.
std::string llama_vocab_dir() {
  if (const char* d = std::getenv("TILELLM_LLAMA_VOCAB_DIR")) return d;
  std::string cache;
  if (const char* c = std::getenv("TILELLM_CACHE")) {
    cache = c;
  } else if (const char* h = std::getenv("HOME")) {
    cache = std::string(h) + "/.cache/tilellm";
  }
  return cache + "/llama_cpp_python-0.3.36/vendor/llama.cpp/models";
}

TEST(Tokenizer, llama_cpp_reference_vocabularies_equal_goldens) {
  const std::string dir = llama_vocab_dir();
  if (!fs::exists(dir)) {
    GTEST_SKIP() << "llama.cpp's vocabulary test files are not at " << dir
                 << " (run tests/reference/llama_cpp_env.sh build, or set TILELLM_LLAMA_VOCAB_DIR)";
  }
  int files = 0;
  for (const auto& e : fs::directory_iterator(std::string(TILELLM_SOURCE_DIR) + "/tests/data/tokenizer")) {
    const std::string stem = e.path().stem().string();
    if (stem.rfind("ggml-vocab-", 0) != 0) continue;
    SCOPED_TRACE(stem);
    const std::string vocab = dir + "/" + stem + ".gguf";
    ASSERT_TRUE(fs::exists(vocab)) << vocab;
    auto gguf = GgufFile::open(vocab);
    auto tok = Tokenizer::from_gguf(*gguf);
    report(stem + " (" + std::string(tok->model_name()) + "/" + std::string(tok->pre_name()) + ")",
           check_goldens(*tok, e.path().string()));
    ++files;
  }
  EXPECT_GT(files, 0);
}

TEST(Tokenizer, metadata_of_real_models) {
  const Tokenizer* smol = load(kSmol);
  ASSERT_NE(smol, nullptr);
  EXPECT_EQ(smol->model_name(), "gpt2");
  EXPECT_EQ(smol->pre_name(), "smollm");
  EXPECT_EQ(smol->n_vocab(), 49152);
  EXPECT_EQ(smol->bos(), 1);
  EXPECT_EQ(smol->eos(), 2);
  EXPECT_FALSE(smol->add_bos());
  EXPECT_EQ(smol->find_token("<|im_start|>"), 1);
  EXPECT_EQ(smol->find_token("no such token"), -1);
  // llama.cpp's end-of-generation set for SmolLM2: <|endoftext|>, <|im_end|>, <reponame> (a FIM repo marker).
  EXPECT_EQ(smol->eog_ids(), (std::vector<int32_t>{0, 2, 4}));
  EXPECT_TRUE(smol->is_eog(2));
  EXPECT_FALSE(smol->is_eog(1));

  const Tokenizer* gemma = load(kGemma);
  ASSERT_NE(gemma, nullptr);
  EXPECT_EQ(gemma->model_name(), "llama");
  EXPECT_EQ(gemma->n_vocab(), 262144);
  EXPECT_EQ(gemma->bos(), 2);
  EXPECT_EQ(gemma->eos(), 1);
  EXPECT_TRUE(gemma->add_bos());
  EXPECT_EQ(gemma->eot(), gemma->find_token("<end_of_turn>"));
  EXPECT_EQ(gemma->eog_ids(), (std::vector<int32_t>{1, 106, 212}));  // <eos>, <end_of_turn>, </s>
  EXPECT_EQ(gemma->encode("", true, false), (std::vector<int32_t>{2}));
}

TEST(Tokenizer, token_to_piece_renders_bytes_spaces_and_hides_control) {
  const Tokenizer* gemma = load(kGemma);
  ASSERT_NE(gemma, nullptr);
  EXPECT_EQ(gemma->token_to_piece(gemma->find_token("\xE2\x96\x81the")), " the");
  EXPECT_EQ(gemma->token_to_piece(gemma->find_token("<0x41>")), "A");
  EXPECT_EQ(gemma->token_to_piece(gemma->find_token("<end_of_turn>")), "");
  EXPECT_EQ(gemma->token_to_piece(gemma->find_token("<end_of_turn>"), true), "<end_of_turn>");
  EXPECT_EQ(gemma->token_to_piece(-1), "");
  EXPECT_EQ(gemma->token_to_piece(gemma->n_vocab()), "");

  const Tokenizer* smol = load(kSmol);
  ASSERT_NE(smol, nullptr);
  EXPECT_EQ(smol->token_to_piece(smol->find_token("\xC4\xA0world")), " world");  // "Ġworld"
  EXPECT_EQ(smol->token_to_piece(smol->find_token("<|im_end|>")), "");
  EXPECT_EQ(smol->decode(smol->encode("<|im_start|>hi", false, true), true), "<|im_start|>hi");
}

// Random valid UTF-8 from a mix of scripts; no '<' (special-token texts) and no U+2581 (SPM's space mark).
std::string random_utf8(std::mt19937& rng, int max_len) {
  static const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0x20, 0x3B},     {0x3D, 0x7E},      {0x09, 0x0A},     {0xA0, 0x17F},      {0x370, 0x3FF},
      {0x400, 0x4FF},   {0x590, 0x6FF},    {0x900, 0x97F},   {0xE00, 0xE7F},     {0x3040, 0x30FF},
      {0x4E00, 0x4FFF}, {0xAC00, 0xAD00},  {0x2000, 0x206F}, {0x1F300, 0x1F6FF}, {0xE000, 0xE010},
      {0x300, 0x36F},   {0x10000, 0x1000F}};
  std::uniform_int_distribution<int> len_d(0, max_len);
  std::uniform_int_distribution<size_t> range_d(0, ranges.size() - 1);
  std::string s;
  const int len = len_d(rng);
  for (int i = 0; i < len; ++i) {
    const auto [lo, hi] = ranges[range_d(rng)];
    const uint32_t cp = std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
    unicode::append_utf8(s, cp);
  }
  return s;
}

void check_round_trip(const Tokenizer& tok) {
  std::mt19937 rng(42);
  int failures = 0;
  for (int i = 0; i < 400 && failures < 5; ++i) {
    const std::string text = random_utf8(rng, 40);
    const auto ids = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
    const std::string back = tok.decode(ids);
    if (back != text) {
      ++failures;
      ADD_FAILURE() << tok.model_name() << ": " << show(text) << " -> " << ids_str(ids) << " -> "
                    << show(back);
    }
    // Streaming the pieces through Utf8Stream gives the same text, never a partial character.
    Utf8Stream stream;
    std::string streamed;
    for (int32_t id : ids) {
      const std::string out = stream.push(tok.token_to_piece(id));
      for (uint32_t cp : unicode::decode_utf8(out)) ASSERT_NE(cp, unicode::kReplacement) << show(text);
      streamed += out;
    }
    streamed += stream.flush();
    EXPECT_EQ(streamed, text);
  }
}

TEST(Tokenizer, encode_decode_round_trips_random_utf8_bpe) {
  const Tokenizer* tok = load(kSmol);
  ASSERT_NE(tok, nullptr);
  check_round_trip(*tok);
}

TEST(Tokenizer, encode_decode_round_trips_random_utf8_spm) {
  const Tokenizer* tok = load(kGemma);
  ASSERT_NE(tok, nullptr);
  check_round_trip(*tok);
}

// A long mixed text with chat markup (special-token parsing on): every byte comes back on decoding, and every
// occurrence of a special-token text became that one token. (Encoding speed is a benchmark matter, not a
// test's.)
TEST(Tokenizer, long_text_with_markup_round_trips_and_keeps_special_tokens_whole) {
  for (const char* name : {kSmol, kGemma}) {
    const Tokenizer* tok = load(name);
    ASSERT_NE(tok, nullptr);
    const std::string special = std::string(name) == kSmol ? "<|im_start|>" : "<start_of_turn>";
    const int32_t special_id = tok->find_token(special);
    ASSERT_GE(special_id, 0) << name;
    std::string text;
    std::mt19937 rng(7);
    int n_special = 0;
    while (text.size() < 10 * 1024) {
      text += special +
              "user\n<b>The quick brown fox jumps over the lazy dog, 12345 times; caf\xC3\xA9 "
              "\xE4\xBD\xA0\xE5\xA5\xBD! ";
      ++n_special;
      text += random_utf8(rng, 20);
      text += "\n";
    }
    const auto ids = tok->encode(text, false, true);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), special_id), n_special) << name;
    EXPECT_EQ(tok->decode(ids, true), text) << name;
  }
}

// ---- Utf8Stream ----

TEST(Utf8Stream, holds_back_split_multibyte_characters) {
  const std::string text = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x99\x82z";  // a é 你 🙂 z
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Utf8Stream s;
    const std::string first = s.push(text.substr(0, cut));
    // Whatever comes out is whole characters only.
    for (uint32_t cp : unicode::decode_utf8(first)) EXPECT_NE(cp, unicode::kReplacement) << "cut " << cut;
    const std::string rest = s.push(text.substr(cut));
    EXPECT_EQ(first + rest + s.flush(), text) << "cut " << cut;
  }
  // One byte at a time.
  Utf8Stream s;
  std::string out;
  for (char c : text) {
    const std::string o = s.push(std::string_view(&c, 1));
    out += o;
  }
  EXPECT_EQ(out, text);
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Stream, replaces_invalid_bytes_and_flushes_incomplete_tail) {
  Utf8Stream s;
  EXPECT_EQ(s.push("ok\xFF"), "ok\xEF\xBF\xBD");              // never valid: replaced at once
  EXPECT_EQ(s.push("\x80x"), "\xEF\xBF\xBDx");                // stray continuation byte
  EXPECT_EQ(s.push("\xE4\xBD"), "");                          // incomplete: held back
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");                       // flushed as one replacement
  EXPECT_EQ(s.push("\xE4\xBDz"), "\xEF\xBF\xBDz");            // broken by a non-continuation byte
  EXPECT_EQ(s.push("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong form
  EXPECT_EQ(s.push("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(s.flush(), "");
}

// ---- Pre-tokenizer splits (hand-checked against the regexes) ----

std::vector<std::string> split_words(PreTokenizerKind kind, const std::string& text) {
  const auto cpts = unicode::decode_utf8(text);
  std::vector<std::string> words;
  size_t pos = 0;
  for (size_t len : pre_tokenize_lengths(kind, cpts)) {
    std::string w;
    for (size_t i = pos; i < pos + len; ++i) unicode::append_utf8(w, cpts[i]);
    words.push_back(w);
    pos += len;
  }
  return words;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, gpt2_splits_words_numbers_punctuation_and_space_runs) {
  EXPECT_EQ(split_words(PreTokenizerKind::kGpt2, "Hello world's  12ab!?  \n x"),
            (Words{"Hello", " world", "'s", " ", " 12", "ab", "!?", "  \n", " x"}));
  EXPECT_EQ(split_words(PreTokenizerKind::kGpt2, "a   "), (Words{"a", "   "}));
}

TEST(PreTokenizer, smollm_isolates_every_digit) {
  EXPECT_EQ(split_words(PreTokenizerKind::kSmollm, "x 2024!"), (Words{"x", " ", "2", "0", "2", "4", "!"}));
}

TEST(PreTokenizer, llama3_groups_digits_by_three_and_keeps_newlines_apart) {
  EXPECT_EQ(split_words(PreTokenizerKind::kLlama3, "1234567 IT'S\n\n  ok"),
            (Words{"123", "456", "7", " IT", "'S", "\n\n", " ", " ok"}));
  EXPECT_EQ(split_words(PreTokenizerKind::kQwen2, "12 ab"), (Words{"1", "2", " ab"}));
}

TEST(PreTokenizer, default_isolates_punctuation_runs_and_digit_triples) {
  EXPECT_EQ(split_words(PreTokenizerKind::kDefault, "a+b=12345"), (Words{"a", "+", "b", "=", "123", "45"}));
}

TEST(PreTokenizer, unknown_name_is_an_error_naming_it) {
  try {
    pre_tokenizer_info("klingon-bpe");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("klingon-bpe"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pre_tokenizer_info("").kind, PreTokenizerKind::kDefault);
  EXPECT_EQ(pre_tokenizer_info("llama-bpe").kind, PreTokenizerKind::kLlama3);
  EXPECT_EQ(pre_tokenizer_info("qwen2").kind, PreTokenizerKind::kQwen2);
  EXPECT_EQ(pre_tokenizer_info("gpt2").kind, PreTokenizerKind::kGpt2);
}

}  // namespace
}  // namespace tilellm
