// Decode without per-token launches: the first decode step is captured as a CUDA graph, each following one
// replays it (cuda_backend.h). Checked on a tiny random llama model (../gpu_common/compare_tiny.h) over 32
// decode steps in both activation modes: the logits of every replayed step equal, bit for bit, those of the
// same steps run eagerly (a backend with profiling on never captures); one capture is made and 31 steps
// replay; and nothing is allocated while the replayed steps run, neither on the device (the runtime's
// allocations) nor on the host (operator new, counted by alloc_counter.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "../common/alloc_counter.h"
#include "../gpu_common/compare_tiny.h"
#include "backends/cuda/cuda_backend.h"
#include "cuda_test.h"
#include "model/forward.h"
#include "model/model.h"

namespace tilellm {
namespace {

// The forward pass on a CUDA backend made here with a Session's sizes and resident arrays.
struct Rig {
  const Model& model;
  KvCache kv;
  RopeTable rope;
  ForwardScratch s;
  std::vector<float> logits;
  std::unique_ptr<CudaBackend> be;

  Rig(const Model& m, int64_t n_ctx, bool profiling, ActivationMode mode)
      : model(m),
        kv(m.config().n_layer, n_ctx, m.config().n_head_kv, m.config().head_dim, GgmlType::F16, false),
        rope(n_ctx, m.config().rope_dim, m.config().rope_base, m.config().rope_freq_scale),
        s(m.config(), 8),
        logits(size_t(m.config().n_vocab)) {
    const ModelConfig& c = m.config();
    CudaBackendOptions o;
    o.device = test::cuda_test_device();
    o.activations = mode;
    o.weights = WeightsMode::Int4B64;  // a block format: the quantized mode's integer products
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
    be = std::make_unique<CudaBackend>(o);
    be->load_weights(m.weights().weight_set());
  }
  void run(const int32_t* tokens, int64_t n, int64_t n_past) {
    ForwardContext ctx{model, *be, kv, rope, rope, s};
    forward(ctx, tokens, n, n_past, logits.data(), 1);
  }
};

void expect_replay_bit_exact_without_allocations(ActivationMode mode) {
  SKIP_WITHOUT_CUDA();
  auto model = Model::load(test::gpu_tiny_model("llama"));
  Rig replayed(*model, 64, false, mode), eager(*model, 64, true, mode);
  ASSERT_TRUE(replayed.be->cpu_fallbacks().empty()) << "a kernel failed its self-check";
  const int32_t prompt[5] = {1, 50, 34, 28, 25};
  replayed.run(prompt, 5, 0);
  eager.run(prompt, 5, 0);
  int32_t tok = 42;
  uint64_t news = 0, allocs = 0;  // during the replayed steps (the first is the capture)
  for (int step = 0; step < 32; ++step) {
    const long n0 = test::allocation_count();
    const uint64_t a0 = replayed.be->runtime().allocations();
    replayed.run(&tok, 1, 5 + step);
    if (step > 0) {
      news += uint64_t(test::allocation_count() - n0);
      allocs += replayed.be->runtime().allocations() - a0;
    }
    eager.run(&tok, 1, 5 + step);
    ASSERT_EQ(replayed.logits, eager.logits) << "step " << step;
    tok = int32_t(std::max_element(eager.logits.begin(), eager.logits.end()) - eager.logits.begin());
  }
  EXPECT_EQ(news, 0u) << "host allocations during 31 replayed decode steps";
  EXPECT_EQ(allocs, 0u) << "device allocations during them";
  EXPECT_EQ(replayed.be->captured_steps(), 1u);
  EXPECT_EQ(replayed.be->replayed_steps(), 31u);
  EXPECT_EQ(eager.be->captured_steps(), 0u);
}

TEST(CudaReplay, float_path_decode_replays_one_capture_bit_exact_and_allocates_nothing) {
  expect_replay_bit_exact_without_allocations(ActivationMode::F32);
}

TEST(CudaReplay, quantized_decode_replays_one_capture_bit_exact_and_allocates_nothing) {
  expect_replay_bit_exact_without_allocations(ActivationMode::Quantized);
}

}  // namespace
}  // namespace tilellm
