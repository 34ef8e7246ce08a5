// The K-quant tile kinds (Q4_K, Q5_K, Q6_K; backends/cpu/tiled_weight.h).
//  - The repack is lossless: every tiled weight equals the GGUF dequantized value bit for bit, for random
//    codes and scales including the extremes of the 6-bit packing.
//  - Every compiled kernel equals a float64 evaluation of the formula (exact integer super-block sums, the
//    Q8_K bsums recomputed from the raw activation blocks) to float accumulation error, on odd shapes:
//    partial tiles, token counts that leave partial groups, decode.
//  - The result equals the row kernels' (dot_row_q: llama.cpp's arithmetic) up to float order.
//  - Through the backend in native mode, K-quant matrices are tiled, share one activation preparation, and
//    equal the row path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/tiled_weight.h"
#include "base/cpu_isa.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "format/quants.h"
#include "format/quants_q8.h"
#include "model/weights.h"

namespace tilellm {
namespace {

struct OwnedWeight {
  std::vector<uint8_t> bytes;
  Weight w;
};

// Random super-blocks: random code bytes and scale bytes (every 6-bit scale and min value occurs, and Q6_K's
// int8 scales include -128), positive d and dmin; every fifth block has its packed scales all ones (sc = mn =
// 63, the packing's maximum) and every seventh all zeros.
OwnedWeight random_k_blocks(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.0005f, 0.02f);
  OwnedWeight o;
  o.w.type = type;
  o.w.n_in = n_in;
  o.w.n_out = n_out;
  o.w.row_bytes = row_size(type, n_in);
  o.bytes.resize(o.w.row_bytes * size_t(n_out));
  for (auto& b : o.bytes) b = uint8_t(byte(rng));
  const size_t bs = type_traits(type).type_size;
  int i = 0;
  for (size_t off = 0; off < o.bytes.size(); off += bs, ++i) {
    uint8_t* b = &o.bytes[off];
    const uint16_t d = fp32_to_fp16(scale(rng)), dmin = fp32_to_fp16(scale(rng));
    if (type == GgmlType::Q6_K) {
      std::memcpy(b + offsetof(BlockQ6_K, d), &d, 2);
      if (i % 5 == 0) std::memset(b + offsetof(BlockQ6_K, scales), 0x80, 16);  // -128
      continue;
    }
    std::memcpy(b, &d, 2);
    std::memcpy(b + 2, &dmin, 2);
    if (i % 5 == 0) std::memset(b + 4, 0xff, 12);
    if (i % 7 == 0) std::memset(b + 4, 0, 12);
  }
  o.w.data = o.bytes.data();
  return o;
}

TileKind kind_of(GgmlType t) {
  return native_tile_kind(t);
}

std::vector<std::string> isas() {
  std::vector<std::string> v{"scalar"};
  for (const char* isa : {"avx2", "avxvnni", "avx512vnni", "neon", "neondot"})
    if (select_cpu_isa(isa)) v.push_back(isa);
  select_cpu_isa("best");
  return v;
}

struct Acts {
  std::vector<uint8_t> xq;  // [n_tok] Q8_K rows
  AlignedBuffer scratch;
  TiledActs a;
  size_t rs = 0;
};
Acts make_acts(int64_t n_in, int64_t n_tok, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Acts r;
  r.rs = activation_row_size(GgmlType::Q8_K, n_in);
  r.xq.resize(r.rs * size_t(n_tok));
  std::vector<float> x(static_cast<size_t>(n_in));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (auto& v : x) v = nd(rng);
    quantize_activations(GgmlType::Q8_K, x.data(), &r.xq[size_t(t) * r.rs], n_in);
  }
  r.scratch = AlignedBuffer(tiled_acts_bytes(n_in, n_tok));
  // In two halves of the tokens, as the backend's threads prepare them.
  prepare_tiled_acts(GgmlType::Q8_K, 0, n_in, r.xq.data(), r.rs, n_tok, 0, n_tok / 2, r.scratch.as<void>());
  prepare_tiled_acts(GgmlType::Q8_K, 0, n_in, r.xq.data(), r.rs, n_tok, n_tok / 2, n_tok,
                     r.scratch.as<void>());
  r.a = prepare_tiled_acts(GgmlType::Q8_K, 0, n_in, r.xq.data(), r.rs, n_tok, 0, 0, r.scratch.as<void>());
  return r;
}

