// The backend registry (backends/registry.h) end to end, with the test-only "recording" backend of
// tests/backends/recording/ (one folder and one registration line): it is listed and found like the built-in
// ones, its own option reaches its factory, a session runs a whole model on it (its ops delegate to the host
// backend: the logits equal the cpu backend's bit for bit), and it sees each forward pass whole, with the
// decode steps that repeat the previous step's op sequence marked so. Names this build lacks, unknown names
// and options of the wrong backend are errors that say what the build has.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "../common/tiny_model.h"
#include "backends/registry.h"
#include "base/error.h"
#include "model/model.h"
#include "recording/recording_backend.h"
#include "runtime/session.h"

namespace tilellm {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Registry, lists_the_host_backend_first_and_finds_every_backend_by_name_and_mnn_number) {
  const std::vector<const BackendEntry*> all = backends();
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[0]->name, "cpu");
  EXPECT_TRUE(all[0]->host);
  EXPECT_EQ(&host_backend(), all[0]);
  const BackendEntry* rec = find_backend("recording");
  ASSERT_NE(rec, nullptr);
  EXPECT_FALSE(rec->host);
  EXPECT_EQ(find_backend_mnn(99), rec);
  EXPECT_EQ(find_backend_mnn(0), all[0]);
  EXPECT_EQ(&require_backend("recording"), rec);
  EXPECT_EQ(mnn_backend_name(99), "recording");
  EXPECT_EQ(mnn_backend_name(1), "metal");
  EXPECT_NE(std::find(all.begin(), all.end(), rec), all.end());
  EXPECT_NE(device_backend_names().find("recording"), std::string::npos);
}

TEST(Registry, names_it_lacks_say_why_and_what_the_build_has) {
  const std::string metal_name = error_of([] { require_backend("metal"); });
  EXPECT_NE(metal_name.find("backend metal is not in this build"), std::string::npos) << metal_name;
  EXPECT_NE(metal_name.find("this build has cpu (0)"), std::string::npos) << metal_name;
  EXPECT_NE(metal_name.find("recording (99)"), std::string::npos) << metal_name;
  const std::string metal = error_of([] { require_backend_mnn(1); });
  EXPECT_NE(metal.find("Metal is Apple's GPU API"), std::string::npos) << metal;
  const std::string unknown = error_of([] { require_backend("tpu"); });
  EXPECT_NE(unknown.find("unknown backend 'tpu'"), std::string::npos) << unknown;
  const std::string number = error_of([] { require_backend_mnn(5); });
  EXPECT_NE(number.find("unknown backend number 5"), std::string::npos) << number;
  BackendEntry again;
  again.name = "cpu";
  again.mnn_type = 42;
  EXPECT_NE(error_of([&] { register_backend(again); }).find("registered twice"), std::string::npos);
}

TEST(Registry, the_default_device_is_the_first_one_not_emulated_on_the_cpu) {
  const auto dev = [](const char* name, bool emulated) {
    DeviceInfo d;
    d.name = name;
    d.emulated = emulated;
    return d;
  };
  EXPECT_EQ(default_device({}), 0);
  EXPECT_EQ(default_device({dev("pthread CPU", true)}), 0);
  EXPECT_EQ(default_device({dev("llvmpipe", true), dev("other CPU", true)}), 0);
  EXPECT_EQ(default_device({dev("GPU a", false), dev("GPU b", false)}), 0);
  EXPECT_EQ(default_device({dev("pthread CPU", true), dev("GPU", false)}), 1);
  EXPECT_EQ(default_device({dev("CPU a", true), dev("CPU b", true), dev("GPU", false), dev("CPU c", true)}),
            2);
}

TEST(Registry, a_backends_options_are_its_own_flags) {
  const BackendEntry& rec = *find_backend("recording");
  test::recording().clear();
  std::shared_ptr<BackendOptions> o = make_backend_options(rec, {{"--recording-label", "tile"}});
  BackendParams p;
  ThreadPool pool(1);
  p.pool = &pool;
  p.options = o.get();
  rec.make(p);
  EXPECT_EQ(test::recording().label, "tile");
  std::shared_ptr<BackendOptions> d = make_backend_options(rec);  // the default, as the CLI sets it
  p.options = d.get();
  rec.make(p);
  EXPECT_EQ(test::recording().label, "unlabelled");
  const std::string e = error_of([&] { make_backend_options(rec, {{"--cl-cache", "off"}}); });
  EXPECT_NE(e.find("--cl-cache is not an option of the recording backend (it has --recording-label)"),
            std::string::npos)
      << e;
  // The cpu backend's own option: the instruction set of its kernels, checked against what this CPU runs.
  EXPECT_NE(make_backend_options(host_backend(), {{"--isa", "scalar"}}), nullptr);
  const std::string isa = error_of([] { make_backend_options(host_backend(), {{"--isa", "avx1024"}}); });
  EXPECT_NE(isa.find("--isa avx1024: not an instruction set this CPU runs (scalar"), std::string::npos)
      << isa;
}

