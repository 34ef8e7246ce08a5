// The tile repack and the tiled matmul kernels (backends/cpu/tiled_weight.h).
//  - The repack of Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 is lossless: every tiled weight equals the GGUF block's
//  value.
//  - The int4b64 / int8b0 conversions round each weight to within half a step of its scale.
//  - Every compiled kernel (scalar; AVX2, AVX-VNNI, AVX-512 VNNI, NEON, NEON dot product where the CPU has
//    them) equals a float64 evaluation of the contract's formula (the same exact integer block sums, scaled
//    per block) to float accumulation error, on random data of odd shapes: row counts that leave a partial
//    tile, token counts that leave a partial group of 8 (of 4 for the AVX2 and NEON kernels), scale groups
//    cut short by K.
//  - The dispatch picks the best kernel the CPU runs (NEON without the dot product on a Cortex-A53).
//  - For the GGUF kinds the result also equals the row kernels' (dot_row_q), i.e. llama.cpp's arithmetic.
//  - Through the backend: a model-sized matmul_shared call on tiles equals the per-row path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/tiled_weight.h"
#include "base/cpu_features.h"
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

// Random rows of a block type: random quant bytes and random positive scales (and signed Q4_1 mins), so
// every code value occurs, including Q8_0's -128.
OwnedWeight random_blocks(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.002f, 0.05f), mn(-0.3f, 0.3f);
  OwnedWeight o;
  o.w.type = type;
  o.w.n_in = n_in;
  o.w.n_out = n_out;
  o.w.row_bytes = row_size(type, n_in);
  o.bytes.resize(o.w.row_bytes * size_t(n_out));
  for (auto& b : o.bytes) b = uint8_t(byte(rng));
  const size_t bs = type_traits(type).type_size;
  for (size_t off = 0; off < o.bytes.size(); off += bs) {
    const uint16_t d = fp32_to_fp16(scale(rng));
    std::memcpy(&o.bytes[off], &d, 2);
    if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1) {
      const uint16_t m = fp32_to_fp16(mn(rng));
      std::memcpy(&o.bytes[off + 2], &m, 2);
    }
  }
  o.w.data = o.bytes.data();
  return o;
}

OwnedWeight random_f32(int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.01f, 0.4f);
  OwnedWeight o;
  o.w.type = GgmlType::F32;
  o.w.n_in = n_in;
  o.w.n_out = n_out;
  o.w.row_bytes = size_t(n_in) * 4;
  o.bytes.resize(o.w.row_bytes * size_t(n_out));
  for (int64_t i = 0; i < n_in * n_out; ++i) {
    const float v = nd(rng);
    std::memcpy(&o.bytes[size_t(i) * 4], &v, 4);
  }
  o.w.data = o.bytes.data();
  return o;
}

// The GGUF block types with 32-value blocks that tile (the K-quants: test_tiled_k.cpp).
constexpr GgmlType kGguf32[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                GgmlType::Q8_0};

std::vector<std::string> isas() {
  std::vector<std::string> v{"scalar"};
  for (const char* isa : {"avx2", "avxvnni", "avx512vnni", "neon", "neondot"})
    if (select_cpu_isa(isa)) v.push_back(isa);
  select_cpu_isa("best");
  return v;
}

// Quantized activations of n_tok random rows for w, prepared for the tile kernels; keeps its buffers.
struct Acts {
  std::vector<uint8_t> xq;
  AlignedBuffer scratch;
  TiledActs a;
  size_t rs = 0;
};
Acts make_acts(const TiledWeight& w, int64_t n_tok, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Acts r;
  const GgmlType at = w.activation_type();
  r.rs = activation_row_size(at, w.n_in);
  r.xq.resize(r.rs * size_t(n_tok));
  std::vector<float> x(size_t(w.n_in));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (auto& v : x) v = nd(rng);
    quantize_activations(at, x.data(), &r.xq[size_t(t) * r.rs], w.n_in);
  }
  r.scratch = AlignedBuffer(tiled_acts_bytes(w.n_in, n_tok));
  prepare_tiled_acts(at, w.act_fold(), w.n_in, r.xq.data(), r.rs, n_tok, 0, n_tok, r.scratch.as<void>());
  r.a = prepare_tiled_acts(at, w.act_fold(), w.n_in, r.xq.data(), r.rs, n_tok, 0, 0, r.scratch.as<void>());
  return r;
}

