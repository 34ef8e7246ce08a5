// Decode without per-token launches: the first decode step is captured as a CUDA graph, each following one
// replays it (cuda_backend.h). Checked on a tiny random llama model (../gpu_common/compare_tiny.h) over 32
// decode steps in both activation modes: the logits of every replayed step equal, bit for bit, those of the
// same steps run eagerly (a backend with profiling on never captures); one capture is made and 31 steps
// replay; and nothing is allocated while the replayed steps run, neither on the device (the runtime's
// allocations) nor on the host (operator new, counted by alloc_counter.cpp); with the residual add and norm
// carried by the products (--cuda-fuse-norm), bit-equal to the eager steps with add_rmsnorm's launches.
// Likewise a batch decode step of three sequences (BatchRig).
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

// A CUDA backend with a Session's sizes (8 tokens a pass) and the scratch's arrays resident, holding `seqs`
// caches of kv's geometry, its weights loaded.
std::unique_ptr<CudaBackend> make_backend(const Model& m, const KvCache& kv, int seqs, ForwardScratch& s,
                                          bool profiling, ActivationMode mode, bool fuse_norm = false) {
  const ModelConfig& c = m.config();
  CudaBackendOptions o;
  o.device = test::cuda_test_device();
  o.activations = mode;
  o.weights = WeightsMode::Int4B64;  // a block format: the quantized mode's integer products
  o.max_tokens = 8;
  const int64_t widest = std::max({c.n_embd, c.n_ff, c.q_dim(), c.n_head * c.head_dim_v, c.kv_dim()});
  o.max_in_elems = 8 * widest;
  o.max_out_elems = std::max(o.max_in_elems, seqs * c.n_vocab);  // a batch's logits: a row per sequence
  o.max_width = std::max({c.n_embd, c.head_dim, c.rope_dim});
  o.kv_layers = kv.n_layer();
  o.kv_ctx = kv.n_ctx();
  o.kv_dim = kv.kv_dim();
  o.kv_seqs = seqs;
  o.profiling = profiling;
  o.fuse_norm = fuse_norm;
  for (AlignedBuffer* a : s.activations()) o.resident.push_back({a->as<void>(), a->size()});
  auto be = std::make_unique<CudaBackend>(o);
  be->load_weights(m.weights().weight_set());
  return be;
}

// The forward pass on a CUDA backend made here with a Session's sizes and resident arrays.
struct Rig {
  const Model& model;
  KvCache kv;
  RopeTable rope;
  ForwardScratch s;
  std::vector<float> logits;
  std::unique_ptr<CudaBackend> be;

  Rig(const Model& m, int64_t n_ctx, bool profiling, ActivationMode mode, bool fuse_norm = false)
      : model(m),
        kv(m.config().n_layer, n_ctx, m.config().n_head_kv, m.config().head_dim, GgmlType::F16, false),
        rope(n_ctx, m.config().rope_dim, m.config().rope_base, m.config().rope_freq_scale),
        s(m.config(), 8),
        logits(size_t(m.config().n_vocab)) {
    be = make_backend(m, kv, 1, s, profiling, mode, fuse_norm);
  }
  void run(const int32_t* tokens, int64_t n, int64_t n_past) {
    ForwardContext ctx{model, *be, kv, rope, rope, s};
    forward(ctx, tokens, n, n_past, logits.data(), 1);
  }
};

