// Decode without per-token recording: the first decode step is captured, each following one replays it
// (vulkan_backend.h). Checked on SmolLM2 over 32 decode steps: the logits of every replayed step equal, bit
// for bit, those of the same steps recorded anew (a backend with profiling on never captures); one capture
// is made and 31 steps replay; and nothing is allocated while the replayed steps run, neither on the device
// (the runtime's buffer allocations) nor on the host (operator new, counted in this program). A second
// prompt after them leaves the capture: the 4 decode steps after it replay it too.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "../common/paths.h"
#include "backends/vulkan/vulkan_backend.h"
#include "model/forward.h"
#include "model/model.h"
#include "vulkan_test.h"

// Host allocations of this program (every operator new goes through here).
static std::atomic<uint64_t> g_news{0};
void* operator new(size_t n) {
  ++g_news;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace tilellm {
namespace {

// The forward pass on a Vulkan backend made here with a Session's sizes and resident arrays.
struct Rig {
  const Model& model;
  KvCache kv;
  RopeTable rope;
  ForwardScratch s;
  std::vector<float> logits;
  std::unique_ptr<VulkanBackend> be;

  Rig(const Model& m, int64_t n_ctx, bool profiling)
      : model(m),
        kv(m.config().n_layer, n_ctx, m.config().n_head_kv, m.config().head_dim, GgmlType::F16),
        rope(n_ctx, m.config().rope_dim, m.config().rope_base, m.config().rope_freq_scale),
        s(m.config(), 8),
        logits(size_t(m.config().n_vocab)) {
    const ModelConfig& c = m.config();
    VulkanBackendOptions o;
    o.device = test::vulkan_test_device();
    o.max_tokens = 8;
    const int64_t widest = std::max({c.n_embd, c.n_ff, c.q_dim(), c.n_head * c.head_dim_v, c.kv_dim()});
    o.max_in_elems = 8 * widest;
    o.max_out_elems = std::max(o.max_in_elems, c.n_vocab);
    o.max_width = std::max({c.n_embd, c.head_dim, c.rope_dim});
    o.kv_layers = kv.n_layer();
    o.kv_ctx = kv.n_ctx();
    o.kv_dim = kv.kv_dim();
    o.profiling = profiling;
    for (AlignedBuffer* a : s.activations()) o.resident.push_back({a->as<void>(), a->size()});
    be = std::make_unique<VulkanBackend>(o);
    be->load_weights(m.weights().weight_set());
  }
  void run(const int32_t* tokens, int64_t n, int64_t n_past) {
    ForwardContext ctx{model, *be, kv, rope, rope, s};
    forward(ctx, tokens, n, n_past, logits.data(), 1);
  }
};

TEST(VulkanReplay, decode_replays_one_capture_bit_exact_and_allocates_nothing) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  Rig replayed(*model, 64, false), recorded(*model, 64, true);
  if (!replayed.be->cpu_fallbacks().empty()) GTEST_SKIP() << "a pipeline fell back to the CPU: no capture";
  const int32_t prompt[5] = {1, 504, 3458, 282, 253};
  replayed.run(prompt, 5, 0);
  recorded.run(prompt, 5, 0);
  int32_t tok = 42;
  uint64_t news = 0, allocs = 0;  // during the replayed steps (the first is the capture)
  for (int step = 0; step < 32; ++step) {
    const uint64_t n0 = g_news.load(), a0 = replayed.be->runtime().allocations();
    replayed.run(&tok, 1, 5 + step);
    if (step > 0) {
      news += g_news.load() - n0;
      allocs += replayed.be->runtime().allocations() - a0;
    }
    recorded.run(&tok, 1, 5 + step);
    ASSERT_EQ(replayed.logits, recorded.logits) << "step " << step;
    tok = int32_t(std::max_element(recorded.logits.begin(), recorded.logits.end()) - recorded.logits.begin());
  }
  EXPECT_EQ(news, 0u) << "host allocations during 31 replayed decode steps";
  EXPECT_EQ(allocs, 0u) << "device allocations during them";
  EXPECT_EQ(replayed.be->captured_steps(), 1u);
  EXPECT_EQ(replayed.be->replayed_steps(), 31u);
  // A prompt between decode steps (a chat's next turn) leaves the capture: the steps after it replay it.
  const int32_t turn[3] = {504, 282, 253};
  replayed.run(turn, 3, 37);
  recorded.run(turn, 3, 37);
  ASSERT_EQ(replayed.logits, recorded.logits) << "the second prompt";
  for (int step = 0; step < 4; ++step) {
    replayed.run(&tok, 1, 40 + step);
    recorded.run(&tok, 1, 40 + step);
    ASSERT_EQ(replayed.logits, recorded.logits) << "step " << step << " after the second prompt";
    tok = int32_t(std::max_element(recorded.logits.begin(), recorded.logits.end()) - recorded.logits.begin());
  }
  EXPECT_EQ(replayed.be->captured_steps(), 1u);
  EXPECT_EQ(replayed.be->replayed_steps(), 35u);
  EXPECT_EQ(recorded.be->captured_steps(), 0u);
}

}  // namespace
}  // namespace tilellm