// number_option: the numeric options of the GPU backends (--cl-gemm-split, --cuda-attn-splits, ...) all parse
// through it, so its words, bounds and refusals are checked here, without a device.
TEST(Registry, a_number_option_takes_auto_its_range_and_off_where_asked) {
  struct Held : BackendOptions {
    int n = -7;
  };
  auto store = [](BackendOptions& o, int n) { static_cast<Held&>(o).n = n; };
  auto parse = [](const OptionSpec& spec, const std::string& v) {
    Held h;
    spec.set(h, v);
    return h.n;
  };
  const OptionSpec plain = number_option("--plain", "help", NumberRange(1, 8), store);
  EXPECT_EQ(plain.default_value, "auto");
  EXPECT_EQ(parse(plain, "auto"), 0);
  EXPECT_EQ(parse(plain, "1"), 1);
  EXPECT_EQ(parse(plain, "8"), 8);
  for (const char* bad : {"0", "9", "off", "", "3x", "x3", "-1", "99999999999999999999"}) {
    const std::string e = error_of([&] { parse(plain, bad); });
    EXPECT_NE(e.find(std::string("--plain: '") + bad + "' is not auto or a number from 1 to 8"),
              std::string::npos)
        << e;
  }
  const OptionSpec split = number_option("--split", "help", NumberRange(1, 8).auto_is(3).off_is(0), store);
  EXPECT_EQ(parse(split, "auto"), 3);
  EXPECT_EQ(parse(split, "off"), 0);
  EXPECT_EQ(parse(split, "5"), 5);
  const std::string e9 = error_of([&] { parse(split, "9"); });
  EXPECT_NE(e9.find("--split: '9' is not auto, off or a number from 1 to 8"), std::string::npos) << e9;
  const OptionSpec pow2 = number_option("--items", "help", NumberRange(16, 256).powers_of_two(), store);
  EXPECT_EQ(parse(pow2, "16"), 16);
  EXPECT_EQ(parse(pow2, "256"), 256);
  for (const char* bad : {"48", "8", "512", "off"}) {
    const std::string e = error_of([&] { parse(pow2, bad); });
    EXPECT_NE(e.find(std::string("--items: '") + bad + "' is not auto or a power of two from 16 to 256"),
              std::string::npos)
        << e;
  }
}

class RegistrySession : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = (std::filesystem::temp_directory_path() /
             ("tilellm_registry_" + std::to_string(::getpid()) + ".gguf"))
                .string();
    test::tiny_model(test::TinySpec{}).write(path_);
    model_ = Model::load(path_).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    std::filesystem::remove(path_);
  }
  static SessionOptions options(const std::string& backend) {
    SessionOptions o;
    o.n_ctx = 32;
    o.n_threads = 2;
    o.n_batch = 8;
    o.backend = backend;
    return o;
  }
  static inline std::string path_;
  static inline Model* model_ = nullptr;
};

