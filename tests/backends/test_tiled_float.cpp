// The float tiles (backends/cpu/tiled_float.h): F16 and BF16 matrices.
//  - The repack is lossless: every tiled weight equals the GGUF row's value, rows and pairs of inputs padded.
//  - Every compiled kernel (scalar; AVX-512 BF16, AVX-512, AVX2, NEON where the CPU has them) equals a
//    float64 evaluation of the contract's formula on the same rounded activations, to float32 accumulation
//    error, on odd shapes: row counts that leave a partial tile, token counts that leave every remainder of
//    the 8/4/2/1-token passes, odd inputs (a BF16 pair half padded), inputs not a multiple of the decode
//    kernels' accumulator count.
//  - The activation rounding is the weight type's: half, or bfloat16 round-to-nearest-even.
//  - Through the backend: matmul_shared on tiles equals the unprepared backend's row kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/tiled_float.h"
#include "backends/cpu/tiled_float_kernels.h"
#include "base/cpu_features.h"
#include "base/cpu_isa.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "model/weights.h"

namespace tilellm {
namespace {

struct OwnedWeight {
  std::vector<uint8_t> bytes;
  Weight w;
};

uint16_t to_type(GgmlType type, float v) {
  return type == GgmlType::BF16 ? fp32_to_bf16(v) : fp32_to_fp16(v);
}
float from_type(GgmlType type, uint16_t h) {
  return type == GgmlType::BF16 ? bf16_to_fp32(h) : fp16_to_fp32(h);
}

OwnedWeight random_weight(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  OwnedWeight o;
  o.w.type = type;
  o.w.n_in = n_in;
  o.w.n_out = n_out;
  const size_t elem = type == GgmlType::F32 ? 4 : 2;
  o.w.row_bytes = size_t(n_in) * elem;
  o.bytes.resize(o.w.row_bytes * size_t(n_out));
  for (int64_t i = 0; i < n_in * n_out; ++i) {
    if (type == GgmlType::F32) {
      const float v = nd(rng);
      std::memcpy(&o.bytes[size_t(i) * 4], &v, 4);
      continue;
    }
    const uint16_t h = to_type(type, nd(rng));
    std::memcpy(&o.bytes[size_t(i) * 2], &h, 2);
  }
  o.w.data = o.bytes.data();
  return o;
}

float weight_at(const Weight& w, int64_t r, int64_t k) {
  if (w.type == GgmlType::F32) {
    float v;
    std::memcpy(&v, w.row(r) + 4 * k, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, w.row(r) + 2 * k, 2);
  return from_type(w.type, h);
}

// The activation value (token t, input k) the kernels read from prepare_float_acts' output.
float act_at(GgmlType type, const void* acts, int64_t n_in, int64_t t, int64_t k) {
  if (type == GgmlType::BF16) {
    const uint32_t word = static_cast<const uint32_t*>(acts)[t * ((n_in + 1) / 2) + k / 2];
    return bf16_to_fp32(uint16_t(word >> (16 * (k % 2))));
  }
  return static_cast<const float*>(acts)[t * n_in + k];
}

const GgmlType kTypes[] = {GgmlType::F16, GgmlType::BF16};

TEST(TiledFloat, repack_is_lossless_and_pads_with_zeros) {
  for (GgmlType type : kTypes) {
    for (int64_t n_in : {1, 37, 64}) {
      const int64_t n_out = 21;
      const OwnedWeight o = random_weight(type, n_in, n_out, uint32_t(n_in));
      const TiledFloat t = tile_float(o.w, o.w.type, nullptr);
      ASSERT_EQ(t.n_tiles, 2);
      ASSERT_EQ(t.tile_bytes % 128, 0u);
      for (int64_t r = 0; r < n_out; ++r) {
        for (int64_t k = 0; k < n_in; ++k) {
          ASSERT_EQ(std::bit_cast<uint32_t>(t.at(r, k)), std::bit_cast<uint32_t>(weight_at(o.w, r, k)))
              << type_name(type) << " row " << r << " k " << k;
        }
      }
      // Rows past n_out, and the half-used last pair of an odd BF16 row, hold zeros.
      for (int64_t r = n_out; r < 32; ++r)
        for (int64_t k = 0; k < n_in; ++k) ASSERT_EQ(t.at(r, k), 0.0f);
      if (type == GgmlType::BF16 && n_in % 2) {
        for (int64_t r = 0; r < 32; ++r) ASSERT_EQ(t.at(r, n_in), 0.0f);
      }
    }
  }
}

TEST(TiledFloat, activations_are_rounded_to_the_weight_type) {
  const float x[5] = {1.0f + std::ldexp(1.0f, -9), -3.14159265f, 1e-3f, 65504.0f,
                      1.0f + std::ldexp(3.0f, -9)};
  for (GgmlType type : kTypes) {
    std::vector<uint8_t> acts(float_acts_bytes(type, 5, 1));
    prepare_float_acts(type, x, 5, 0, 1, acts.data());
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(act_at(type, acts.data(), 5, 0, k), from_type(type, to_type(type, x[k]))) << k;
    }
    if (type == GgmlType::BF16) {
      // bfloat16 keeps 8 significant bits: 1 + 2^-9 rounds to 1 (a tie to even), 1 + 3*2^-9 up to 1 + 2^-7.
      EXPECT_EQ(act_at(type, acts.data(), 5, 0, 0), 1.0f);
      EXPECT_EQ(act_at(type, acts.data(), 5, 0, 4), 1.0f + std::ldexp(1.0f, -7));
      EXPECT_EQ(static_cast<const uint32_t*>(static_cast<const void*>(acts.data()))[2] >> 16, 0u);  // pad
    }
  }
}

// The kernels of every ISA this CPU runs (for BF16 on AVX-512 both paths: vdpbf16ps where the CPU has it,
// and the shift-and-mask one), F32 tiles included.
struct Variant {
  std::string isa;
  bool bf16_dot;
};
std::vector<Variant> variants(GgmlType type) {
  std::vector<Variant> v;
  for (const char* isa : {"avx512vnni", "avx2", "neon", "scalar"}) {
    if (!select_cpu_isa(isa)) continue;
    v.push_back({isa, false});
    if (type == GgmlType::BF16 && std::string(isa) == "avx512vnni" && cpu_features().avx512_bf16)
      v.push_back({isa, true});
  }
  select_cpu_isa("best");
  return v;
}

TEST(TiledFloat, kernels_match_float64_on_rounded_activations) {
  // Float32 sums of n products against float64: within (n + 2) units of 2^-24 of the sum of magnitudes.
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    const std::vector<Variant> vs = variants(type);
    // Every kernel this CPU can run is among them (a probe that wrongly says no would go untested).
    const CpuFeatures& f = cpu_features();
    const size_t expected = 1 + size_t(f.neon) + size_t(f.avx2_fma_f16c) + size_t(f.avx512_vnni) +
                            size_t(type == GgmlType::BF16 && f.avx512_bf16);
    ASSERT_EQ(vs.size(), expected) << type_name(type);
    for (int64_t n_in : {37, 160}) {
      for (int64_t n_out : {5, 45}) {
        const OwnedWeight o = random_weight(type, n_in, n_out, uint32_t(n_in + n_out));
        const TiledFloat t = tile_float(o.w, o.w.type, nullptr);
        for (int64_t n_tok : {1, 3, 15}) {
          std::mt19937 rng(uint32_t(3 + n_tok));
          std::normal_distribution<float> nd(0.0f, 1.0f);
          std::vector<float> x(size_t(n_tok * n_in));
          for (auto& v : x) v = nd(rng);
          std::vector<uint8_t> acts(float_acts_bytes(type, n_in, n_tok) + 64);
          prepare_float_acts(type, x.data(), n_in, 0, n_tok, acts.data());
          for (const Variant& var : vs) {
            ASSERT_TRUE(select_cpu_isa(var.isa));
            ASSERT_TRUE(tiled_float_detail::set_bf16_dot_product_for_testing(var.bf16_dot));
            ASSERT_EQ(tiled_float_isa_name(type), var.isa);
            std::vector<float> y(size_t(n_tok * n_out), -1234.5f);
            tiled_float_matmul(t, acts.data(), n_tok, 0, t.n_tiles / 2, y.data(), n_out);
            tiled_float_matmul(t, acts.data(), n_tok, t.n_tiles / 2, t.n_tiles, y.data(), n_out);
            for (int64_t tok = 0; tok < n_tok; ++tok) {
              for (int64_t r = 0; r < n_out; ++r) {
                double ref = 0.0, mag = 0.0;
                for (int64_t k = 0; k < n_in; ++k) {
                  const double p =
                      double(weight_at(o.w, r, k)) * double(act_at(type, acts.data(), n_in, tok, k));
                  ref += p;
                  mag += std::fabs(p);
                }
                ASSERT_NEAR(y[size_t(tok * n_out + r)], ref, double(n_in + 2) * std::ldexp(1.0, -24) * mag)
                    << type_name(type) << " " << var.isa << (var.bf16_dot ? " (vdpbf16ps)" : "") << " n_in "
                    << n_in << " token " << tok << " row " << r;
              }
            }
          }
        }
      }
    }
    select_cpu_isa("best");
    tiled_float_detail::set_bf16_dot_product_for_testing(cpu_features().avx512_bf16);
  }
}

TEST(TiledFloat, the_best_kernel_the_cpu_runs_is_used) {
  const CpuFeatures& f = cpu_features();
#if defined(__aarch64__)
  EXPECT_STREQ(tiled_float_isa_name(GgmlType::F16), "neon");
  EXPECT_STREQ(tiled_float_isa_name(GgmlType::BF16), "neon");
  (void)f;
#elif defined(__x86_64__)
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    EXPECT_STREQ(tiled_float_isa_name(type), f.avx512_vnni     ? "avx512vnni"
                                             : f.avx2_fma_f16c ? "avx2"
                                                               : "scalar");
  }
  EXPECT_FALSE(select_cpu_isa("neon"));
#endif
  EXPECT_FALSE(select_cpu_isa("avx1024"));
  EXPECT_STREQ(tiled_float_isa_name(GgmlType::F16), tiled_float_isa_name(GgmlType::BF16));  // nothing moved
}

