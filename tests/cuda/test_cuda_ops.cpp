// Every op of the CUDA backend against the CPU reference on random data of odd sizes, in both activation
// modes: the float path (--activations f32) and the quantized one (int8 activations, integer products),
// whose reference multiplies the exact weights by the activations as rounded_matmul_input rounds them.
// Weights of every GGUF type the device formats take, and the converted formats; decode (1 token: the
// matvec kernels, alone and as q/k/v and gate/up jobs; 2-8 tokens: the few-token kernels) and prompt sizes
// that leave partial tiles of rows (131 rows: 128 + 3) and of tokens (3, 21, 70 = 64 + 6); norms (alone, with
// the residual add, with the Q8 output), RoPE and the fused RoPE + KV write (bit-equal to the CPU's: the
// cache rows compared byte for byte), the q/k/v products with RoPE + KV write in their launch (bit-equal to
// the products and the fused op), the residual add and norm carried by the products around them (bit-equal
// to add_rmsnorm's launch between them), GLU, adds, the KV cache ops and attention (one and several splits of
// the keys, windows, grouped heads, both cache types; decode over every head-size bucket and short contexts).
//
// Tolerances. Products: each output may differ from the double reference on the same inputs by the
// rounding of a differently ordered float32 sum and of the block scales' products, bounded by
// 8 n u sum_j |w_j x_j| + 1e-30 (u = 2^-24); the integer sums are exact; the fp16 GEMM of longer prompts
// adds its weights' rounding (expect_products). Elementwise ops within a few ulps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "../gpu_common/random_weights.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/kv_cache.h"
#include "backends/registry.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "cuda_test.h"
#include "format/asym_quant.h"
#include "format/quants.h"

namespace tilellm {
namespace {

using test::ConvertedWeight;
using test::make_weight;
using test::OwnedWeight;
using test::rand_floats;

constexpr double kU = 0x1p-24;

class CudaOps : public ::testing::TestWithParam<ActivationMode> {
 protected:
  static constexpr int64_t kLayers = 2, kCtx = 1100;  // 1100: the keys of a late position span 9 chunks

  void SetUp() override {
    SKIP_WITHOUT_CUDA();
    pool_ = std::make_unique<ThreadPool>(2);
    BackendParams hp;
    hp.pool = pool_.get();
    hp.activations = ActivationMode::F32;
    hp.max_in_elems = 1 << 17;
    cpu_ = host_backend().make(hp);
  }

  CudaBackendOptions options(WeightsMode weights = WeightsMode::Native) const {
    CudaBackendOptions o;
    o.device = test::cuda_test_device();
    o.activations = GetParam();
    o.weights = weights;
    o.max_tokens = 72;
    o.max_in_elems = 1 << 17;
    o.max_out_elems = 1 << 17;
    o.max_width = 4096;
    o.self_check = false;       // these tests check the kernels themselves; a CPU fallback would hide a fault
    o.half_chunk_bytes = 4096;  // the fp16 GEMM's weights in many chunks (131 x 160: 12 rows a chunk)
    o.half_gemm = CudaBackendOptions::HalfGemm::All;  // every format's products through it
    return o;
  }

  std::unique_ptr<CudaBackend> make(WeightsMode weights = WeightsMode::Native, int64_t kv_dim = 0,
                                    GgmlType kv_type = GgmlType::F16, int splits = 0) const {
    CudaBackendOptions o = options(weights);
    if (kv_dim > 0) {
      o.kv_layers = kLayers;
      o.kv_ctx = kCtx;
      o.kv_dim = kv_dim;
      o.kv_type = kv_type;
      o.attention_splits = splits;
    }
    return std::make_unique<CudaBackend>(o);
  }

  void check_converted(WeightsMode mode, int64_t n_in, int64_t n_out, std::initializer_list<int64_t> toks,
                       uint32_t& seed);

  // y = W x: each output within the reordered-sum bound of the double reference on the inputs as the
  // backend rounds them (exact_rows: the weights' exact values, [n_out][n_in]). On the fp16 GEMM the
  // weights are rounded to fp16 too: a product moves by at most 2^-11 of itself, or by 2^-25 times its
  // input for a weight in fp16's subnormal range (both bounds doubled below).
  void expect_products(const CudaBackend& be, const Weight& w, const std::vector<float>& exact_rows,
                       const std::vector<float>& x, int64_t n_tok, const std::vector<float>& got,
                       const char* what) {
    std::vector<float> xr(x.size());
    be.rounded_matmul_input(w, x.data(), n_tok, xr.data());
    const bool half = be.on_half_gemm(w, n_tok);
    for (int64_t r = 0; r < w.n_out; ++r) {
      const float* row = exact_rows.data() + r * w.n_in;
      for (int64_t t = 0; t < n_tok; ++t) {
        double ref = 0.0, mag = 0.0, xs = 0.0;
        for (int64_t j = 0; j < w.n_in; ++j) {
          const double p = double(row[j]) * xr[size_t(t * w.n_in + j)];
          ref += p;
          mag += std::abs(p);
          xs += std::abs(double(xr[size_t(t * w.n_in + j)]));
        }
        const double rounding = half ? std::ldexp(mag, -10) + std::ldexp(xs, -24) : 0.0;
        const size_t i = size_t(t * w.n_out + r);
        ASSERT_NEAR(got[i], ref, 8.0 * double(w.n_in) * kU * mag + rounding + 1e-30)
            << w.name << " " << what << " row " << r << " token " << t << " of " << n_tok;
      }
    }
  }

