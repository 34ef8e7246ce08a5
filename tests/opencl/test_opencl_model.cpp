// The whole model on OpenCL against the CPU backend's float path (--activations f32, the same KV cache type):
// greedy continuations of SmolLM2-135M (and Gemma 3 270M) for the first golden prompts (tests/data/goldens/)
// must be equal token for token, or differ only at a near-tie that the logits show.
//
// At every step the two logit vectors must agree within a bound relative to their largest magnitude
// (justified at each test below); a different greedy token is accepted only when the CPU's margin between the
// two candidates is within twice the largest logit difference of that step, i.e. the numerical disagreement
// alone can flip it. The comparison of that prompt stops there (the continuations no longer share a prefix).
//
// Cost on PoCL (2 cores): prompts are cut to 8 tokens and 6 tokens are generated, so a SmolLM2 test runs in
// seconds; the Gemma one, whose matrices are F32 on the device, in about 10.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "../common/paths.h"
#include "../gpu_common/batch_tiny.h"
#include "../gpu_common/compare_experts.h"
#include "../gpu_common/compare_greedy.h"
#include "../gpu_common/compare_tiny.h"
#include "../gpu_common/hybrid_prefill.h"
#include "../gpu_common/session_state.h"
#include "backends/opencl/device.h"
#include "forward_rig.h"
#include "model/model.h"
#include "runtime/session.h"
#include "test_device.h"

namespace tilellm {
namespace {

constexpr int kPrompts = test::kGreedyPrompts;
using test::argmax;
using test::float_options;
using test::relative_difference;

// The options on the test's OpenCL device.
void to_device(SessionOptions& so) {
  so.backend = "opencl";
  so.device = test::opencl_test_device();
}

void compare_greedy(const std::string& profile, GgmlType kv_type, double rel_bound,
                    const char* model_file = test::kSmolLM2, const char* golden = "smollm2.json",
                    int n_prompts = kPrompts, WeightsMode weights = WeightsMode::Native) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  test::GreedyCase g;
  g.backend = "opencl";
  g.device = test::opencl_test_device();
  g.profile = profile;
  g.kv_type = kv_type;
  g.rel_bound = rel_bound;
  g.model_file = model_file;
  g.golden = golden;
  g.n_prompts = n_prompts;
  g.weights = weights;
  test::compare_greedy(g);
}

// Continuous batching on the device (../gpu_common/batch_tiny.h).
TEST(OpenclModel, batch_of_sequences_equals_a_session_each) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  test::check_tiny_batch("opencl", test::opencl_test_device());
}

// Models with experts: the mixture through Backend::moe_ffn's default, on the device's ops (f32 cache: float
// summation order only; bound 1e-4).
TEST(OpenclModel, experts_equal_cpu_float_path) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  test::compare_experts("opencl", test::opencl_test_device(), ::testing::TempDir());
}

// The default f16 cache: K/V rows that differ in their last float bits can round to neighbouring halves
// (2^-11 apart, ~5e-4 relative), so the logits may differ by about that much; bound 1e-3.
TEST(OpenclModel, smollm2_greedy_equals_cpu_float_path) {
  compare_greedy("none", GgmlType::F16, 1e-3);
}

// A constrained profile end to end (4 KiB of local memory, work-group multiple 32, no subgroups) with an f32
// cache, where only float rounding separates the two (measured 1.4e-6 relative); bound 1e-4.
TEST(OpenclModel, smollm2_greedy_equals_cpu_float_path_f32_cache_powervr_profile) {
  compare_greedy("powervr-rogue", GgmlType::F32, 1e-4);
}

// Gemma 3 270M: what SmolLM2 lacks — q/k norms and post-norms (RMSNorm in place), local layers with their own
// RoPE table and a sliding window, GELU, and K-quant weights (F32 on the device). One prompt (slow on PoCL:
// the matrices are F32 there). f32 cache: float rounding only, as above (measured 1.6e-6); bound 1e-4.
TEST(OpenclModel, gemma3_greedy_equals_cpu_float_path_f32_cache) {
  compare_greedy("none", GgmlType::F32, 1e-4, test::kGemma3, "gemma3.json", 1);
}