// The contract's formula (tiled_weight.h) in float64 from the tile's codes, scales and offsets and the
// prepared activations, and the sum of the magnitudes of its terms (the scale of the float rounding).
// Per unit u of a.fold sub-blocks: (sum over the unit of (code - int_offset) * q) * scale * dx[u] +
// offset * am[u], the unit lying in one scale group.
void reference(const TiledWeight& w, const TiledActs& a, int64_t t, int64_t r, double* y, double* mag) {
  double acc = 0.0, m = 0.0;
  for (int64_t u = 0; u < a.n_units; ++u) {
    const int64_t i = t * a.n_units + u;
    int64_t block = 0;
    TiledEntry e;
    const TiledEntry first = tiled_entry(w, r, u * a.fold * kSubK);
    for (int64_t k = u * a.fold * kSubK; k < (u + 1) * a.fold * kSubK; ++k) {
      e = tiled_entry(w, r, k);
      EXPECT_EQ(e.scale, first.scale);  // one scale group holds the unit
      block += int64_t(e.code - w.int_offset()) * a.qs[t * a.kp + k];
    }
    const double scaled = double(block) * double(e.scale) * double(a.dx[i]);
    const double offset = double(e.offset) * double(a.am[i]);
    acc += scaled + offset;
    m += std::fabs(scaled) + std::fabs(offset);
  }
  *y = acc;
  *mag = m;
}

// Float32 accumulation of n terms (each a product rounded once) against float64: at most about
// (n + 2) units of 2^-24 of the sum of the magnitudes; twice that allows for the two-term Q4_1 blocks.
double tolerance(const TiledWeight& w, double mag) {
  return 2.0 * double(w.n_sub + 2) * std::ldexp(1.0, -24) * mag + 1e-30;
}

void check_kernel(const TiledWeight& w, int64_t n_tok, const std::string& what) {
  const Acts acts = make_acts(w, n_tok, 11);
  for (const std::string& isa : isas()) {
    ASSERT_TRUE(select_cpu_isa(isa));
    std::vector<float> y(size_t(n_tok * w.n_out), -1234.5f);
    // Two calls over halves of the tiles and tokens, as threads split the work.
    const int64_t tm = w.n_tiles / 2, tt = n_tok / 2;
    tiled_matmul(w, acts.a, 0, tm, 0, n_tok, y.data(), w.n_out);
    tiled_matmul(w, acts.a, tm, w.n_tiles, 0, tt, y.data(), w.n_out);
    tiled_matmul(w, acts.a, tm, w.n_tiles, tt, n_tok, y.data(), w.n_out);
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t r = 0; r < w.n_out; ++r) {
        double ref, mag;
        reference(w, acts.a, t, r, &ref, &mag);
        ASSERT_NEAR(y[size_t(t * w.n_out + r)], ref, tolerance(w, mag))
            << what << " isa " << isa << " token " << t << " row " << r;
      }
    }
  }
  select_cpu_isa("best");
}

TEST(TiledWeight, gguf_repack_is_lossless) {
  for (GgmlType type : kGguf32) {
    const OwnedWeight o = random_blocks(type, 96, 37, 3);
    const TiledWeight t = tile_weight(o.w, native_tile_kind(type), nullptr);
    EXPECT_EQ(t.n_tiles, 3);
    EXPECT_EQ(t.tile_bytes % 128, 0u);
    std::vector<float> row(96);
    for (int64_t r = 0; r < 37; ++r) {
      dequantize_row(type, o.w.row(r), row.data(), 96);
      for (int64_t k = 0; k < 96; ++k)
        ASSERT_EQ(tiled_value(t, r, k), row[size_t(k)]) << type_name(type) << " r " << r << " k " << k;
    }
  }
}

TEST(TiledWeight, conversions_round_to_half_a_step) {
  const OwnedWeight o = random_f32(160, 21, 5);  // 5 sub-blocks: the last int4b64 group is cut short
  for (TileKind kind : {TileKind::Int4B64, TileKind::Int8B0}) {
    const TiledWeight t = tile_weight(o.w, kind, nullptr);
    const int max_code = kind == TileKind::Int4B64 ? 15 : 255;
    for (int64_t r = 0; r < 21; ++r) {
      for (int64_t k = 0; k < 160; ++k) {
        float v;
        std::memcpy(&v, o.w.row(r) + k * 4, 4);
        const TiledEntry e = tiled_entry(t, r, k);
        ASSERT_GT(e.scale, 0.0f);
        // Half a step, plus the fp16 rounding of the stored offset and scale (relative 2^-11 each).
        const float bound =
            0.5f * e.scale + std::ldexp(1.0f, -10) * (std::fabs(e.offset) + max_code * e.scale);
        ASSERT_LE(std::fabs(tiled_value(t, r, k) - v), bound) << int(kind) << " r " << r << " k " << k;
      }
    }
  }
}