  static std::vector<float> exact_rows(const Weight& w) {
    std::vector<float> v(size_t(w.n_in * w.n_out));
    for (int64_t r = 0; r < w.n_out; ++r) dequantize_row(w.type, w.row(r), v.data() + r * w.n_in, w.n_in);
    return v;
  }

  void check_matmul(CudaBackend& be, const Weight& w, const std::vector<float>& exact, int64_t n_tok,
                    uint32_t seed) {
    const std::vector<float> x = rand_floats(size_t(n_tok * w.n_in), seed);
    std::vector<float> got(size_t(n_tok * w.n_out), NAN);
    be.matmul(w, x.data(), n_tok, got.data());
    expect_products(be, w, exact, x, n_tok, got, "matmul");
  }

  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Backend> cpu_;
};

INSTANTIATE_TEST_SUITE_P(Modes, CudaOps, ::testing::Values(ActivationMode::F32, ActivationMode::Quantized),
                         [](const auto& info) {
                           return info.param == ActivationMode::F32 ? "f32" : "quantized";
                         });

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q5_1,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

TEST_P(CudaOps, matmul_and_embedding_of_every_weight_type) {
  auto be = make();
  uint32_t seed = 1;
  std::vector<OwnedWeight> kept;  // alive while the backend is: it knows them by address
  for (GgmlType t : kTypes) {
    const int64_t bs = type_traits(t).block_size;
    // 131 rows: a block of 128 rows and a partial one; 160 inputs: 5 blocks of 32 (a partial stage of 2).
    const int64_t n_in = bs == 1 ? 77 : bs == 256 ? 512 : 160, n_out = 131;
    kept.push_back(make_weight(t, n_in, n_out, seed++));
    const OwnedWeight& ow = kept.back();
    be->upload_weight(ow.w);
    const std::vector<float> exact = exact_rows(ow.w);
    // 1: decode; 2, 3, 7, 8: the few-token kernel's two sizes, full and partial; 9, 21, 70: prompts.
    for (int64_t n_tok : {1, 2, 3, 7, 8, 9, 21, 70}) check_matmul(*be, ow.w, exact, n_tok, seed++);
    const int32_t ids[4] = {130, 0, 17, 130};
    std::vector<float> ref(size_t(4 * n_in)), got(ref.size(), NAN);
    cpu_->embed(ow.w, ids, 4, 0.75f, ref.data());
    be->embed(ow.w, ids, 4, 0.75f, got.data());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 1e-6 * std::abs(ref[i])) << type_name(t) << " element " << i;
  }
}

// The fp16 GEMM of prompts (quantized mode, where cuBLAS is present) on activations beyond fp16's range
// and far below its normal range: the power-of-two scale keeps every product within the same bound.
TEST_P(CudaOps, half_gemm_takes_activations_of_any_magnitude) {
  if (GetParam() != ActivationMode::Quantized) GTEST_SKIP() << "the fp16 GEMM serves the quantized mode";
  auto be = make();
  const OwnedWeight ow = make_weight(GgmlType::Q4_0, 256, 67, 300);
  be->upload_weight(ow.w);
  if (!be->on_half_gemm(ow.w, 40)) GTEST_SKIP() << "prompts: " << be->half_gemm_status();
  EXPECT_FALSE(be->on_half_gemm(ow.w, CudaBackend::kHalfGemmTokens - 1));
  const std::vector<float> exact = exact_rows(ow.w);
  uint32_t seed = 301;
  for (double scale : {1e6, 3e-9, 1.0}) {
    std::vector<float> x = rand_floats(size_t(40 * ow.w.n_in), seed++);
    for (float& v : x) v = float(v * scale);
    std::vector<float> got(size_t(40 * ow.w.n_out), NAN);
    be->matmul(ow.w, x.data(), 40, got.data());
    expect_products(*be, ow.w, exact, x, 40, got, "activations scaled");
  }
}

// A weight converted at upload (--weights mode) of n_out x n_in, multiplied by n_tok random tokens for each
// n_tok of toks against its exact values.
void CudaOps::check_converted(WeightsMode mode, int64_t n_in, int64_t n_out,
                              std::initializer_list<int64_t> toks, uint32_t& seed) {
  auto be = make(mode);
  const ConvertedWeight cw(mode, n_in, n_out, seed++);
  be->upload_weight(cw.w);
  for (int64_t n_tok : toks) {
    const std::vector<float> x = rand_floats(size_t(n_tok * cw.w.n_in), seed++);
    std::vector<float> got(size_t(n_tok * cw.w.n_out), NAN);
    be->matmul(cw.w, x.data(), n_tok, got.data());
    expect_products(*be, cw.w, cw.exact, x, n_tok, got, weights_mode_name(mode));
  }
}

TEST_P(CudaOps, converted_formats) {
  uint32_t seed = 100;
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0, WeightsMode::F16, WeightsMode::F32})
    check_converted(mode, 352, 133, {1, 5, 70}, seed);  // 11 blocks: INT4B64 ends in half a group of 64
}