// --weights int8b0 on both (the device's INT8B0 rows against the CPU's float path over the same
// conversion's exact values): the same weights, so float rounding only, as above; f32 cache, bound 1e-4.
TEST(OpenclModel, smollm2_greedy_int8b0_equals_cpu_float_path_f32_cache) {
  compare_greedy("none", GgmlType::F32, 1e-4, test::kSmolLM2, "smollm2.json", kPrompts, WeightsMode::Int8B0);
}

// Activations stay on the device: a forward pass reads back only the logits (one download, prefill or
// decode), one without logits reads back nothing, and the host copy of an activation array is fetched only
// when asked for (once). The logits are the CPU float path's (f32 cache: float rounding only, bound 1e-4 as
// above).
void expect_hybrid_prefill_equals_the_device_path(WeightsMode weights) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  test::expect_hybrid_prefill_equals_the_device_path("opencl", test::opencl_test_device(), weights);
}

TEST(OpenclModel, hybrid_prefill_equals_the_device_path) {
  expect_hybrid_prefill_equals_the_device_path(WeightsMode::Native);
}

TEST(OpenclModel, hybrid_prefill_int8b0_equals_the_device_path) {
  expect_hybrid_prefill_equals_the_device_path(WeightsMode::Int8B0);
}

// A decode step's norms: the first block's input norm is the only norm kernel; every later one, the output
// norm included, rides on the product before it (the residual add with it) and is applied by the products
// that read it. No residual add runs as a kernel of its own.
TEST(OpenclModel, a_decode_step_runs_one_norm_kernel_and_no_add) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so = float_options(GgmlType::F16);
  so.n_batch = 16;
  so.backend = "opencl";
  so.device = test::opencl_test_device();
  so.profile_kernels = true;
  Session s(*model, so);
  const std::vector<int32_t> prompt = {1, 504, 3492, 282, 253, 1345, 30, 2600};
  s.eval(prompt.data(), int64_t(prompt.size()));
  const int32_t tok = argmax(s.logits(), model->config().n_vocab);
  s.reset_kernel_times();
  s.eval(&tok, 1);
  auto calls = [&](std::string_view name) {
    for (const KernelTime& k : s.kernel_times())
      if (k.name == name) return k.calls;
    return int64_t(0);
  };
  std::string seen;
  for (const KernelTime& k : s.kernel_times()) seen += " " + k.name + " x" + std::to_string(k.calls);
  EXPECT_EQ(calls("rmsnorm"), 1) << seen;
  EXPECT_EQ(calls("add"), 0) << seen;
  EXPECT_EQ(calls("add_rmsnorm"), 0) << seen;
  EXPECT_EQ(calls("rms_scale"), 0) << seen;
}

// --cl-flush submits the queue every N launches: the same kernels in the same order, so the same logits,
// and one flush per N launches (none when off).
TEST(OpenclModel, flushing_every_few_launches_keeps_the_logits) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  const int64_t V = model->config().n_vocab;
  test::OpenclForwardRig off(*model, 32, 8, GgmlType::F16, "", "", false, false, 0);
  test::OpenclForwardRig every3(*model, 32, 8, GgmlType::F16, "", "", false, false, 3);
  const std::array<int32_t, 5> prompt = {504, 2365, 6354, 16438, 27003};
  off.run(prompt.data(), int64_t(prompt.size()), 0);
  every3.run(prompt.data(), int64_t(prompt.size()), 0);
  EXPECT_EQ(off.logits, every3.logits);
  int64_t n_past = int64_t(prompt.size());
  for (int step = 0; step < 2; ++step) {
    const int32_t t = argmax(off.logits.data(), V);
    const uint64_t l0 = every3.be->runtime().launches(), f0 = every3.be->runtime().flushes();
    off.run(&t, 1, n_past);
    every3.run(&t, 1, n_past++);
    EXPECT_EQ(off.logits, every3.logits) << "step " << step;
    const uint64_t launches = every3.be->runtime().launches() - l0;
    EXPECT_GT(launches, 30u);
    EXPECT_NEAR(double(every3.be->runtime().flushes() - f0), double(launches) / 3.0, 1.0) << "step " << step;
  }
  EXPECT_GT(off.be->runtime().launches(), 60u);
  EXPECT_EQ(off.be->runtime().flushes(), 0u);
}