TEST(TiledMatmul, kernels_match_the_formula) {
  // Row counts: one partial tile, several with a partial last one, and for the AVX-512 blocks (decode: 4
  // tiles at once; prefill: 3 tiles x 4 tokens; check_kernel splits the tiles in halves) halves of 4 tiles
  // with a partial last one (125 rows) and of 5 (157); tokens: 1 (decode), 8 + 5, 3, 70 (blocks of 4 and 2
  // left).
  for (GgmlType type : kGguf32) {
    for (int64_t n_out : {5, 45, 125, 157}) {
      for (int64_t n_tok : {1, 13, 3, 70}) {
        const OwnedWeight o = random_blocks(type, 224, n_out, uint32_t(n_out + n_tok));
        check_kernel(tile_weight(o.w, native_tile_kind(type), nullptr), n_tok,
                     std::string(type_name(type)) + " n_out " + std::to_string(n_out));
      }
    }
  }
  // The converted kinds on Q8_0 activations (96, 320 inputs) and on Q8_K ones in units of 2 (Int4B64) or 8
  // sub-blocks (512, 768: whole 256-value blocks).
  for (TileKind kind : {TileKind::Int4B64, TileKind::Int8B0, TileKind::Int4B0}) {
    for (int64_t n_in : {96, 320, 512, 768}) {
      const OwnedWeight o = random_f32(n_in, n_in == 512 ? 157 : 33, uint32_t(n_in));
      const TiledWeight t = tile_weight(o.w, kind, nullptr);
      EXPECT_EQ(t.act_fold(), n_in % 256 ? 1 : kind == TileKind::Int4B64 ? 2 : 8) << n_in;
      for (int64_t n_tok : {1, 10, 19})
        check_kernel(t, n_tok, "kind " + std::to_string(int(kind)) + " n_in " + std::to_string(n_in));
    }
  }
}

// The converted kinds' Q8_K units hold their Q8_K blocks' values: dx the block's d, isum the sum of the
// unit's quants, am = d * isum, for every unit of every token (the kernels' test above reads them as given).
TEST(TiledMatmul, converted_kinds_on_q8_k_prepare_units_from_the_blocks) {
  for (TileKind kind : {TileKind::Int4B64, TileKind::Int8B0}) {
    const OwnedWeight o = random_f32(768, 20, 3);
    const TiledWeight w = tile_weight(o.w, kind, nullptr);
    ASSERT_EQ(w.activation_type(), GgmlType::Q8_K);
    const int64_t n_tok = 5, fold = w.act_fold();
    const Acts acts = make_acts(w, n_tok, 4);
    ASSERT_EQ(acts.a.fold, fold);
    ASSERT_EQ(acts.a.n_units, w.n_sub / fold);
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t u = 0; u < acts.a.n_units; ++u) {
        BlockQ8_K b;
        const int64_t k0 = u * fold * kSubK;
        std::memcpy(&b, &acts.xq[size_t(t) * acts.rs + size_t(k0 / 256) * sizeof b], sizeof b);
        int32_t sum = 0;
        for (int64_t k = k0 % 256; k < k0 % 256 + fold * kSubK; ++k) sum += b.qs[k];
        const int64_t i = t * acts.a.n_units + u;
        ASSERT_EQ(acts.a.dx[i], b.d);
        ASSERT_EQ(acts.a.isum[i], sum);
        ASSERT_EQ(acts.a.am[i], b.d * float(sum));
      }
    }
  }
}