// A long row (11 008 inputs: 344 blocks, more than one unrolled step a lane) in decode and in a batch
// decode step of 6 tokens, every block format.
TEST_P(CudaOps, matvec_long_rows) {
  auto be = make();
  uint32_t seed = 200;
  std::vector<OwnedWeight> kept;
  for (GgmlType t :
       {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q5_K, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const int64_t n_in = type_traits(t).block_size == 256 ? 11008 / 256 * 256 : 11008;
    kept.push_back(make_weight(t, n_in, 19, seed++));
    be->upload_weight(kept.back().w);
    for (int64_t n_tok : {1, 6}) check_matmul(*be, kept.back().w, exact_rows(kept.back().w), n_tok, seed++);
  }
}

// Decode products with more rows than the GPU holds warps (20 001: pairs of rows a warp, the streamed
// kernel's path for large matrices; the smaller products above take single rows), each format it reads:
// the 4-bit ones, the byte ones (Q8_0, INT8B0) and Q6K; and F16 rows (their own streamed kernel, a row at a
// time: each warp walks two or three rows).
TEST_P(CudaOps, matvec_many_rows) {
  auto be = make();
  uint32_t seed = 250;
  std::vector<OwnedWeight> kept;
  for (GgmlType t :
       {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::F16}) {
    const int64_t n_in = type_traits(t).block_size == 256 ? 256 : 96;
    kept.push_back(make_weight(t, n_in, 20001, seed++));
    be->upload_weight(kept.back().w);
    check_matmul(*be, kept.back().w, exact_rows(kept.back().w), 1, seed++);
  }
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0})
    check_converted(mode, 96, 20001, {1}, seed);
}

// q/k/v as one job (matmul_shared) and gate/up with their activation (matmul_glu), in decode (1 token) and
// in a batch decode step (5 tokens: one launch over the matrices, then the GLU), on mirrored outputs (the
// only case they are fused), against the products one by one; and the product after the GLU (down), which
// in the quantized mode of one token reads the rounding the GLU's launch made of its output (160 rows: five
// blocks of 32, each completed by four blocks of 8). The host writes a mirrored array only after
// host_wrote (which first brings down what the device holds newer).
TEST_P(CudaOps, shared_input_jobs_equal_the_products_one_by_one) {
  const int64_t n_in = 256, nq = 96, nkv = 35, nff = 256;  // gate/up arrays: the widest of n_down below
  for (int64_t nt : {1, 5}) {
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
      std::vector<float> x(static_cast<size_t>(nt * n_in)), q(static_cast<size_t>(nt * nq)),
          k(static_cast<size_t>(nt * nkv)), v(static_cast<size_t>(nt * nkv)),
          gate(static_cast<size_t>(nt * nff)), up(static_cast<size_t>(nt * nff)),
          down(static_cast<size_t>(nt * nq));
      CudaBackendOptions o = options();
      for (std::vector<float>* a : {&x, &q, &k, &v, &gate, &up, &down})
        o.resident.push_back({a->data(), a->size() * 4});
      CudaBackend be(o);
      const int64_t n_down = type_traits(t).block_size == 256 ? 256 : 160;  // K-quants: whole super-blocks
      OwnedWeight wq = make_weight(t, n_in, nq, 11), wk = make_weight(t, n_in, nkv, 12),
                  wv = make_weight(t, n_in, nkv, 13), wg = make_weight(t, n_in, n_down, 14),
                  wu = make_weight(t, n_in, n_down, 15), wd = make_weight(t, n_down, nq, 17);
      for (const OwnedWeight* w : {&wq, &wk, &wv, &wg, &wu, &wd}) be.upload_weight(w->w);
      const std::vector<float> xs = rand_floats(size_t(nt * n_in), 16);
      be.host_wrote(x.data(), x.size() * 4);
      std::copy(xs.begin(), xs.end(), x.begin());
      const Weight* ws[3] = {&wq.w, &wk.w, &wv.w};
      float* ys[3] = {q.data(), k.data(), v.data()};
      be.matmul_shared(ws, ys, 3, x.data(), nt);
      for (int i = 0; i < 3; ++i) {
        be.to_host(ys[i], nt * ws[i]->n_out * 4);
        std::vector<float> got(ys[i], ys[i] + nt * ws[i]->n_out);
        expect_products(be, *ws[i], exact_rows(*ws[i]), xs, nt, got, "matmul_shared");
      }
      for (FfnAct act : {FfnAct::SiLU, FfnAct::GeluTanh}) {
        // gate and down are [nt][n_down] and [nt][nq] at the arrays' starts.
        be.matmul_glu(wg.w, wu.w, x.data(), nt, act, gate.data(), up.data());
        be.matmul(wd.w, gate.data(), nt, down.data());
        be.to_host(gate.data(), size_t(nt * n_down) * 4);
        be.to_host(down.data(), down.size() * 4);
        std::vector<float> g(static_cast<size_t>(nt * n_down)), u(g.size()), ref(g.size());
        be.matmul(wg.w, xs.data(), nt, g.data());
        be.matmul(wu.w, xs.data(), nt, u.data());
        cpu_->glu(g.data(), u.data(), ref.data(), nt * n_down, act);
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_NEAR(gate[i], ref[i], 1e-5 * (std::abs(ref[i]) + 1e-3))
              << type_name(t) << " glu row " << i << " of " << nt << " tokens";
        const std::vector<float> gin(gate.begin(), gate.begin() + nt * n_down);
        const std::vector<float> dgot(down.begin(), down.begin() + nt * nq);
        expect_products(be, wd.w, exact_rows(wd.w), gin, nt, dgot, "the product after the GLU");
      }
    }
  }
}