TEST(TiledFloat, backend_tiles_equal_the_row_path) {
  // A one-layer model per type: matmul_shared over float tiles equals the unprepared backend's rows (same
  // rounded activations, float sums in another order: 1e-5 of the largest output).
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(type_name(type));
    if (std::string_view(tiled_float_isa_name(type)) == "scalar")
      continue;  // not tiled without a vector kernel
    constexpr int64_t n_embd = 96, n_ff = 161, n_tok = 13;
    std::vector<OwnedWeight> owned;
    owned.reserve(8);
    ModelWeights mw;
    mw.layers.resize(1);
    LayerWeights& l = mw.layers[0];
    uint32_t seed = 7;
    auto bind = [&](Weight& w, int64_t n_in, int64_t n_out) {
      owned.push_back(random_weight(type, n_in, n_out, seed++));
      w = owned.back().w;
    };
    bind(l.wq, n_embd, n_embd);
    bind(l.wk, n_embd, 32);
    bind(l.wv, n_embd, 32);
    bind(l.wo, n_embd, n_embd);
    bind(l.w_gate, n_embd, n_ff);
    bind(l.w_up, n_embd, n_ff);
    bind(l.w_down, n_ff, n_embd);
    bind(mw.output, n_embd, 77);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(size_t(n_tok * n_ff));
    for (auto& v : x) v = nd(rng);
    ThreadPool pool(2);
    CpuBackend rows(pool, ActivationMode::Quantized, n_tok * n_ff);
    CpuBackend tiles(pool, ActivationMode::Quantized, n_tok * n_ff);
    tiles.prepare_weights(mw.weight_set(), WeightsMode::Native);
    for (int64_t nt : {int64_t(1), n_tok}) {
      // gate/up share their input; down reads the odd-width one.
      const Weight* gu[2] = {&l.w_gate, &l.w_up};
      std::vector<float> a[2], b[2];
      float* pa[2];
      float* pb[2];
      for (int i = 0; i < 2; ++i) {
        a[i].assign(size_t(nt * n_ff), 0.0f);
        b[i].assign(size_t(nt * n_ff), 0.0f);
        pa[i] = a[i].data();
        pb[i] = b[i].data();
      }
      tiles.matmul_shared(gu, pa, 2, x.data(), nt);
      rows.matmul_shared(gu, pb, 2, x.data(), nt);
      std::vector<float> c(size_t(nt * n_embd)), d(c.size());
      tiles.matmul(l.w_down, x.data(), nt, c.data());
      rows.matmul(l.w_down, x.data(), nt, d.data());
      a[0].insert(a[0].end(), c.begin(), c.end());
      b[0].insert(b[0].end(), d.begin(), d.end());
      for (int i = 0; i < 2; ++i) {
        double scale = 0.0;
        for (float v : b[i]) scale = std::max(scale, double(std::fabs(v)));
        ASSERT_GT(scale, 0.0);
        for (size_t j = 0; j < a[i].size(); ++j) ASSERT_NEAR(a[i][j], b[i][j], 1e-5 * scale) << "nt " << nt;
      }
    }
  }
}

}  // namespace
}  // namespace tilellm
