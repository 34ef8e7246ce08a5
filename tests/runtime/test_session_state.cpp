// Session::save_state / load_state (runtime/session_state.cpp): a restored session goes on exactly as the
// uninterrupted one; a file from another model, another context size or cache type, and a truncated or
// damaged file are refused with the reason and leave the session as it was.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "../common/paths.h"
#include "../common/session_state.h"
#include "../common/tiny_model.h"
#include "base/error.h"

namespace tilellm {
namespace {

std::unique_ptr<Model> tiny(const std::string& arch, uint64_t seed) {
  test::TinySpec spec;
  spec.arch = arch;
  spec.seed = seed;
  const std::string p = test::state_path(arch + "_" + std::to_string(seed) + ".gguf");
  test::tiny_model(spec).write(p);
  auto m = Model::load(p);
  std::filesystem::remove(p);  // the mapping stays valid
  return m;
}

SessionOptions options(int64_t n_ctx) {
  SessionOptions so;
  so.n_ctx = n_ctx;
  so.n_threads = 2;
  return so;
}

std::vector<uint8_t> read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& p, const std::vector<uint8_t>& b, size_t n) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(n));
}

// Expects load_state(file) to throw an Error of `kind` whose message holds `needle`, and the session to be
// left as it was (tokens, logits, and what the next step computes).
void expect_refused(Session& s, const std::string& file, ErrorKind kind, const std::string& needle) {
  const std::vector<int32_t> before = s.tokens();
  const std::vector<float> logits(s.logits(), s.logits() + s.model().config().n_vocab);
  try {
    s.load_state(file);
    ADD_FAILURE() << "no error for " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << "names the file: " << e.what();
  }
  EXPECT_EQ(s.tokens(), before);
  EXPECT_EQ(std::vector<float>(s.logits(), s.logits() + s.model().config().n_vocab), logits);
}

TEST(SessionState, restored_session_decodes_like_the_uninterrupted_one_smollm2) {
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto m = Model::load(path);
  const std::vector<int32_t> prompt = m->tokenizer().encode("The history of the printing press", true, false);
  // Saved right after the prompt (a prompt cache); the others save mid-generation.
  test::expect_restore_equals_uninterrupted(*m, options(96), prompt, 0, 20, "smol");
}

TEST(SessionState, restored_session_decodes_like_the_uninterrupted_one_gemma3_f32_cache) {
  // Sliding-window layers, another tokenizer, the f32 cache and the exact float path.
  const std::string path = test::model_path(test::kGemma3);
  ASSERT_MODEL(path);
  auto m = Model::load(path);
  SessionOptions so = options(96);
  so.kv_type = GgmlType::F32;
  so.activations = ActivationMode::F32;
  const std::vector<int32_t> prompt = m->tokenizer().encode("Rivers of the world:", true, false);
  test::expect_restore_equals_uninterrupted(*m, so, prompt, 5, 12, "gemma");
}

TEST(SessionState, restored_session_decodes_like_the_uninterrupted_one_tiny_models) {
  for (const char* arch : {"llama", "gemma3"}) {
    auto m = tiny(arch, 5);
    const std::vector<int32_t> prompt = {3, 17, 40, 9, 22, 61,
                                         5, 33, 12, 7, 50};  // past gemma3's window of 5
    test::expect_restore_equals_uninterrupted(*m, options(64), prompt, 3, 20, std::string("tiny_") + arch);
  }
}

TEST(SessionState, empty_session_round_trips) {
  auto m = tiny("llama", 5);
  Session a(*m, options(32));
  const std::string file = test::state_path("empty.tlss");
  a.save_state(file);
  Session b(*m, options(32));
  const int32_t t[2] = {4, 9};
  b.eval(t, 2);
  b.load_state(file);
  EXPECT_EQ(b.n_past(), 0);
  EXPECT_TRUE(b.tokens().empty());
  EXPECT_FALSE(b.has_logits());
  std::filesystem::remove(file);
}

