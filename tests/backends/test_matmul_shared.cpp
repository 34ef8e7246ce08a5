// matmul_shared (several weights reading one input, as q/k/v and gate/up do) must give exactly what separate
// matmuls give, in both activation modes, for one token and for several, when the weights can share one
// quantized input and when they cannot (then it falls back to one by one).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "base/thread_pool.h"
#include "format/quants_q8.h"

namespace tilellm {
namespace {

struct OwnedWeight {
  std::vector<uint8_t> bytes;
  Weight w;
};

// Random weights of n_out rows; Q8_0 rows are made with the activation quantizer (same block format).
OwnedWeight make_weight(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.7f);
  std::vector<float> f(size_t(n_in * n_out));
  for (auto& v : f) v = nd(rng);
  OwnedWeight o;
  o.w.type = type;
  o.w.n_in = n_in;
  o.w.n_out = n_out;
  o.w.row_bytes = type == GgmlType::F32 ? size_t(n_in) * 4 : activation_row_size(GgmlType::Q8_0, n_in);
  o.bytes.resize(o.w.row_bytes * size_t(n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    if (type == GgmlType::F32) {
      std::memcpy(&o.bytes[size_t(r) * o.w.row_bytes], &f[size_t(r * n_in)], o.w.row_bytes);
    } else {
      quantize_activations(GgmlType::Q8_0, &f[size_t(r * n_in)], &o.bytes[size_t(r) * o.w.row_bytes], n_in);
    }
  }
  o.w.data = o.bytes.data();
  return o;
}

void check(const std::vector<GgmlType>& types, ActivationMode mode, int64_t n_tok) {
  constexpr int64_t n_in = 5 * 32;
  const int64_t n_outs[] = {37, 5, 64, 11};
  ThreadPool pool(2);
  CpuBackend be(pool, mode, n_tok * n_in);
  std::vector<OwnedWeight> ws;
  for (size_t i = 0; i < types.size(); ++i)
    ws.push_back(make_weight(types[i], n_in, n_outs[i], uint32_t(i + 1)));
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n_tok * n_in));
  for (auto& v : x) v = nd(rng);

  std::vector<std::vector<float>> shared(ws.size()), alone(ws.size());
  std::vector<const Weight*> wp;
  std::vector<float*> yp;
  for (size_t i = 0; i < ws.size(); ++i) {
    shared[i].assign(size_t(n_tok * ws[i].w.n_out), -7.0f);
    alone[i].assign(size_t(n_tok * ws[i].w.n_out), -9.0f);
    wp.push_back(&ws[i].w);
    yp.push_back(shared[i].data());
  }
  be.matmul_shared(wp.data(), yp.data(), int(ws.size()), x.data(), n_tok);
  for (size_t i = 0; i < ws.size(); ++i) {
    be.matmul(ws[i].w, x.data(), n_tok, alone[i].data());
    EXPECT_EQ(shared[i], alone[i]) << "weight " << i;
    for (float v : shared[i]) ASSERT_NE(v, -7.0f) << "weight " << i << " has unwritten outputs";
  }
}

TEST(MatmulShared, equals_separate_matmuls) {
  for (ActivationMode mode : {ActivationMode::Quantized, ActivationMode::F32}) {
    for (int64_t n_tok : {1, 7, 19}) {
      SCOPED_TRACE(::testing::Message()
                   << (mode == ActivationMode::F32 ? "f32" : "q8") << " n_tok " << n_tok);
      check({GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0}, mode, n_tok);  // one shared quantized input
      check({GgmlType::Q8_0, GgmlType::F32}, mode, n_tok);                   // different input formats
      check({GgmlType::F32, GgmlType::F32, GgmlType::F32, GgmlType::F32}, mode, n_tok);
    }
  }
}

}  // namespace
}  // namespace tilellm