// The formula of tiled_weight.h in float64 from the tile's entries and the raw Q8_K block of token t (its
// bsums recomputed from its quants), and the sum of the magnitudes of its terms.
// fine: the magnitudes of the sub-block terms (the row kernels convert and scale partial sums per lane).
void reference(const TiledWeight& w, const Acts& acts, int64_t t, int64_t r, double* y, double* mag,
               double* fine) {
  const int sub = w.kind == TileKind::Q6_K ? 16 : 32;
  double acc = 0.0, m = 0.0, f = 0.0;
  for (int64_t c = 0; c < w.n_in / kSuperK; ++c) {
    BlockQ8_K b;
    std::memcpy(&b, &acts.xq[size_t(t) * acts.rs + size_t(c) * sizeof b], sizeof b);
    int64_t isum = 0, msum = 0, fine_i = 0, fine_m = 0;
    TiledEntry e;
    for (int j = 0; j < kSuperK / sub; ++j) {
      int64_t s = 0, bsum = 0;
      for (int k = 0; k < sub; ++k) {
        e = tiled_entry(w, r, c * kSuperK + j * sub + k);
        s += int64_t(e.code - w.int_offset()) * b.qs[j * sub + k];
        bsum += b.qs[j * sub + k];
      }
      isum += e.sc * s;
      msum += e.mn * bsum;
      fine_i += std::abs(e.sc * s);
      fine_m += std::abs(e.mn * bsum);
    }
    const double a = double(e.d) * double(b.d) * double(isum),
                 o = double(e.dmin) * double(b.d) * double(msum);
    acc += a - o;
    m += std::fabs(a) + std::fabs(o);
    f += std::fabs(double(e.d) * double(b.d)) * double(fine_i) +
         std::fabs(double(e.dmin) * double(b.d)) * double(fine_m);
  }
  *y = acc;
  *mag = m;
  *fine = f;
}

// Float32 against float64: per super-block two products (each with the rounding of d * dy, of the int32 sum's
// conversion and of the product) and two accumulations.
double tolerance(const TiledWeight& w, double mag) {
  return 2.0 * double(2 * w.n_in / kSuperK + 4) * std::ldexp(1.0, -24) * mag + 1e-30;
}

TEST(TiledK, repack_is_lossless) {
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const OwnedWeight o = random_k_blocks(type, 768, 37, 3);
    const TiledWeight t = tile_weight(o.w, kind_of(type), nullptr);
    EXPECT_EQ(t.n_tiles, 3);
    EXPECT_EQ(t.tile_bytes % 128, 0u);
    EXPECT_EQ(t.activation_type(), GgmlType::Q8_K);
    std::vector<float> row(768);
    for (int64_t r = 0; r < 37; ++r) {
      dequantize_row(type, o.w.row(r), row.data(), 768);
      for (int64_t k = 0; k < 768; ++k)
        ASSERT_EQ(tiled_value(t, r, k), row[size_t(k)]) << type_name(type) << " r " << r << " k " << k;
    }
  }
}

TEST(TiledK, inputs_not_a_multiple_of_256_are_refused) {
  OwnedWeight o = random_k_blocks(GgmlType::Q4_K, 256, 4, 1);
  o.w.n_in = 288;  // a whole number of 32-blocks, not of super-blocks
  o.w.name = "blk.0.ffn_down.weight";
  try {
    tile_weight(o.w, TileKind::Q4_K, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("super-block of 256"), std::string::npos) << e.what();
  }
}

// Every compiled kernel against the float64 formula, and against the row kernel (llama.cpp's arithmetic) on
// the same blocks and activations.
void check_kernels(const OwnedWeight& o, int64_t n_tok, const std::string& what) {
  const TiledWeight w = tile_weight(o.w, kind_of(o.w.type), nullptr);
  const Acts acts = make_acts(w.n_in, n_tok, 11);
  for (const std::string& isa : isas()) {
    ASSERT_TRUE(select_cpu_isa(isa));
    std::vector<float> y(size_t(n_tok * w.n_out), -1234.5f);
    // Three calls over parts of the tiles and tokens, as threads split the work.
    const int64_t tm = w.n_tiles / 2, tt = n_tok / 2;
    tiled_matmul(w, acts.a, 0, tm, 0, n_tok, y.data(), w.n_out);
    tiled_matmul(w, acts.a, tm, w.n_tiles, 0, tt, y.data(), w.n_out);
    tiled_matmul(w, acts.a, tm, w.n_tiles, tt, n_tok, y.data(), w.n_out);
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t r = 0; r < w.n_out; ++r) {
        double ref, mag, fine;
        reference(w, acts, t, r, &ref, &mag, &fine);
        const float got = y[size_t(t * w.n_out + r)];
        ASSERT_NEAR(got, ref, tolerance(w, mag)) << what << " isa " << isa << " token " << t << " row " << r;
        // The row kernels round per lane of partial sums (up to 16 per super-block) in their own order.
        const float row = dot_row_q(o.w.type, o.w.row(r), &acts.xq[size_t(t) * acts.rs], w.n_in);
        ASSERT_NEAR(got, row, tolerance(w, mag) + 2.0 * (16 + 4) * std::ldexp(1.0, -24) * fine)
            << what << " isa " << isa << " token " << t;
      }
    }
  }
  select_cpu_isa("best");
}