// fuse_norm: the replayed backend carries the residual add and norm in the products around them
// (--cuda-fuse-norm), the eager one launches add_rmsnorm between them.
void expect_replay_bit_exact_without_allocations(ActivationMode mode, bool fuse_norm = false) {
  SKIP_WITHOUT_CUDA();
  auto model = Model::load(test::gpu_tiny_model("llama"));
  Rig replayed(*model, 64, false, mode, fuse_norm), eager(*model, 64, true, mode);
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

// Three sequences in one backend (a BatchSession's caches, kv_seqs = 3), each with its prompt, then batch
// decode steps of one token each: the first is captured, the rest replay it while the same sequences decode
// together, bit-equal to the same steps run eagerly.
struct BatchRig {
  static constexpr int kSeqs = 3;
  const Model& model;
  std::vector<KvCache> kv;
  RopeTable rope;
  ForwardScratch s;
  std::vector<float> logits;
  std::unique_ptr<CudaBackend> be;

  BatchRig(const Model& m, int64_t n_ctx, bool profiling)
      : model(m),
        rope(n_ctx, m.config().rope_dim, m.config().rope_base, m.config().rope_freq_scale),
        s(m.config(), 8),
        logits(size_t(kSeqs * m.config().n_vocab)) {
    const ModelConfig& c = m.config();
    for (int i = 0; i < kSeqs; ++i) {
      kv.emplace_back(c.n_layer, n_ctx, c.n_head_kv, c.head_dim, GgmlType::F16, false);
      kv.back().set_seq(i);
    }
    be = make_backend(m, kv[0], kSeqs, s, profiling, ActivationMode::Quantized);
  }
  // One token for each sequence, at positions n_past[i].
  void step(const int32_t* tokens, const int64_t* n_past) {
    SeqSpan spans[kSeqs];
    for (int i = 0; i < kSeqs; ++i) spans[i] = {&kv[size_t(i)], n_past[i], i, 1};
    ForwardContext ctx{model, *be, kv[0], rope, rope, s};
    forward_spans(ctx, tokens, spans, kSeqs, logits.data());
  }
  void prompt(int seq, const int32_t* tokens, int64_t n) {
    const SeqSpan span{&kv[size_t(seq)], 0, 0, n};
    ForwardContext ctx{model, *be, kv[0], rope, rope, s};
    forward_spans(ctx, tokens, &span, 1, logits.data());
  }
};

TEST(CudaReplay, batch_decode_of_three_sequences_replays_one_capture_bit_exact) {
  SKIP_WITHOUT_CUDA();
  auto model = Model::load(test::gpu_tiny_model("llama"));
  BatchRig replayed(*model, 64, false), eager(*model, 64, true);
  const int32_t prompts[3][5] = {{1, 50, 34, 28, 25}, {1, 7, 60, 3, 0}, {1, 61, 62, 63, 64}};
  const int64_t lens[3] = {5, 3, 4};
  for (int i = 0; i < 3; ++i) {
    replayed.prompt(i, prompts[i], lens[i]);
    eager.prompt(i, prompts[i], lens[i]);
  }
  int32_t toks[3] = {42, 17, 9};
  int64_t past[3] = {lens[0], lens[1], lens[2]};
  const int64_t V = model->config().n_vocab;
  for (int step = 0; step < 12; ++step) {
    replayed.step(toks, past);
    eager.step(toks, past);
    ASSERT_EQ(replayed.logits, eager.logits) << "step " << step;
    for (int i = 0; i < 3; ++i) {
      const float* l = eager.logits.data() + i * V;
      toks[i] = int32_t(std::max_element(l, l + V) - l);
      ++past[i];
    }
  }
  EXPECT_EQ(replayed.be->captured_steps(), 1u);
  EXPECT_EQ(replayed.be->replayed_steps(), 11u);
}

TEST(CudaReplay, float_path_decode_replays_one_capture_bit_exact_and_allocates_nothing) {
  expect_replay_bit_exact_without_allocations(ActivationMode::F32);
}

TEST(CudaReplay, quantized_decode_replays_one_capture_bit_exact_and_allocates_nothing) {
  expect_replay_bit_exact_without_allocations(ActivationMode::Quantized);
}

// The tiny model's gate/up job forms its norm in its launch (its q/k/v and output rows too few for pairs:
// their norms launched alone), every layer's output and down products add into the residual.
TEST(CudaReplay, quantized_decode_with_the_norm_carried_replays_bit_equal_to_the_launches_apart) {
  expect_replay_bit_exact_without_allocations(ActivationMode::Quantized, true);
}

}  // namespace
}  // namespace tilellm