TEST(TiledMatmul, gguf_kinds_equal_the_row_kernels) {
  // Same integer block sums and block scales as dot_row_q (llama.cpp's vec_dot); only the float order
  // differs.
  for (GgmlType type : kGguf32) {
    const OwnedWeight o = random_blocks(type, 576, 29, 9);
    const TiledWeight t = tile_weight(o.w, native_tile_kind(type), nullptr);
    const Acts acts = make_acts(t, 4, 21);
    for (const std::string& isa : isas()) {
      ASSERT_TRUE(select_cpu_isa(isa));
      std::vector<float> y(size_t(4 * 29));
      tiled_matmul(t, acts.a, 0, t.n_tiles, 0, 4, y.data(), 29);
      for (int64_t tok = 0; tok < 4; ++tok) {
        for (int64_t r = 0; r < 29; ++r) {
          const float row = dot_row_q(type, o.w.row(r), &acts.xq[size_t(tok) * acts.rs], 576);
          double ref, mag;
          reference(t, acts.a, tok, r, &ref, &mag);
          ASSERT_NEAR(y[size_t(tok * 29 + r)], row, 2.0 * tolerance(t, mag)) << type_name(type) << " " << isa;
        }
      }
    }
    select_cpu_isa("best");
  }
}

// The tiles prepare_weights makes for w in this mode (the repack is deterministic).
TiledWeight tiles_of(const Weight& w, WeightsMode mode) {
  if (mode == WeightsMode::Int8B0) return tile_weight(w, TileKind::Int8B0, nullptr);
  if (mode == WeightsMode::Int4B64) return tile_weight(w, TileKind::Int4B64, nullptr);
  return tile_weight(w, native_tile_kind(w.type), nullptr);
}

// got: the backend on tiles; rows: the backend on the GGUF rows (x: [nt][w.n_in]).
// Native tiles hold the GGUF values, so the two differ by float order only: 1e-5 of the largest output.
// Converted tiles hold other weights; there the check is against those weights times the float activations,
// within what the 8-bit activations can move it: each activation is off by at most half its block's step
// (amax / 254), so |error| <= sum_k |w_k| * amax(block of k) / 254.
void expect_close(const TiledWeight& t, const Weight& w, const float* x, int64_t nt,
                  const std::vector<float>& got, const std::vector<float>& rows) {
  double scale = 0.0;
  for (float v : rows) scale = std::max(scale, double(std::fabs(v)));
  const bool native = t.kind != TileKind::Int8B0 && t.kind != TileKind::Int4B64;
  for (int64_t tok = 0; tok < nt; ++tok) {
    const float* xt = x + tok * w.n_in;
    for (int64_t r = 0; r < w.n_out; ++r) {
      const size_t j = size_t(tok * w.n_out + r);
      if (native) {
        ASSERT_NEAR(got[j], rows[j], 1e-5 * scale) << "row " << r << " token " << tok;
        continue;
      }
      double ref = 0.0, bound = 1e-5 * scale;
      for (int64_t k = 0; k < w.n_in; ++k) {
        float amax = 0.0f;
        for (int64_t e = k / kSubK * kSubK; e < (k / kSubK + 1) * kSubK; ++e)
          amax = std::max(amax, std::fabs(xt[e]));
        const double v = tiled_value(t, r, k);
        ref += v * xt[k];
        bound += std::fabs(v) * amax / 254.0;
      }
      ASSERT_NEAR(got[j], ref, bound) << "row " << r << " token " << tok;
    }
  }
}

TEST(TiledMatmul, backend_uses_tiles_and_matches_rows) {
  // A one-layer model of random Q4_0 / Q4_1 / Q8_0 matrices: matmul_shared over prepared tiles equals the
  // unprepared backend's row path, for decode and prefill, in every weights mode that keeps the types.
  constexpr int64_t n_embd = 96, n_ff = 160, n_tok = 100;
  std::vector<OwnedWeight> owned;
  ModelWeights mw;
  mw.layers.resize(1);
  LayerWeights& l = mw.layers[0];
  uint32_t seed = 100;
  auto bind = [&](Weight& w, GgmlType type, int64_t n_in, int64_t n_out) {
    owned.push_back(random_blocks(type, n_in, n_out, seed++));
    w = owned.back().w;
  };
  owned.reserve(8);
  bind(l.wq, GgmlType::Q4_0, n_embd, n_embd);
  bind(l.wk, GgmlType::Q4_0, n_embd, 32);
  bind(l.wv, GgmlType::Q8_0, n_embd, 32);
  bind(l.wo, GgmlType::Q4_1, n_embd, n_embd);
  bind(l.w_gate, GgmlType::Q4_1, n_embd, n_ff);
  bind(l.w_up, GgmlType::Q4_1, n_embd, n_ff);
  bind(l.w_down, GgmlType::Q8_0, n_ff, n_embd);
  bind(mw.output, GgmlType::Q4_0, n_embd, 77);

  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n_tok * n_ff));
  for (auto& v : x) v = nd(rng);

  ThreadPool pool(2);
  CpuBackend rows(pool, ActivationMode::Quantized, n_tok * n_ff);
  for (WeightsMode mode : {WeightsMode::Native, WeightsMode::Int8B0, WeightsMode::Int4B64}) {
    CpuBackend tiles(pool, ActivationMode::Quantized, n_tok * n_ff);
    tiles.prepare_weights(mw.weight_set(), mode);
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
      for (int i = 0; i < 3; ++i) expect_close(tiles_of(*qkv[i], mode), *qkv[i], x.data(), nt, a[i], b[i]);
      std::vector<float> ya(size_t(nt * n_embd)), yb(size_t(nt * n_embd));
      tiles.matmul(l.w_down, x.data(), nt, ya.data());
      rows.matmul(l.w_down, x.data(), nt, yb.data());
      expect_close(tiles_of(l.w_down, mode), l.w_down, x.data(), nt, ya, yb);
    }
  }
}