// Decode's q/k/v products with their RoPE and KV write in one launch (matmul_rope_kv_store, quantized mode,
// norm pairs, rows streamed two at a time: as many heads as this GPU needs for that) equal, bit for bit, the
// products followed by rope_kv_store (q and k turned in place, v, the cache rows); a partial rotation (24 of
// 32 dims), grouped KV heads, both cache types, three streamed formats, positions 0, 17 and the cache's
// last. In the float mode the op takes the unfused path: the same comparison holds.
TEST_P(CudaOps, qkv_products_with_rope_and_kv_write_equal_the_unfused_ops) {
  const int64_t hd = 32, rd = 24;
  const bool fused = GetParam() == ActivationMode::Quantized;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
    const int f = t == GgmlType::Q4_0 ? cuda::kQ4_0 : t == GgmlType::Q8_0 ? cuda::kQ8_0 : cuda::kQ4K;
    const int min_rows = cuda::matvec_rope_min_rows(f);
    ASSERT_GT(min_rows, 0) << type_name(t);
    // q rows n_head * hd, k and v half that each: at least min_rows in all.
    const int64_t n_head = 2 * ((min_rows + 4 * hd - 1) / (4 * hd)) + 2, n_head_kv = n_head / 2;
    const int64_t kv_dim = n_head_kv * hd, n_in = t == GgmlType::Q4_K ? 256 : 96;
    for (GgmlType kv_type : {GgmlType::F16, GgmlType::F32}) {
      std::vector<float> x(static_cast<size_t>(n_in)), q(static_cast<size_t>(n_head * hd)),
          k(static_cast<size_t>(kv_dim)), v(static_cast<size_t>(kv_dim));
      CudaBackendOptions o = options();
      o.kv_layers = kLayers, o.kv_ctx = kCtx, o.kv_dim = kv_dim, o.kv_type = kv_type;
      o.profiling = true;  // the kernels' names show which path ran
      o.fuse_qkv_rope = true;
      for (std::vector<float>* a : {&x, &q, &k, &v}) o.resident.push_back({a->data(), a->size() * 4});
      CudaBackend be(o);
      KvCache dev(kLayers, kCtx, n_head_kv, hd, kv_type, false);
      OwnedWeight wq = make_weight(t, n_in, n_head * hd, 21), wk = make_weight(t, n_in, kv_dim, 22),
                  wv = make_weight(t, n_in, kv_dim, 23);
      for (const OwnedWeight* w : {&wq, &wk, &wv}) be.upload_weight(w->w);
      const Weight* ws[3] = {&wq.w, &wk.w, &wv.w};
      float* ys[3] = {q.data(), k.data(), v.data()};
      const RopeTable table(kCtx, rd, 10000.0f, 1.0f);
      RopeShape rs;
      rs.n_head = n_head, rs.n_head_kv = n_head_kv, rs.head_dim = hd, rs.rope_dim = rd, rs.table = &table;
      rs.mode = RopeMode::Norm;
      uint32_t seed = 70;
      for (int32_t p : {0, 17, int32_t(kCtx - 1)}) {
        const std::vector<float> xs = rand_floats(size_t(n_in), seed++);
        std::vector<float> outs[2][3];
        // Pass 0: layer 1 through the fused op; pass 1: layer 0 through the products, then rope_kv_store.
        for (int pass = 0; pass < 2; ++pass) {
          be.host_wrote(x.data(), x.size() * 4);
          std::copy(xs.begin(), xs.end(), x.begin());
          be.reset_kernel_times();
          if (pass == 0) {
            be.matmul_rope_kv_store(ws, x.data(), 1, q.data(), k.data(), v.data(), dev, 1, &p, rs);
          } else {
            be.matmul_shared(ws, ys, 3, x.data(), 1);
            be.rope_kv_store(q.data(), k.data(), v.data(), dev, 0, &p, 1, rs);
          }
          int64_t fused_calls = 0;
          for (const KernelTime& kt : be.kernel_times())
            if (kt.name == "matvec_rope_kv_store") fused_calls += kt.calls;
          ASSERT_EQ(fused_calls, pass == 0 && fused ? 1 : 0) << type_name(t) << " pass " << pass;
          for (int i = 0; i < 3; ++i) {
            be.to_host(ys[i], ws[i]->n_out * 4);
            outs[pass][i].assign(ys[i], ys[i] + ws[i]->n_out);
          }
        }
        for (int i = 0; i < 3; ++i)
          ASSERT_TRUE(std::equal(outs[1][i].begin(), outs[1][i].end(), outs[0][i].begin()))
              << type_name(t) << " output " << i << " at position " << p;
        KvCache back(kLayers, kCtx, n_head_kv, hd, kv_type);
        be.kv_to_host(back, 0, kCtx);
        for (int kind = 0; kind < 2; ++kind)
          ASSERT_EQ(0, std::memcmp(back.plane(0, kind) + size_t(p) * back.row_bytes(),
                                   back.plane(1, kind) + size_t(p) * back.row_bytes(), back.row_bytes()))
              << type_name(t) << " cache kind " << kind << " at position " << p;
      }
    }
  }
}