TEST_F(RegistrySession, a_session_on_the_recording_backend_runs_the_model_as_the_cpu_does) {
  const std::vector<int32_t> prompt = {1, 5, 9, 17, 3, 40, 2, 11, 60, 7, 30};  // 11 tokens: batches of 8 + 3
  const std::vector<int32_t> next = {12, 13, 14};
  const std::vector<int32_t> more = {50, 51};  // a second prompt after the decode steps, then one step more
  Session cpu(*model_, options("cpu"));
  test::recording().clear();
  SessionOptions ro = options("recording");
  ro.backend_options = make_backend_options(*find_backend("recording"), {{"--recording-label", "session"}});
  Session rec(*model_, ro);
  EXPECT_EQ(rec.backend_name(), "recording");
  EXPECT_EQ(test::recording().label, "session");
  EXPECT_EQ(test::recording().weights_loaded, int(model_->weights().weight_set().matrices.size()));
  const int64_t V = model_->config().n_vocab;
  cpu.eval(prompt.data(), int64_t(prompt.size()));
  rec.eval(prompt.data(), int64_t(prompt.size()));
  EXPECT_TRUE(std::equal(cpu.logits(), cpu.logits() + V, rec.logits()));
  for (int32_t t : next) {
    cpu.eval(&t, 1);
    rec.eval(&t, 1);
    EXPECT_TRUE(std::equal(cpu.logits(), cpu.logits() + V, rec.logits())) << "after token " << t;
  }
  for (const std::vector<int32_t>& toks : {more, std::vector<int32_t>{52}}) {
    cpu.eval(toks.data(), int64_t(toks.size()));
    rec.eval(toks.data(), int64_t(toks.size()));
    EXPECT_TRUE(std::equal(cpu.logits(), cpu.logits() + V, rec.logits()));
  }

  // Seven forward passes, each begun and ended: the prompt's two batches, three decode steps, the second
  // prompt, and a decode step that repeats the last decode step's ops (the prompt between them changes
  // nothing of a decode step).
  const test::Recording& r = test::recording();
  ASSERT_EQ(r.steps.size(), 7u);
  EXPECT_EQ(r.ended, 7);
  const int64_t n_tok[7] = {8, 3, 1, 1, 1, 2, 1}, n_past[7] = {0, 8, 11, 12, 13, 14, 16};
  const bool decode[7] = {false, false, true, true, true, false, true};
  const bool same[7] = {false, false, false, true, true, false, true};
  for (size_t i = 0; i < 7; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r.steps[i].n_tok, n_tok[i]);
    EXPECT_EQ(r.steps[i].n_past, n_past[i]);
    EXPECT_EQ(r.steps[i].decode, decode[i]);
    EXPECT_EQ(r.steps[i].same_as_last, same[i]);
    std::vector<int32_t> want(size_t(n_tok[i]));
    for (int64_t j = 0; j < n_tok[i]; ++j) want[size_t(j)] = int32_t(n_past[i] + j);
    EXPECT_EQ(r.positions[i], want);  // the positions the ops will see, readable at the start
  }
  EXPECT_EQ(r.steps[0].n_logits, 0);  // only the prompt's last batch makes logits
  EXPECT_EQ(r.steps[1].n_logits, 1);

  // Each pass's ops lie between its begin and end, and a step marked same_as_last repeats the previous
  // step's ops exactly (what a backend recording a decode step once relies on).
  std::vector<std::vector<std::string>> passes;
  for (const std::string& op : r.ops) {
    if (op == "begin_forward") {
      passes.emplace_back();
    } else if (op == "end_forward") {
      continue;
    } else {
      ASSERT_FALSE(passes.empty()) << op << " before any begin_forward";
      passes.back().push_back(op);
    }
  }
  ASSERT_EQ(passes.size(), 7u);
  EXPECT_EQ(passes[0].front(), "embed");
  EXPECT_EQ(passes[3], passes[2]);
  EXPECT_EQ(passes[4], passes[3]);
  EXPECT_EQ(passes[6], passes[4]);
  EXPECT_NE(passes[0], passes[1]);  // no logits in the first batch: one matmul fewer
}

TEST_F(RegistrySession, a_backend_this_build_lacks_is_refused_when_the_session_starts) {
  const std::string e = error_of([] { Session s(*model_, options("metal")); });
  EXPECT_NE(e.find("backend metal is not in this build"), std::string::npos) << e;
}

// This program runs with the GPU loaders hidden (CMakeLists.txt): a backend of the build that cannot run
// here is refused with its reason, naming the library it could not load.
TEST_F(RegistrySession, a_backend_without_its_runtime_is_refused_with_the_reason) {
  if (!find_backend("vulkan")) GTEST_SKIP() << "this build has no Vulkan backend";
  const std::string e = error_of([] { Session s(*model_, options("vulkan")); });
  EXPECT_NE(e.find("backend vulkan cannot run on this machine"), std::string::npos) << e;
  EXPECT_NE(e.find("libvulkan.so.1 could not be loaded"), std::string::npos) << e;
}

// The same for CUDA on a machine without the NVIDIA driver (every machine these tests run on but a GPU one).
TEST_F(RegistrySession, cuda_without_the_driver_is_refused_naming_it) {
  const BackendEntry* cuda = find_backend("cuda");
  if (!cuda) GTEST_SKIP() << "this build has no CUDA backend";
  if (cuda->unavailable().empty()) GTEST_SKIP() << "this machine runs CUDA";
  const std::string e = error_of([] { Session s(*model_, options("cuda")); });
  EXPECT_NE(e.find("backend cuda cannot run on this machine"), std::string::npos) << e;
  EXPECT_NE(e.find("libcuda.so.1 could not be loaded"), std::string::npos) << e;
}

}  // namespace
}  // namespace tilellm