TEST(OpenclModel, auto_prefill_measures_once_and_keeps_the_device_logits) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  test::expect_auto_prefill_measures_once("opencl", test::opencl_test_device(),
                                          ::testing::TempDir() + "opencl_auto_prefill", "--cl-cache",
                                          {"--cl-gemm-split", "off"});
}

// Save/restore with the cache in device memory (../gpu_common/session_state.h).
TEST(OpenclModel, restored_session_decodes_like_the_uninterrupted_one) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  test::expect_device_restore_equals_uninterrupted("opencl", test::opencl_test_device(), false, 3, 6);
}

TEST(OpenclModel, restored_hybrid_session_decodes_like_the_uninterrupted_one) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  test::expect_device_restore_equals_uninterrupted("opencl", test::opencl_test_device(), true, 3, 6);
}

TEST(OpenclModel, host_kv_cache_has_storage_only_where_the_host_uses_it) {
  // With prompts and decode on the device the host cache would never be read, so it keeps its geometry
  // only (a 4096-position f16 cache of a 7B model is 2 GiB of host memory); hybrid prefill and the CPU
  // backend fill it. The device session still answers as the CPU one does.
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so = float_options(GgmlType::F16);
  Session cpu(*model, so);
  EXPECT_GT(cpu.host_kv_bytes(), 0u);
  to_device(so);
  Session gpu(*model, so);
  EXPECT_EQ(gpu.host_kv_bytes(), 0u);
  so.prefill = PrefillMode::Cpu;
  Session hybrid(*model, so);
  EXPECT_EQ(hybrid.host_kv_bytes(), cpu.host_kv_bytes());
  const std::array<int32_t, 8> prompt = {504, 2365, 6354, 16438, 27003, 690, 260, 23790};  // golden case 0
  cpu.eval(prompt.data(), int64_t(prompt.size()));
  gpu.eval(prompt.data(), int64_t(prompt.size()));
  const int64_t V = model->config().n_vocab;
  EXPECT_EQ(argmax(cpu.logits(), V), argmax(gpu.logits(), V));
  EXPECT_EQ(gpu.host_kv_bytes(), 0u);
}