// Decode's residual add and RMSNorm carried by the products around them (--cuda-fuse-norm): the product
// before adds into the residual as it writes its rows, the product after forms the norm in its own launch.
// Against a backend that launches add_rmsnorm between them: the residual, the norm and the consumer's output
// bit-equal, for a GLU job, a q/k/v job and a single product (the output) whose rows stream in pairs, and a
// q/k/v job too small for pairs (the norm then launched alone before it); odd row counts (a pair's second
// row past the end); widths 480 (fewer float4s than the row kernel's whole warps of threads; Q4_K: 768) and
// 4352 (past the 1024 float4s its threads hold one each); three streamed formats. In the float mode
// nothing is carried and the same holds.
TEST_P(CudaOps, products_carrying_the_residual_add_and_norm_equal_the_launches_apart) {
  const bool quantized = GetParam() == ActivationMode::Quantized;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
    const int f = t == GgmlType::Q4_0 ? cuda::kQ4_0 : t == GgmlType::Q8_0 ? cuda::kQ8_0 : cuda::kQ4K;
    const int64_t pairs = cuda::matvec_rope_min_rows(f);  // rows a job needs to stream them in pairs
    ASSERT_GT(pairs, 0) << type_name(t);
    for (int64_t n : {int64_t(t == GgmlType::Q4_K ? 768 : 480), int64_t(4352)}) {
      const int64_t n_x = t == GgmlType::Q4_K ? 256 : 96, m = 71, kv = 37;
      OwnedWeight wo = make_weight(t, n_x, n, 31), wg = make_weight(t, n, m, 32),
                  wu = make_weight(t, n, m, 33), wq = make_weight(t, n, pairs + 1, 34),
                  wk = make_weight(t, n, kv, 35), wv = make_weight(t, n, kv, 36),
                  wout = make_weight(t, n, pairs + 3, 37);
      const std::vector<float> g = rand_floats(size_t(n), 38), x0 = rand_floats(size_t(n_x), 39),
                               acc0 = rand_floats(size_t(n), 40);
      std::vector<float> results[2][4];
      for (int fuse = 0; fuse < 2; ++fuse) {
        const size_t nx = static_cast<size_t>(n_x), nn = static_cast<size_t>(n), nm = static_cast<size_t>(m),
                     np = static_cast<size_t>(pairs), nkv = static_cast<size_t>(kv);
        std::vector<float> x(nx), o(nn), acc(nn), xn(nn), gate(nm), up(nm), q(np + 1), k(nkv), v(nkv),
            k2(nkv), out(np + 3);
        CudaBackendOptions opt = options();
        opt.max_width = 4352;
        opt.profiling = true;  // the kernels' names show which path ran
        opt.fuse_norm = fuse == 1;
        for (std::vector<float>* a : {&x, &o, &acc, &xn, &gate, &up, &q, &k, &v, &k2, &out})
          opt.resident.push_back({a->data(), a->size() * 4});
        CudaBackend be(opt);
        for (const OwnedWeight* w : {&wo, &wg, &wu, &wq, &wk, &wv, &wout}) be.upload_weight(w->w);
        for (int c = 0; c < 4; ++c) {
          be.host_wrote(x.data(), x.size() * 4);
          std::copy(x0.begin(), x0.end(), x.begin());
          be.host_wrote(acc.data(), acc.size() * 4);
          std::copy(acc0.begin(), acc0.end(), acc.begin());
          be.reset_kernel_times();
          be.matmul_add_rmsnorm(wo.w, x.data(), 1, o.data(), acc.data(), g.data(), xn.data(), 1e-5f);
          std::vector<std::vector<float>*> outs;
          if (c == 0) {
            be.matmul_glu(wg.w, wu.w, xn.data(), 1, FfnAct::SiLU, gate.data(), up.data());
            outs = {&gate};
          } else if (c == 1 || c == 3) {
            const Weight* ws[3] = {c == 1 ? &wq.w : &wk.w, &wv.w, &wk.w};
            float* ys[3] = {c == 1 ? q.data() : k.data(), v.data(), k2.data()};
            be.matmul_shared(ws, ys, 3, xn.data(), 1);
            outs = {c == 1 ? &q : &k, &v, &k2};
          } else {
            be.matmul(wout.w, xn.data(), 1, out.data());
            outs = {&out};
          }
          int64_t carried = 0;
          for (const KernelTime& kt : be.kernel_times())
            if (kt.name == "matvec_norm") carried += kt.calls;
          cuda::MatvecJob before;  // the product before: carried where it takes its rows one at a time
          before.w[0].fmt = f;
          before.w[0].n_out = int(n);
          const bool carries = fuse == 1 && quantized && c != 3 && cuda::matvec_residual_fits(before);
          ASSERT_EQ(carried, carries ? 1 : 0) << type_name(t) << " width " << n << " consumer " << c;
          std::vector<float>& r = results[fuse][c];
          for (std::vector<float>* a : {&acc, &xn}) outs.insert(outs.begin(), a);
          for (std::vector<float>* a : outs) {
            be.to_host(a->data(), a->size() * 4);
            r.insert(r.end(), a->begin(), a->end());
          }
        }
      }
      for (int c = 0; c < 4; ++c)
        ASSERT_TRUE(results[0][c] == results[1][c]) << type_name(t) << " width " << n << " consumer " << c;
    }
  }
}