TEST(SessionState, the_callers_data_travels_with_the_session) {
  auto m = tiny("llama", 5);
  Session a(*m, options(32));
  const int32_t t[3] = {4, 9, 20};
  a.eval(t, 3);
  const std::string file = test::state_path("app.tlss");
  const std::string data = std::string("{\"messages\": 2}\0binary\xff", 22);
  a.save_state(file, data);
  Session b(*m, options(32));
  std::string got = "old";
  b.load_state(file, &got);
  EXPECT_EQ(got, data);
  EXPECT_EQ(b.tokens(), a.tokens());
  a.save_state(file);  // none
  b.load_state(file, &got);
  EXPECT_EQ(got, "");
  std::filesystem::remove(file);
}

TEST(SessionState, refuses_another_model_context_or_cache_type_and_broken_files) {
  auto m = tiny("llama", 5);
  auto other = tiny("llama", 6);  // the same architecture and metadata, other weights
  const std::string file = test::state_path("saved.tlss");
  const std::vector<int32_t> prompt = {3, 17, 40, 9, 22, 61, 5};
  {
    Session s(*m, options(64));
    s.eval(prompt.data(), int64_t(prompt.size()));
    s.save_state(file);
  }
  const int32_t probe[3] = {8, 2, 30};
  {
    Session s(*other, options(64));
    s.eval(probe, 3);
    expect_refused(s, file, ErrorKind::Mismatch, "saved from another model");
  }
  {
    Session s(*m, options(48));
    s.eval(probe, 3);
    expect_refused(s, file, ErrorKind::Mismatch, "context of 64 tokens; this session has 48");
  }
  {
    SessionOptions so = options(64);
    so.kv_type = GgmlType::F32;
    Session s(*m, so);
    s.eval(probe, 3);
    expect_refused(s, file, ErrorKind::Mismatch, "KV cache is f16; this session's is f32");
  }
  const std::vector<uint8_t> good = read_bytes(file);
  Session s(*m, options(64));
  s.eval(probe, 3);
  const std::string broken = test::state_path("broken.tlss");
  // Cut anywhere: inside the magic, inside the header, inside the tokens, inside the KV rows, one byte short.
  const size_t header = 72 + 8;  // the fixed header and a short name
  for (size_t n : {size_t(5), size_t(40), header + 10, good.size() / 2, good.size() - 1}) {
    write_bytes(broken, good, n);
    expect_refused(s, broken, ErrorKind::Corrupt, n < 8 ? "not a TileLLM session file" : "truncated");
  }
  // One byte changed in the KV rows: the checksum catches it.
  std::vector<uint8_t> flipped = good;
  flipped[good.size() - 100] ^= 0x40;
  write_bytes(broken, flipped, flipped.size());
  expect_refused(s, broken, ErrorKind::Corrupt, "checksum");
  // Bytes added at the end.
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  write_bytes(broken, longer, longer.size());
  expect_refused(s, broken, ErrorKind::Corrupt, "damaged");
  // Not there at all.
  expect_refused(s, test::state_path("missing.tlss"), ErrorKind::Io, "cannot open");
  // The good file still loads into the same session.
  s.load_state(file);
  EXPECT_EQ(s.tokens(), prompt);
  std::filesystem::remove(file);
  std::filesystem::remove(broken);
}

TEST(SessionState, a_failed_save_leaves_no_file) {
  auto m = tiny("llama", 5);
  Session s(*m, options(32));
  const int32_t t[2] = {4, 9};
  s.eval(t, 2);
  const std::string dir = test::state_path("no-such-dir");
  try {
    s.save_state(dir + "/x.tlss");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(ErrorKind::Io)) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(SessionState, tokens_follow_eval_and_truncate) {
  auto m = tiny("llama", 5);
  Session s(*m, options(32));
  EXPECT_FALSE(s.has_logits());
  const int32_t t[4] = {4, 9, 11, 2};
  s.eval(t, 4);
  EXPECT_EQ(s.tokens(), std::vector<int32_t>(t, t + 4));
  EXPECT_TRUE(s.has_logits());
  s.truncate(2);
  EXPECT_EQ(s.tokens(), std::vector<int32_t>(t, t + 2));
  EXPECT_FALSE(s.has_logits());
}

}  // namespace
}  // namespace tilellm