TEST(TiledK, kernels_match_the_formula_and_the_row_kernels) {
  // Rows: one partial tile, several with a partial last one; tokens: decode, 8 + 5, 3, and 70 (every
  // remainder of the 8- and 4-token groups across the thread-like splits).
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    for (int64_t n_out : {5, 45}) {
      for (int64_t n_tok : {1, 13, 3, 70}) {
        const OwnedWeight o = random_k_blocks(type, 512, n_out, uint32_t(n_out * 100 + n_tok));
        check_kernels(o, n_tok, std::string(type_name(type)) + " n_out " + std::to_string(n_out));
      }
    }
  }
}

TEST(TiledK, backend_tiles_k_quants_and_matches_rows) {
  // A one-layer model of K-quant matrices (q/k/v in three different types: one shared Q8_K preparation):
  // in native mode matmul_shared runs on tiles and equals the unprepared backend's row path (same integer
  // sums; float order only: 1e-5 of the largest output), for decode and prefill.
  constexpr int64_t n_embd = 256, n_ff = 512, n_tok = 37;
  std::vector<OwnedWeight> owned;
  owned.reserve(8);
  ModelWeights mw;
  mw.layers.resize(1);
  LayerWeights& l = mw.layers[0];
  uint32_t seed = 40;
  auto bind = [&](Weight& w, GgmlType type, int64_t n_in, int64_t n_out) {
    owned.push_back(random_k_blocks(type, n_in, n_out, seed++));
    w = owned.back().w;
  };
  bind(l.wq, GgmlType::Q4_K, n_embd, n_embd);
  bind(l.wk, GgmlType::Q5_K, n_embd, 48);
  bind(l.wv, GgmlType::Q6_K, n_embd, 48);
  bind(l.wo, GgmlType::Q4_K, n_embd, n_embd);
  bind(l.w_gate, GgmlType::Q4_K, n_embd, n_ff);
  bind(l.w_up, GgmlType::Q4_K, n_embd, n_ff);
  bind(l.w_down, GgmlType::Q6_K, n_ff, n_embd);
  bind(mw.output, GgmlType::Q6_K, n_embd, 77);

  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n_tok * n_ff));
  for (auto& v : x) v = nd(rng);

  ThreadPool pool(2);
  select_cpu_isa("best");
  ASSERT_STRNE(tiled_isa_name(), "scalar") << "native mode tiles only where a vector kernel runs";
  CpuBackend rows(pool, ActivationMode::Quantized, n_tok * n_ff);
  CpuBackend tiles(pool, ActivationMode::Quantized, n_tok * n_ff);
  tiles.prepare_weights(mw.weight_set(), WeightsMode::Native);
  auto expect_close = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    double scale = 0.0;
    for (float v : want) scale = std::max(scale, double(std::fabs(v)));
    ASSERT_GT(scale, 0.0);
    for (size_t j = 0; j < got.size(); ++j) ASSERT_NEAR(got[j], want[j], 1e-5 * scale) << what << " " << j;
  };
  for (int64_t nt : {int64_t(1), n_tok}) {
    const Weight* qkv[3] = {&l.wq, &l.wk, &l.wv};
    std::vector<float> a[3], b[3];
    float* pa[3];
    float* pb[3];
    for (int i = 0; i < 3; ++i) {
      a[i].assign(size_t(nt * qkv[i]->n_out), 0.0f);
      b[i].assign(size_t(nt * qkv[i]->n_out), 0.0f);
      pa[i] = a[i].data();
      pb[i] = b[i].data();
    }
    tiles.matmul_shared(qkv, pa, 3, x.data(), nt);
    rows.matmul_shared(qkv, pb, 3, x.data(), nt);
    for (int i = 0; i < 3; ++i) expect_close(a[i], b[i], "qkv");
    std::vector<float> ya(size_t(nt * n_embd)), yb(size_t(nt * n_embd));
    tiles.matmul(l.w_down, x.data(), nt, ya.data());
    rows.matmul(l.w_down, x.data(), nt, yb.data());
    expect_close(ya, yb, "down");
  }
  // The tiles are what ran: a matrix whose tiles differ from its rows must change the tiled result. (The
  // backend looks weights up by address; changing the rows after the repack leaves the tiles as they were.)
  std::vector<float> before(static_cast<size_t>(n_embd)), after(static_cast<size_t>(n_embd));
  tiles.matmul(l.w_down, x.data(), 1, before.data());
  std::memset(owned[6].bytes.data(), 0, owned[6].bytes.size());
  tiles.matmul(l.w_down, x.data(), 1, after.data());
  EXPECT_EQ(before, after);
}

}  // namespace
}  // namespace tilellm