TEST_P(CudaOps, norms_adds_glu) {
  auto be = make();
  for (int64_t n : {int64_t(57), int64_t(320), int64_t(4096)}) {
    const int64_t rows = 3;
    const std::vector<float> x = rand_floats(size_t(rows * n), 21), w = rand_floats(size_t(n), 22),
                             r = rand_floats(size_t(rows * n), 23);
    std::vector<float> ref(x.size()), got(x.size(), NAN);
    cpu_->rmsnorm(x.data(), w.data(), ref.data(), rows, n, 1e-5f);
    be->rmsnorm(x.data(), w.data(), got.data(), rows, n, 1e-5f);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 4e-6 * (std::abs(ref[i]) + 1e-3)) << "rmsnorm " << n;
    std::vector<float> acc_ref = x, acc_got = x;
    cpu_->add(acc_ref.data(), r.data(), rows * n);
    cpu_->rmsnorm(acc_ref.data(), w.data(), ref.data(), rows, n, 1e-5f);
    be->add_rmsnorm(acc_got.data(), r.data(), w.data(), got.data(), rows, n, 1e-5f);
    EXPECT_EQ(acc_got, acc_ref) << "add_rmsnorm's sum " << n;
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 4e-6 * (std::abs(ref[i]) + 1e-3)) << "add_rmsnorm " << n;
    std::vector<float> b = rand_floats(size_t(n), 24), rows_ref = x, rows_got = x;
    cpu_->add_rows(rows_ref.data(), b.data(), rows, n);
    be->add_rows(rows_got.data(), b.data(), rows, n);
    EXPECT_EQ(rows_got, rows_ref) << "add_rows " << n;
    std::vector<float> g = rand_floats(size_t(rows * n), 25, -8.0f, 8.0f);
    for (FfnAct act : {FfnAct::SiLU, FfnAct::GeluTanh}) {
      cpu_->glu(g.data(), r.data(), ref.data(), rows * n, act);
      be->glu(g.data(), r.data(), got.data(), rows * n, act);
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 1e-5 * (std::abs(ref[i]) + 1e-4)) << "glu";
    }
  }
}

TEST_P(CudaOps, rope_both_modes_with_partial_rotation) {
  auto be = make();
  const int64_t n_tok = 5, heads = 3, hd = 24;
  for (int64_t rope_dim : {hd, int64_t(16)}) {
    const RopeTable table(40, rope_dim, 10000.0f, 1.0f);
    const int32_t pos[5] = {39, 0, 7, 21, 3};
    for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
      std::vector<float> ref = rand_floats(size_t(n_tok * heads * hd), 31), got = ref;
      cpu_->rope(ref.data(), n_tok, heads, hd, rope_dim, pos, table, mode);
      be->rope(got.data(), n_tok, heads, hd, rope_dim, pos, table, mode);
      EXPECT_EQ(got, ref) << "rope: the CPU's products and sums, rounded one by one";
    }
  }
}