TEST(TiledMatmul, the_best_isa_the_cpu_runs_is_used) {
  select_cpu_isa("best");
  const CpuFeatures& f = cpu_features();
#if defined(__aarch64__)
  // Advanced SIMD is part of ARMv8-A; the dot product is optional (qemu's Cortex-A53 model lacks it), and
  // then the baseline kernel must be the one picked.
  EXPECT_STREQ(tiled_isa_name(), f.neon_dotprod ? "neondot" : "neon");
  EXPECT_TRUE(select_cpu_isa("neon"));
  EXPECT_EQ(select_cpu_isa("neondot"), f.neon_dotprod);
  EXPECT_FALSE(select_cpu_isa("avx2"));
#elif defined(__x86_64__)
  EXPECT_STREQ(tiled_isa_name(), f.avx512_vnni     ? "avx512vnni"
                                 : f.avx_vnni      ? "avxvnni"
                                 : f.avx2_fma_f16c ? "avx2"
                                                   : "scalar");
  EXPECT_FALSE(select_cpu_isa("neon"));
  EXPECT_FALSE(select_cpu_isa("neondot"));
#endif
  EXPECT_TRUE(select_cpu_isa("scalar"));
  EXPECT_STREQ(tiled_isa_name(), "scalar");
  EXPECT_FALSE(select_cpu_isa("avx1024"));
  select_cpu_isa("best");
}

TEST(TiledWeight, float_path_of_converted_modes_holds_the_tiles_values) {
  // --weights int4b64 / int8b0 with --activations f32: the backend multiplies float activations by the
  // exact values the tiles hold (one shared conversion, quantize_row_asym), to float accumulation error.
  // K = 96 leaves Int4B64 a last group of 32.
  constexpr int64_t n_in = 96, n_out = 37, n_tok = 3;
  OwnedWeight o = random_blocks(GgmlType::Q8_0, n_in, n_out, 77);
  ModelWeights mw;
  mw.output = o.w;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  std::vector<float> x(size_t(n_tok * n_in));
  for (auto& v : x) v = ud(rng);
  ThreadPool pool(1);
  for (WeightsMode mode : {WeightsMode::Int8B0, WeightsMode::Int4B64}) {
    CpuBackend be(pool, ActivationMode::F32, 0);
    be.prepare_weights(mw.weight_set(), mode);
    const TiledWeight t = tiles_of(o.w, mode);
    std::vector<float> y(size_t(n_tok * n_out), NAN);
    be.matmul(mw.output, x.data(), n_tok, y.data());
    for (int64_t tok = 0; tok < n_tok; ++tok) {
      for (int64_t r = 0; r < n_out; ++r) {
        double ref = 0.0, mag = 0.0;
        for (int64_t k = 0; k < n_in; ++k) {
          ref += double(tiled_value(t, r, k)) * x[size_t(tok * n_in + k)];
          mag += std::fabs(double(tiled_value(t, r, k)) * x[size_t(tok * n_in + k)]);
        }
        ASSERT_NEAR(y[size_t(tok * n_out + r)], ref, 1e-6 * mag + 1e-30)
            << weights_mode_name(mode) << " row " << r << " token " << tok;
      }
    }
  }
}

TEST(TiledWeight, bad_modes_are_named) {
  EXPECT_EQ(parse_weights_mode("int4b64"), WeightsMode::Int4B64);
  EXPECT_THROW(parse_weights_mode("int3"), Error);
}

}  // namespace
}  // namespace tilellm
