// The whole model on Vulkan against the CPU backend's float path (../gpu_common/compare_greedy.h): SmolLM2
// under the device as it is and under constrained profiles, Gemma 3 (sliding-window layers, GELU, an
// embedding table larger than lavapipe's 128 MiB storage range, so split over buffers), the integer decode
// products against the float path on the same roundings, and the self-check
// catching a deliberately broken shader, whose op then runs on the CPU with the output unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "../common/batch_check.h"
#include "../common/paths.h"
#include "../gpu_common/compare_experts.h"
#include "../gpu_common/compare_greedy.h"
#include "../gpu_common/compare_tiny.h"
#include "../gpu_common/hybrid_prefill.h"
#include "../gpu_common/rounded_cpu.h"
#include "../gpu_common/session_state.h"
#include "backends/vulkan/vulkan_backend.h"
#include "vulkan_test.h"

namespace tilellm {
namespace {

// The reference of the integer decode path: one-token products' inputs rounded (../gpu_common/rounded_cpu.h).
BackendEntry rounded_cpu_decode_entry() {
  return test::rounded_cpu_entry("rounded-cpu-decode", 97, true);
}
TILELLM_REGISTER_BACKEND(rounded_cpu_decode_entry);

const uint32_t kBrokenAdd[] = {
#include "broken_add.inc"
};

void compare(const char* profile, GgmlType kv_type, double bound, const char* model = test::kSmolLM2,
             const char* golden = "smollm2.json", int prompts = test::kGreedyPrompts,
             WeightsMode weights = WeightsMode::Native) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  test::GreedyCase g;
  g.backend = "vulkan";
  g.device = test::vulkan_test_device();
  g.profile = profile;
  g.kv_type = kv_type;
  g.rel_bound = bound;
  g.model_file = model;
  g.golden = golden;
  g.n_prompts = prompts;
  g.weights = weights;
  test::compare_greedy(g);
}

// f16 cache: rows that differ in their last float bits may round to neighbouring halves (~5e-4 relative,
// and packHalf2x16's rounding is the driver's), so the logits may differ by about that much; bound 1e-3.
// Continuous batching on the device: a BatchSession's caches, one per sequence, in device memory
// (BackendParams::kv_seqs); every pass's logits those of one Vulkan session per sequence
// (../common/batch_check.h): the float path, llama with an f32 cache in buffers, gemma3 (its sliding window)
// with an f16 cache in images. Prompts on the float tiles: the cooperative-matrix GEMM rounds its inputs to
// fp16, so where the device has it (the H200) a prompt cut into other chunks than the session's differs by
// ~2e-3, which would hide what this checks.
TEST(VulkanModel, batch_of_sequences_equals_a_session_each) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  const std::pair<const char*, KvMemory> cases[] = {{"llama", KvMemory::Buffer}, {"gemma3", KvMemory::Image}};
  for (const auto& [arch, mem] : cases) {
    SCOPED_TRACE(std::string(arch) + (mem == KvMemory::Image ? ", KV in images" : ", KV in buffers"));
    auto model = Model::load(test::gpu_tiny_model(arch));
    SessionOptions so = test::float_options(mem == KvMemory::Image ? GgmlType::F16 : GgmlType::F32);
    so.backend = "vulkan";
    so.device = test::vulkan_test_device();
    so.kv_memory = mem;
    so.n_batch = 32;
    so.backend_options = make_backend_options(require_backend("vulkan"), {{"--vk-coopmat", "off"}});
    test::check_batch_against_sessions(*model, so, 1e-4);
  }
}

TEST(VulkanModel, smollm2_greedy_equals_cpu_float_path) {
  compare("none", GgmlType::F16, 1e-3);
}

// f32 cache: only float summation order separates the two; bound 1e-4.
TEST(VulkanModel, smollm2_greedy_equals_cpu_float_path_f32_cache_powervr_cxt) {
  compare("powervr-cxt", GgmlType::F32, 1e-4);
}

TEST(VulkanModel, smollm2_greedy_equals_cpu_float_path_no_16bit_int8b0) {
  compare("no-16bit", GgmlType::F32, 1e-4, test::kSmolLM2, "smollm2.json", 1, WeightsMode::Int8B0);
}

// The integer decode products (--activations q8, where the device has integer dot products) against the
// float path fed the same roundings of each one-token product's input (../gpu_common/rounded_cpu.h), on the
// tiny random models with every matrix in a block format. The two agree to float summation order (~1e-7 of
// the largest logit) until a sum in another order moves an activation across a rounding boundary (one step
// of 1/127 of its block's largest value): from then on the logits differ by ~1e-2 (measured 1.1e-2 here).
// Leaving the rounding out altogether moves them by 3e-3 to 0.14 (the unrounded reference, printed). So:
// every step within 2e-2, and the median step within 1e-5 — a rounding that differed anywhere but at rare
// boundaries would fail the second.
TEST(VulkanModel, tiny_models_integer_decode_equals_the_float_path_on_the_same_roundings) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  for (const char* arch : {"llama", "gemma3"}) {
    for (WeightsMode m : {WeightsMode::Int4B64, WeightsMode::Int8B0}) {
      test::TinyCase c;
      c.arch = arch;
      c.backend = "vulkan";
      c.device = test::vulkan_test_device();
      c.reference = "rounded-cpu-decode";
      c.activations = ActivationMode::Quantized;
      c.weights = m;
      c.bound = 2e-2;
      std::vector<double> steps;
      const double worst = test::compare_tiny(c, &steps);
      std::sort(steps.begin(), steps.end());
      const double median = steps[steps.size() / 2];
      EXPECT_LE(median, 1e-5) << arch << " --weights " << weights_mode_name(m);
      c.reference = "cpu";  // not rounded: what the rounding moves
      c.bound = 1.0;
      const double unrounded = test::compare_tiny(c);
      std::printf(
          "%s --weights %s, integer decode: worst relative logit difference %.3g, median %.3g; against the "
          "unrounded path %.3g\n",
          arch, weights_mode_name(m), worst, median, unrounded);
    }
  }
}