// kv_store and attention through the session-shaped cache, and the fused RoPE + KV write, against the CPU
// on its own host cache: both cache types, windows, 4 query heads over 2 KV heads; attention at positions
// whose keys span several chunks, in 1 and 5 splits for one token.
TEST_P(CudaOps, kv_cache_and_attention) {
  const int64_t hd = 32, n_head = 4, n_head_kv = 2, kv_dim = n_head_kv * hd;
  for (GgmlType kv_type : {GgmlType::F16, GgmlType::F32}) {
    for (int splits : {1, 5}) {
      std::vector<float> q(size_t(8 * n_head * hd)), k(size_t(8 * kv_dim)), v(size_t(8 * kv_dim));
      CudaBackendOptions o = options();
      o.kv_layers = kLayers, o.kv_ctx = kCtx, o.kv_dim = kv_dim, o.kv_type = kv_type,
      o.attention_splits = splits;
      for (std::vector<float>* a : {&q, &k, &v}) o.resident.push_back({a->data(), a->size() * 4});
      CudaBackend be(o);
      KvCache host(kLayers, kCtx, n_head_kv, hd, kv_type), dev(kLayers, kCtx, n_head_kv, hd, kv_type, false);
      const RopeTable table(kCtx, hd, 10000.0f, 1.0f);
      RopeShape rs;
      rs.n_head = n_head, rs.n_head_kv = n_head_kv, rs.head_dim = hd, rs.rope_dim = hd, rs.table = &table;
      rs.mode = RopeMode::Neox;
      // Fill layer 1 with 1050 positions, 7 at a time through the fused op, plus a last partial batch.
      uint32_t seed = 40;
      for (int64_t p0 = 0; p0 < 1050; p0 += 7) {
        const int64_t nt = std::min<int64_t>(7, 1050 - p0);
        std::vector<int32_t> pos(static_cast<size_t>(nt));
        for (int64_t t = 0; t < nt; ++t) pos[size_t(t)] = int32_t(p0 + t);
        const std::vector<float> qs = rand_floats(size_t(nt * n_head * hd), seed++),
                                 ks = rand_floats(size_t(nt * kv_dim), seed++),
                                 vs = rand_floats(size_t(nt * kv_dim), seed++);
        be.host_wrote(q.data(), q.size() * 4);  // before the host writes: brings down what the device holds
        be.host_wrote(k.data(), k.size() * 4);
        be.host_wrote(v.data(), v.size() * 4);
        std::copy(qs.begin(), qs.end(), q.begin());
        std::copy(ks.begin(), ks.end(), k.begin());
        std::copy(vs.begin(), vs.end(), v.begin());
        be.rope_kv_store(q.data(), k.data(), v.data(), dev, 1, pos.data(), nt, rs);
        std::vector<float> qr = qs, kr = ks;
        cpu_->rope_kv_store(qr.data(), kr.data(), vs.data(), host, 1, pos.data(), nt, rs);
        be.to_host(q.data(), q.size() * 4);
        ASSERT_TRUE(std::equal(qr.begin(), qr.end(), q.begin())) << "rope_kv_store q at " << p0;
      }
      // Unfused kv_store on layer 0 at a few positions, then the whole cache compared.
      {
        const int32_t pos[3] = {1099, 4, 512};
        const std::vector<float> ks = rand_floats(size_t(3 * kv_dim), 90),
                                 vs = rand_floats(size_t(3 * kv_dim), 91);
        be.kv_store(dev, 0, ks.data(), vs.data(), pos, 3);
        cpu_->kv_store(host, 0, ks.data(), vs.data(), pos, 3);
      }
      KvCache back(kLayers, kCtx, n_head_kv, hd, kv_type);
      be.kv_to_host(back, 0, kCtx);
      for (int64_t l = 0; l < kLayers; ++l) {
        for (int kind = 0; kind < 2; ++kind) {
          for (int64_t p :
               {int64_t(0), int64_t(4), int64_t(512), int64_t(777), int64_t(1049), int64_t(1099)}) {
            if (l == 1 && p >= 1050) continue;
            if (l == 0 && p != 4 && p != 512 && p != 1099) continue;
            ASSERT_EQ(0, std::memcmp(back.plane(l, kind) + size_t(p) * back.row_bytes(),
                                     host.plane(l, kind) + size_t(p) * host.row_bytes(), host.row_bytes()))
                << "layer " << l << " kind " << kind << " position " << p;
          }
        }
      }
      // Attention over layer 1: one token late in the cache (9 chunks of keys) and a prompt of 4.
      AttnParams ap;
      ap.n_head = n_head, ap.n_head_kv = n_head_kv, ap.head_dim = hd, ap.scale = 0.17f;
      for (int64_t window : {int64_t(0), int64_t(300)}) {
        ap.window = window;
        // One token (the decode kernel, split or not), four scattered ones, and 21 consecutive ones (the
        // tiled prompt kernel: 16 queries a block, a partial second block).
        std::vector<int32_t> prompt(21);
        for (int i = 0; i < 21; ++i) prompt[size_t(i)] = 1029 + i;
        for (const std::vector<int32_t>& pos :
             {std::vector<int32_t>{1049}, std::vector<int32_t>{0, 130, 1000, 1049}, prompt}) {
          const int64_t nt = int64_t(pos.size());
          const std::vector<float> qs = rand_floats(size_t(nt * n_head * hd), seed++);
          std::vector<float> ref(qs.size()), got(qs.size(), NAN);
          cpu_->attention(qs.data(), host, 1, pos.data(), nt, ap, ref.data());
          be.attention(qs.data(), dev, 1, pos.data(), nt, ap, got.data());
          for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(got[i], ref[i], 2e-5 * (std::abs(ref[i]) + 0.05))
                << "attention window " << window << " tokens " << nt << " splits " << splits << " element "
                << i;
        }
      }
    }
  }
}