// The integer prompt GEMM in a whole forward pass (built with plain integer multiply-adds, as on a device
// without a dot product): SmolLM2 over a prompt of 70 tokens (past the GEMM's 64-token tile, one download),
// then 3 decode steps (their products in integers too: matvec_q8_*, the norms' and attention's output
// rounded by the kernels that write them, the first layer's norm included, so that a step launches no
// quantize_q8), against the CPU's float path. The prompt's products take int8-rounded inputs (each
// up to max|x| / 254 of its block off), so the logits move by more than float rounding: as much as the CPU's
// own
// --activations q8 path moves them (Q8_0/Q8_1 rounding, a different but equally fine one; measured on PoCL:
// 1.4e-2 against the CPU's 2.2e-2 after the prompt). Bound: twice the CPU q8 path's difference at each step,
// and the same greedy token wherever the float path's top two logits are further apart than the difference.
TEST(OpenclModel, integer_prompt_gemm_forward_stays_as_near_the_cpu_float_path_as_its_q8_path) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  const int64_t V = model->config().n_vocab;
  test::OpenclForwardRig rig(*model, 128, 80, GgmlType::F32, "", "", /*q8_plain_dot=*/true,
                             /*profiling=*/true);
  SessionOptions so = float_options(GgmlType::F32);
  so.n_batch = 80;
  so.n_ctx = 128;
  Session cpu(*model, so);
  SessionOptions sq = so;
  sq.activations = ActivationMode::Quantized;
  Session cq(*model, sq);
  std::vector<int32_t> prompt(70);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(300 + 37 * i % 9000);
  const uint64_t d0 = rig.be->downloads();
  rig.run(prompt.data(), int64_t(prompt.size()), 0);
  EXPECT_EQ(rig.be->downloads() - d0, 1u);
  cpu.eval(prompt.data(), int64_t(prompt.size()));
  cq.eval(prompt.data(), int64_t(prompt.size()));
  int64_t n_past = int64_t(prompt.size());
  for (int step = 0; step < 4; ++step) {
    const double got = relative_difference(cpu.logits(), rig.logits.data(), V);
    const double cpu_q8 = relative_difference(cpu.logits(), cq.logits(), V);
    EXPECT_LE(got, 2.0 * cpu_q8) << "step " << step;
    const int32_t t = argmax(cpu.logits(), V);
    float peak = 0.0f, second = -INFINITY;
    for (int64_t i = 0; i < V; ++i) {
      peak = std::max(peak, std::abs(cpu.logits()[i]));
      if (i != t) second = std::max(second, cpu.logits()[i]);
    }
    if (cpu.logits()[t] - second > 2.0 * got * peak) {
      EXPECT_EQ(argmax(rig.logits.data(), V), t) << "step " << step;
    }
    if (step == 3) break;
    rig.be->reset_kernel_times();
    rig.run(&t, 1, n_past++);
    const std::vector<KernelTime> times = rig.be->kernel_times();
    int64_t rounding = 0;
    for (const KernelTime& e : times) rounding += e.name == "quantize_q8" ? e.calls : 0;
    EXPECT_EQ(rounding, 0) << "step " << step;
    cpu.eval(&t, 1);
    cq.eval(&t, 1);
  }
}

TEST(OpenclModel, forward_downloads_only_the_logits) {
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  const int64_t V = model->config().n_vocab, E = model->config().n_embd;
  test::OpenclForwardRig rig(*model, 64, 16, GgmlType::F32);
  SessionOptions so = float_options(GgmlType::F32);
  so.n_batch = 16;
  Session cpu(*model, so);

  const std::array<int32_t, 8> prompt = {504, 2365, 6354, 16438, 27003, 690, 260, 23790};  // golden case 0
  uint64_t d0 = rig.be->downloads();
  rig.run(prompt.data(), int64_t(prompt.size()), 0);
  EXPECT_EQ(rig.be->downloads() - d0, 1u);
  cpu.eval(prompt.data(), int64_t(prompt.size()));
  EXPECT_LE(relative_difference(cpu.logits(), rig.logits.data(), V), 1e-4);

  int64_t n_past = int64_t(prompt.size());
  for (int step = 0; step < 3; ++step) {
    const int32_t t = argmax(cpu.logits(), V);
    d0 = rig.be->downloads();
    rig.run(&t, 1, n_past++);
    EXPECT_EQ(rig.be->downloads() - d0, 1u) << "step " << step;
    cpu.eval(&t, 1);
    EXPECT_LE(relative_difference(cpu.logits(), rig.logits.data(), V), 1e-4) << "step " << step;
  }

  const int32_t t = argmax(cpu.logits(), V);
  d0 = rig.be->downloads();
  rig.run(&t, 1, n_past, false);
  EXPECT_EQ(rig.be->downloads(), d0);
  // The residual stream of that token: fetched on request, once. Its host copy was never written before
  // (zeros since allocation; every op wrote the device copy), so finite non-zero values are the download's.
  const float* x = rig.s.x.as<float>();
  EXPECT_EQ(x[0], 0.0f);
  rig.be->to_host(x, size_t(E) * sizeof(float));
  EXPECT_EQ(rig.be->downloads() - d0, 1u);
  rig.be->to_host(x, size_t(E) * sizeof(float));
  EXPECT_EQ(rig.be->downloads() - d0, 1u);
  double norm = 0.0;
  for (int64_t i = 0; i < E; ++i) norm += double(x[i]) * x[i];
  EXPECT_TRUE(std::isfinite(norm));
  EXPECT_GT(norm, 0.0);
}

}  // namespace
}  // namespace tilellm
