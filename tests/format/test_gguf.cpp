// GGUF reader: valid files parse to the values written; every kind of broken file ends in a tilellm::Error
// that names the file and the cause (never a crash).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "../common/gguf_writer.h"
#include "../common/tiny_model.h"
#include "base/error.h"
#include "format/gguf.h"
#include "model/config.h"
#include "model/weights.h"

namespace tilellm {
namespace {

using test::GgufWriter;

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tilellm_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Expects opening `bytes` (written to a file) to throw an Error whose message contains every one of
// `needles`.
void expect_error(const std::vector<uint8_t>& bytes, const std::vector<std::string>& needles) {
  const std::string p = tmp_path("broken.gguf");
  GgufWriter::write_bytes(p, bytes);
  try {
    auto f = GgufFile::open(p);
    ADD_FAILURE() << "no error for a broken file";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
    for (const auto& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
  }
  std::filesystem::remove(p);
}

GgufWriter sample() {
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("a.u32", 4000000000u);
  w.kv_i32("a.i32", -7);
  w.kv_f32("a.f32", 0.25f);
  w.kv_f64("a.f64", -1.5);
  w.kv_bool("a.bool", true);
  w.kv_u64("a.u64", 1ull << 40);
  w.kv_strs("a.strs", {"x", "", "yz"});
  w.kv_f32s("a.f32s", {1.0f, -2.5f});
  w.kv_i32s("a.i32s", {3, -4, 5});
  w.tensor_f32("t0", {3, 2}, {1, 2, 3, 4, 5, 6});
  w.tensor("t1", {32}, 8, std::vector<uint8_t>(34, 7));  // one Q8_0 block
  return w;
}

TEST(Gguf, reads_every_metadata_type_and_tensor_records) {
  const std::string p = tmp_path("ok.gguf");
  sample().write(p);
  auto f = GgufFile::open(p);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("a.u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("a.i32"), -7);
  EXPECT_FLOAT_EQ(float(f->get_float_or("a.f32", 0)), 0.25f);
  EXPECT_DOUBLE_EQ(f->get_float_or("a.f64", 0), -1.5);
  EXPECT_TRUE(f->get_bool_or("a.bool", false));
  EXPECT_EQ(f->get_int("a.u64"), 1ll << 40);
  EXPECT_EQ(f->get_string_array("a.strs"), (std::vector<std::string_view>{"x", "", "yz"}));
  EXPECT_EQ(f->get_float_array("a.f32s"), (std::vector<float>{1.0f, -2.5f}));
  EXPECT_EQ(f->get_int_array("a.i32s"), (std::vector<int64_t>{3, -4, 5}));
  EXPECT_EQ(f->get_int_or("missing", 42), 42);
  EXPECT_THROW(f->get_int("general.architecture"), Error);  // wrong type
  EXPECT_THROW(f->get_string("missing"), Error);
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensor* t0 = f->tensor("t0");
  ASSERT_NE(t0, nullptr);
  EXPECT_EQ(t0->ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t0->nbytes, 24u);
  EXPECT_EQ(reinterpret_cast<const float*>(t0->data)[5], 6.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t0->data) % 32, 0u);
  const GgufTensor* t1 = f->tensor("t1");
  ASSERT_NE(t1, nullptr);
  EXPECT_EQ(t1->type, GgmlType::Q8_0);
  EXPECT_EQ(t1->nbytes, 34u);
  EXPECT_EQ(t1->data[33], 7);
  std::filesystem::remove(p);
}

TEST(Gguf, rejects_bad_magic) {
  auto b = sample().bytes();
  b[0] = 'X';
  expect_error(b, {"bad magic"});
}

TEST(Gguf, rejects_unsupported_version) {
  auto b = sample().bytes();
  b[4] = 9;
  expect_error(b, {"version 9"});
}

TEST(Gguf, rejects_every_truncation_of_the_header) {
  const auto full = sample().bytes();
  // Every prefix up to the first tensor's data must fail cleanly (the tensor data starts at the last 32
  // bytes).
  for (size_t n = 0; n + 32 < full.size(); ++n) {
    const std::string p = tmp_path("trunc.gguf");
    GgufWriter::write_bytes(p, std::vector<uint8_t>(full.begin(), full.begin() + long(n)));
    EXPECT_THROW(GgufFile::open(p), Error) << "prefix of " << n << " bytes";
    std::filesystem::remove(p);
  }
}

TEST(Gguf, rejects_truncated_tensor_data_naming_the_tensor) {
  auto b = sample().bytes();
  b.resize(b.size() - 10);
  expect_error(b, {"tensor 't1'", "outside the file"});
}

TEST(Gguf, rejects_unknown_tensor_type_naming_the_tensor) {
  GgufWriter w;
  w.tensor("weird", {4}, 99, std::vector<uint8_t>(16, 1));
  expect_error(w.bytes(), {"tensor 'weird'", "unknown tensor type id 99"});
}

TEST(Gguf, rejects_tensor_offset_outside_the_file) {
  auto b = sample().bytes();
  // The offset of t1 is the 8 bytes just before the end of its record; find the record after its name.
  const std::string name = "t1";
  auto it = std::search(b.begin(), b.end(), name.begin(), name.end());
  ASSERT_NE(it, b.end());
  const size_t off_pos = size_t(it - b.begin()) + 2 + 4 + 8 + 4;  // name, n_dims, ne[0], type
  const uint64_t huge = uint64_t(1) << 40;
  std::memcpy(&b[off_pos], &huge, 8);
  expect_error(b, {"tensor 't1'", "outside the file"});
}

TEST(Gguf, rejects_row_length_not_a_multiple_of_the_block) {
  GgufWriter w;
  w.tensor("q", {33}, 8, std::vector<uint8_t>(68, 1));
  expect_error(w.bytes(), {"tensor 'q'", "block size"});
}

volatile unsigned g_sink = 0;  // what survives_random_corruption reads goes here

TEST(Gguf, survives_random_corruption) {
  const auto full = sample().bytes();
  std::mt19937 rng(123);
  int errors = 0;
  for (int trial = 0; trial < 400; ++trial) {
    auto b = full;
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] = uint8_t(rng());
    const std::string p = tmp_path("fuzz.gguf");
    GgufWriter::write_bytes(p, b);
    try {
      auto f = GgufFile::open(p);
      // Whatever parsed must lie inside the file and be readable: touching every byte of every tensor
      // would fault if a bound were wrong. The sum goes to a volatile, so the loop cannot be optimised
      // away.
      unsigned sum = 0;
      for (const auto& t : f->tensors()) {
        EXPECT_TRUE(t.data >= f->bytes() && t.data + t.nbytes <= f->bytes() + f->file_size()) << t.name;
        for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
      }
      g_sink = g_sink + sum;
    } catch (const Error&) {
      ++errors;
    }
    std::filesystem::remove(p);
  }
  EXPECT_GT(errors, 50);  // most corruptions are detected; the rest parse to in-bounds tensors
}

TEST(Gguf, rejects_missing_file_and_non_gguf) {
  EXPECT_THROW(GgufFile::open(tmp_path("does-not-exist.gguf")), Error);
  expect_error(std::vector<uint8_t>(100, 'a'), {"bad magic"});
  expect_error(std::vector<uint8_t>(3, 'G'), {"not a GGUF file"});
}

// Architecture-level checks: the tensors a model needs must be present with the shapes its metadata implies.
// `edit` adds to the spec's file before it is written.
void expect_bind_error(const test::TinySpec& spec, const std::vector<std::string>& needles,
                       const std::function<void(test::GgufWriter&)>& edit = {}) {
  const std::string p = tmp_path("arch.gguf");
  test::GgufWriter w = test::tiny_model(spec);
  if (edit) edit(w);
  w.write(p);
  auto f = GgufFile::open(p);
  try {
    const ModelConfig c = ModelConfig::from_gguf(*f);
    ModelWeights::bind(*f, c);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
  std::filesystem::remove(p);
}

TEST(Gguf, model_rejects_wrong_shape_naming_the_tensor) {
  test::TinySpec s;
  s.transpose_tensor = "blk.1.ffn_up.weight";
  expect_bind_error(s, {"blk.1.ffn_up.weight", "shape [80, 48]", "requires [48, 80]"});
}

TEST(Gguf, model_rejects_a_type_it_cannot_load_naming_it_and_what_it_loads) {
  // A Q3_K matrix (as in a Q3_K_M file): refused by tensor and type, with the types that do load.
  test::TinySpec s;
  s.n_embd = 256;
  s.n_head = 4;
  s.omit_tensor = "blk.1.ffn_up.weight";
  expect_bind_error(
      s,
      {"tensor 'blk.1.ffn_up.weight' has type Q3_K, which this engine cannot load (it loads F32, "
       "F16, BF16, Q4_0",
       "Q4_K_M"},
      [&](test::GgufWriter& w) {
        w.tensor("blk.1.ffn_up.weight", {256, s.n_ff}, 11, std::vector<uint8_t>(size_t(s.n_ff) * 110, 0x5a));
      });
}

TEST(Gguf, model_rejects_missing_tensor) {
  test::TinySpec s;
  s.arch = "gemma3";
  s.head_dim = 16;
  s.omit_tensor = "blk.2.attn_k_norm.weight";
  expect_bind_error(s, {"blk.2.attn_k_norm.weight", "missing"});
}

TEST(Gguf, model_rejects_tensor_it_would_ignore) {
  // A bias the llama layer loop does not apply would make the output quietly wrong: the load must refuse it.
  expect_bind_error(
      test::TinySpec{}, {"tensor 'blk.0.attn_q.bias' is not part of the llama architecture"},
      [](test::GgufWriter& w) { w.tensor_f32("blk.0.attn_q.bias", {48}, std::vector<float>(48, 0.5f)); });
}

TEST(Gguf, model_with_experts_rejects_bad_metadata_and_missing_experts_by_name) {
  test::TinySpec s;
  s.arch = "qwen3moe";
  s.head_dim = 10;
  s.n_expert = 16;
  s.n_expert_used = 8;
  s.omit_tensor = "blk.1.ffn_down_exps.weight";
  expect_bind_error(s, {"blk.1.ffn_down_exps.weight", "missing"});
  s.omit_tensor.clear();
  s.n_expert_used = 17;
  expect_bind_error(s, {"qwen3moe.expert_used_count' = 17", "between 1 and expert_count 16"});
  s.n_expert = 0;
  expect_bind_error(s, {"qwen3moe needs metadata 'qwen3moe.expert_count' > 0"});
  // A router without experts in the metadata is a tensor the dense layer loop would ignore.
  const std::string p = tmp_path("router.gguf");
  auto w = test::tiny_model(test::TinySpec{});
  w.tensor_f32("blk.0.ffn_gate_inp.weight", {48, 4}, std::vector<float>(48 * 4, 0.5f));
  w.tensor_f32("rope_factors_long.weight", {4}, std::vector<float>(4, 2.0f));
  w.write(p);
  auto f = GgufFile::open(p);
  try {
    ModelWeights::bind(*f, ModelConfig::from_gguf(*f));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not part of the llama architecture"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(p);
}

// A layer count no file's tensors could hold (found by the GGUF fuzz target: the layers' array was sized
// by it before any tensor was looked up).
TEST(Gguf, model_rejects_a_layer_count_past_its_tensors) {
  test::TinySpec s;
  s.block_count = 1000000;
  expect_bind_error(s, {"llama.block_count is 1000000 but the file has only"});
}

TEST(Gguf, model_rejects_unknown_architecture) {
  test::TinySpec s;
  s.arch = "mamba";
  expect_bind_error(s, {"architecture 'mamba' is not supported"});
}

}  // namespace
}  // namespace tilellm