// Decode attention (one token) over head sizes of every bucket of dims a lane holds (24, not a multiple of
// 32; 64, 80, 128, 256), contexts from one key to a few hundred (with 32 splits of at least 16 keys, only the
// first few busy; keys not a multiple of a warp's run), a window, grouped heads, both cache types.
TEST_P(CudaOps, decode_attention_over_head_sizes_and_contexts) {
  uint32_t seed = 500;
  for (int64_t hd : {24, 64, 80, 128, 256}) {
    const int64_t n_head = 6, n_head_kv = 2, kv_dim = n_head_kv * hd, filled = 301;
    for (GgmlType kv_type : {GgmlType::F16, GgmlType::F32}) {
      for (int splits : {1, 32}) {
        auto be = make(WeightsMode::Native, kv_dim, kv_type, splits);
        KvCache host(kLayers, kCtx, n_head_kv, hd, kv_type),
            dev(kLayers, kCtx, n_head_kv, hd, kv_type, false);
        for (int64_t p0 = 0; p0 < filled; p0 += 64) {
          const int64_t nt = std::min<int64_t>(64, filled - p0);
          std::vector<int32_t> pos(static_cast<size_t>(nt));
          for (int64_t t = 0; t < nt; ++t) pos[size_t(t)] = int32_t(p0 + t);
          const std::vector<float> ks = rand_floats(size_t(nt * kv_dim), seed++),
                                   vs = rand_floats(size_t(nt * kv_dim), seed++);
          be->kv_store(dev, 1, ks.data(), vs.data(), pos.data(), nt);
          cpu_->kv_store(host, 1, ks.data(), vs.data(), pos.data(), nt);
        }
        AttnParams ap;
        ap.n_head = n_head, ap.n_head_kv = n_head_kv, ap.head_dim = hd,
        ap.scale = 1.0f / std::sqrt(float(hd));
        for (int64_t window : {int64_t(0), int64_t(50)}) {
          ap.window = window;
          for (int32_t p : {0, 1, 15, 16, 17, 63, 200, 300}) {
            const std::vector<float> qs = rand_floats(size_t(n_head * hd), seed++);
            std::vector<float> ref(qs.size()), got(qs.size(), NAN);
            cpu_->attention(qs.data(), host, 1, &p, 1, ap, ref.data());
            be->attention(qs.data(), dev, 1, &p, 1, ap, got.data());
            for (size_t i = 0; i < ref.size(); ++i)
              ASSERT_NEAR(got[i], ref[i], 2e-5 * (std::abs(ref[i]) + 0.05))
                  << "head size " << hd << " splits " << splits << " position " << p << " window " << window
                  << " element " << i;
          }
        }
      }
    }
  }
}

// A weight the device cannot hold is refused before anything is uploaded, naming the sizes.
TEST_P(CudaOps, a_model_larger_than_device_memory_is_refused_with_the_sizes) {
  auto be = make();
  Weight huge;
  huge.name = "huge";
  huge.type = GgmlType::F32;
  static const float one = 1.0f;
  huge.data = reinterpret_cast<const uint8_t*>(&one);  // never read: refused by its size first
  huge.n_in = 1 << 20;
  huge.n_out = 1 << 20;  // 4 TiB of F32 rows
  huge.row_bytes = size_t(huge.n_in) * 4;
  WeightSet ws;
  ws.matrices.push_back(&huge);
  try {
    be->load_weights(ws);
    FAIL() << "a 4 TiB model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MiB free"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tilellm