// --gpu-memory image: every matrix but the embedding table (tied to the output) read from an image by the
// products' _image variants; f32 cache, bound 1e-4 as above (the same exact weights, other sum orders).
// One SmolLM2 prompt on Vulkan in the cache type, against the CPU's float path within `bound`.
test::GreedyCase one_prompt(GgmlType kv_type, double bound) {
  test::GreedyCase g;
  g.backend = "vulkan";
  g.device = test::vulkan_test_device();
  g.kv_type = kv_type;
  g.rel_bound = bound;
  g.n_prompts = 1;
  return g;
}

TEST(VulkanModel, smollm2_greedy_with_weights_in_images_equals_cpu_float_path) {
  test::GreedyCase g = one_prompt(GgmlType::F32, 1e-4);
  g.gpu_memory = GpuMemory::Image;
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  testing::internal::CaptureStderr();
  test::compare_greedy(g);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(
      err.find("note: Vulkan --gpu-memory image: weight token_embd.weight stays a buffer: the embedding "
               "kernel reads it (the output matrix is tied to it)"),
      std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

// --kv-memory image: the FB-KV in RGBA16F images (the KV shaders' _kvimage variants); f16 cache, bound 1e-3
// as for the f16 buffer cache.
TEST(VulkanModel, smollm2_greedy_with_the_kv_cache_in_images_equals_cpu_float_path) {
  test::GreedyCase g = one_prompt(GgmlType::F16, 1e-3);
  g.kv_memory = KvMemory::Image;
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  test::compare_greedy(g);
}

TEST(VulkanModel, gemma3_greedy_equals_cpu_float_path_f32_cache) {
  compare("none", GgmlType::F32, 1e-4, test::kGemma3, "gemma3.json", 1);
}

// Models with experts: the mixture through Backend::moe_ffn's default, on the device's ops; f32 cache, bound
// 1e-4 as above.
TEST(VulkanModel, experts_equal_cpu_float_path) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  test::compare_experts("vulkan", test::vulkan_test_device(), ::testing::TempDir());
}

// --prefill cpu: prompts on the CPU's tiles, their KV rows sent up, decode on the device (captured and
// replayed; the second prompt brings the decoded rows down first).
TEST(VulkanModel, hybrid_prefill_equals_the_device_path) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  test::expect_hybrid_prefill_equals_the_device_path("vulkan", test::vulkan_test_device(),
                                                     WeightsMode::Native);
}

TEST(VulkanModel, auto_prefill_measures_once_and_keeps_the_device_logits) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  test::expect_auto_prefill_measures_once("vulkan", test::vulkan_test_device(),
                                          ::testing::TempDir() + "vulkan_auto_prefill", "--vk-cache",
                                          {"--vk-subgroups", "off"});
}

// Save/restore with the cache in device memory (../gpu_common/session_state.h; the hybrid session's host
// copy is the session's, the same for every device backend, and checked on OpenCL). Few decode steps:
// lavapipe takes seconds per step.
TEST(VulkanModel, restored_session_decodes_like_the_uninterrupted_one) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  test::expect_device_restore_equals_uninterrupted("vulkan", test::vulkan_test_device(), false, 1, 2);
}

// The same with the cache in RGBA16F images: its rows read back and written again as image lines.
TEST(VulkanModel, restored_session_with_the_kv_cache_in_images_decodes_like_the_uninterrupted_one) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  test::expect_device_restore_equals_uninterrupted("vulkan", test::vulkan_test_device(), false, 1, 2,
                                                   KvMemory::Image);
}

// The add shader replaced by one that writes acc = x (tests/vulkan/broken_add.comp): the self-check names
// it, its op falls back to the CPU, and the model's output is still the float path's.
TEST(VulkanModel, self_check_catches_a_broken_shader) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  VulkanBackendOptions o;
  o.device = test::vulkan_test_device();
  o.max_in_elems = o.max_out_elems = 4096;
  o.max_width = 64;
  o.test_pipeline = "add";
  o.test_spirv.assign(std::begin(kBrokenAdd), std::end(kBrokenAdd));
  testing::internal::CaptureStderr();
  VulkanBackend be(o);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("Vulkan pipeline add failed its self-check"), std::string::npos) << err;
  EXPECT_EQ(be.cpu_fallbacks(), std::vector<std::string>{"add"});
  std::vector<float> acc = {1.0f, 2.0f, 3.0f};
  const std::vector<float> x = {0.5f, -1.0f, 4.0f};
  be.add(acc.data(), x.data(), 3);
  EXPECT_EQ(acc, (std::vector<float>{1.5f, 1.0f, 7.0f}));
}

}  // namespace
}  // namespace tilellm
