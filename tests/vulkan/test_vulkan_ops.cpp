// Every op of the Vulkan backend against the CPU backend (the reference, float path) on random data of odd
// sizes, under each device profile (vulkan_test.h): weights of every GGUF type the device formats take, and
// the converted formats; norms, RoPE, GLU, add, the KV cache ops, and a matrix split over several buffers.
//
// Tolerances. Products: each output may differ from the reference by the rounding of a differently ordered
// float32 sum, |err| <= n_in * u * sum_j |w_j x_j| (u = 2^-24), bounded here by 4 n u sum|w x| + 1e-30.
// Elementwise ops: add is the CPU's operation (bit-exact); RoPE's rotation a few ulps; the activations
// within the precision Vulkan grants exp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../gpu_common/random_weights.h"
#include "backends/kv_cache.h"
#include "backends/registry.h"
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "format/asym_quant.h"
#include "format/quants.h"
#include "vulkan_test.h"

namespace tilellm {
namespace {

using test::ConvertedWeight;
using test::make_weight;
using test::OwnedWeight;
using test::rand_floats;

constexpr double kU = 0x1p-24;

class VulkanOps : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr int64_t kLayers = 2, kCtx = 300;  // past one chunk of attention's 256 keys

  void SetUp() override {
    if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
    pool_ = std::make_unique<ThreadPool>(2);
    BackendParams hp;
    hp.pool = pool_.get();
    hp.activations = ActivationMode::F32;
    hp.max_in_elems = 1 << 16;
    cpu_ = host_backend().make(hp);
  }

  VulkanBackendOptions options() const {
    VulkanBackendOptions o;
    o.device = test::vulkan_test_device();
    const std::string& p = GetParam();
    o.profile = p == "none-shared" ? "none" : p;
    o.subgroups = p != "none-shared";
    o.max_tokens = 24;
    o.max_in_elems = 1 << 16;
    o.max_out_elems = 1 << 16;
    o.max_width = 1024;
    o.self_check = false;  // these tests check the shaders themselves; a CPU fallback would hide a fault
    return o;
  }

  // kv_max_buffer_bytes > 0: the KV cache split over buffers of at most that many bytes. kv_memory Image: the
  // cache in RGBA16F images, at most image_max lines each (0: the device's side).
  std::unique_ptr<VulkanBackend> make(int64_t kv_dim = 0, GgmlType kv_type = GgmlType::F16,
                                      uint64_t kv_max_buffer_bytes = 0, KvMemory kv_memory = KvMemory::Buffer,
                                      uint32_t image_max = 0) const {
    VulkanBackendOptions o = options();
    if (kv_dim > 0) {
      o.kv_layers = kLayers;
      o.kv_ctx = kCtx;
      o.kv_dim = kv_dim;
      o.kv_type = kv_type;
      o.kv_max_buffer_bytes = kv_max_buffer_bytes;
      o.kv_memory = kv_memory;
      o.image_max = image_max;
    }
    return std::make_unique<VulkanBackend>(o);
  }

  // y = W x on both backends, each output within the reordered-sum bound of the reference (ref_w: the
  // weights' exact float values; w itself for the native types), the reference fed the input as the
  // backend rounds it (the integer decode path: rounded_matmul_input; the float path: x itself). fp16: the
  // products take weights and inputs rounded to fp16 (cooperative matrices: asked for, or where the backend
  // puts the product on them), each product then within 2^-10 of its magnitude, plus 2^-25 for an fp16
  // subnormal times an operand below 8.
  void check_matmul(VulkanBackend& vk, const Weight& w, const Weight& ref_w, int64_t n_tok, uint32_t seed,
                    bool fp16 = false) {
    fp16 = fp16 || vk.on_cooperative_matrices(w, n_tok);
    std::vector<float> x = rand_floats(size_t(n_tok * w.n_in), seed);
    std::vector<float> ref(size_t(n_tok * w.n_out)), got(ref.size(), NAN), xr(x.size());
    vk.rounded_matmul_input(w, x.data(), n_tok, xr.data());
    vk.matmul(w, x.data(), n_tok, got.data());
    x = xr;
    cpu_->matmul(ref_w, x.data(), n_tok, ref.data());
    std::vector<float> row(size_t(w.n_in));
    for (int64_t r = 0; r < w.n_out; ++r) {
      dequantize_row(ref_w.type, ref_w.row(r), row.data(), w.n_in);
      for (int64_t t = 0; t < n_tok; ++t) {
        double mag = 0.0;
        for (int64_t j = 0; j < w.n_in; ++j)
          mag += std::abs(double(row[size_t(j)]) * x[size_t(t * w.n_in + j)]);
        const size_t i = size_t(t * w.n_out + r);
        const double half = fp16 ? 0x1p-10 * mag + double(w.n_in) * 0x1p-22 : 0.0;
        ASSERT_NEAR(got[i], ref[i], 4.0 * double(w.n_in) * kU * mag + half + 1e-30)
            << w.name << " row " << r << " token " << t << " of " << n_tok << " (" << GetParam() << ")";
      }
    }
  }

  // One token through 11 rows of n_in inputs converted to int4b64 and to int8b0 (backends made from o).
  void check_converted_decode(const VulkanBackendOptions& o, int64_t n_in, uint32_t& seed) {
    for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0}) {
      VulkanBackendOptions oc = o;
      oc.weights = mode;
      VulkanBackend vc(oc);
      const ConvertedWeight cw(mode, n_in, 11, seed++);
      vc.upload_weight(cw.w);
      check_matmul(vc, cw.w, cw.we, 1, seed++);
    }
  }

  // Prompts past a tile of the cooperative-matrix GEMM (128 rows x 128 tokens): every weight format, 37 and
  // 140 rows, inputs of 5 and 16 blocks (Q4_K / Q6_K: 512, float rows 77), each product at the token counts
  // `tokens` (and Q4_0's also at `q4_0_tokens`, 0: none). The weights stay in `kept` (the backend knows them
  // by address).
  void check_prompt_tiles(VulkanBackend& vk, std::initializer_list<int64_t> tokens, int64_t q4_0_tokens,
                          bool fp16, uint32_t& seed, std::vector<OwnedWeight>& kept) {
    const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::Q4_0, GgmlType::Q4_1,
                              GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K};
    for (GgmlType t : types) {
      const int64_t bs = type_traits(t).block_size;
      for (int64_t n_out : {37, 140}) {
        const int64_t n_in = bs == 1 ? 77 : bs == 256 ? 512 : n_out == 37 ? 160 : 512;
        kept.push_back(make_weight(t, n_in, n_out, seed++));
        vk.upload_weight(kept.back().w);
        for (int64_t n_tok : tokens) check_matmul(vk, kept.back().w, kept.back().w, n_tok, seed++, fp16);
        if (t == GgmlType::Q4_0 && q4_0_tokens > 0)
          check_matmul(vk, kept.back().w, kept.back().w, q4_0_tokens, seed++, fp16);
      }
    }
  }

  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Backend> cpu_;
};

// Every GGUF type the device formats take (and BF16, dequantized to F32), decode (1 token) and prompt sizes
// that leave partial token tiles (3, 21); 37 rows leave partial row groups.
TEST_P(VulkanOps, matmul_and_embedding_of_every_weight_type) {
  auto vk = make();
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                            GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q5_1,
                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  uint32_t seed = 1;
  std::vector<OwnedWeight> kept;  // alive while the backend is: it knows them by address
  for (GgmlType t : types) {
    const int64_t bs = type_traits(t).block_size;
    const int64_t n_in = bs == 1 ? 77 : bs == 256 ? 512 : 160, n_out = 37;
    kept.push_back(make_weight(t, n_in, n_out, seed++));
    const OwnedWeight& ow = kept.back();
    vk->upload_weight(ow.w);
    for (int64_t n_tok : {1, 3, 8, 21}) check_matmul(*vk, ow.w, ow.w, n_tok, seed++);
    const int32_t ids[4] = {36, 0, 17, 36};
    std::vector<float> ref(size_t(4 * n_in)), got(ref.size(), NAN);
    cpu_->embed(ow.w, ids, 4, 0.75f, ref.data());
    vk->embed(ow.w, ids, 4, 0.75f, got.data());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 1e-6 * std::abs(ref[i])) << type_name(t) << " element " << i;
  }
}

// Prompts past a tile of the cooperative-matrix GEMM (shaders/matmul_coopmat.comp: 128 rows x 128 tokens, 64
// inputs a step): 16 tokens (the fewest it takes), 64, 134 and 260 (whole and partial token tiles), 37 and
// 140 rows (whole matrices stored straight into the output, partial row tiles through the scratch), inputs
// of 5 and 16 blocks (a half step) and float rows of 77; on the device's
// cooperative matrices where it lists them (bounds for fp16 products), else on the float tiles. Under
// "none" only: every other profile turns cooperative matrices off.
TEST_P(VulkanOps, prompts_on_cooperative_matrices) {
  if (GetParam() != "none") GTEST_SKIP() << "cooperative matrices run under the profile none only";
  VulkanBackendOptions o = options();
  o.max_tokens = 260;
  o.max_in_elems = o.max_out_elems = 260 * 512;
  VulkanBackend vk(o);
  const bool cm = vk.caps().coopmat_f16;
  uint32_t seed = 900;
  std::vector<OwnedWeight> kept;
  check_prompt_tiles(vk, {16, 64, 134, 260}, 0, cm, seed, kept);
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0}) {
    VulkanBackendOptions oc = o;
    oc.weights = mode;
    VulkanBackend vc(oc);
    const ConvertedWeight cw(mode, 160, 140, seed++);
    vc.upload_weight(cw.w);
    check_matmul(vc, cw.w, cw.we, 134, seed++, cm);
  }
}

const uint32_t kCoopmatEmulated[] = {
#include "matmul_coopmat_emulated.inc"
};

// The cooperative-matrix GEMM's tiling on any device: matmul_coopmat.comp built with its matrix operations
// emulated in plain GLSL (TL_CM_EMULATE, one block a step) through the test hook, every weight format at the
// sizes above (partial row and token tiles, a half step of inputs, float rows of 77) within the fp16 bounds;
// with the self-check on, it passes and the prompt runs on it (its kernel time is counted).
TEST_P(VulkanOps, cooperative_matrix_tiling_emulated) {
  if (GetParam() != "none") GTEST_SKIP() << "the tiling does not depend on the profile: run under none";
  VulkanBackendOptions o = options();
  o.max_tokens = 260;
  o.max_in_elems = o.max_out_elems = 260 * 512;
  o.coopmat_test_spirv.assign(std::begin(kCoopmatEmulated), std::end(kCoopmatEmulated));
  VulkanBackend vk(o);
  uint32_t seed = 1900;
  std::vector<OwnedWeight> kept;
  check_prompt_tiles(vk, {16, 134}, 260, true, seed, kept);
  VulkanBackendOptions oc = o;
  oc.self_check = true;
  oc.profiling = true;
  oc.weights = WeightsMode::Int4B64;
  VulkanBackend vc(oc);
  for (const std::string& f : vc.cpu_fallbacks())
    EXPECT_EQ(f.rfind("matmul_coopmat", 0), std::string::npos) << f;
  const ConvertedWeight cw(WeightsMode::Int4B64, 160, 140, seed++);
  vc.upload_weight(cw.w);
  vc.reset_kernel_times();
  check_matmul(vc, cw.w, cw.we, 134, seed++, true);
  bool ran = false;
  for (const KernelTime& k : vc.kernel_times())
    ran = ran || (k.name == "matmul_coopmat_int4b64" && k.calls > 0);
  EXPECT_TRUE(ran) << "the 134-token product did not run on the cooperative-matrix pipeline";
}

// The decode matvec (shaders/matvec.comp) in other shapes than the default (--vk-matvec): rows a group
// (partial last groups), parts a block (1 and 8 are clamped for the nibble and byte formats), work-group
// sizes below and above a subgroup, part counts past one unrolled step and work-groups taking several row
// groups each (2 or 3 groups for 5 to 13 row groups), for every block format: 37
// rows, 27 blocks (Q4_K / Q5_K: 32, as KQ4 / KQ8). Both reductions (the profiles change nothing else here).
TEST_P(VulkanOps, matvec_shapes) {
  if (GetParam() != "none" && GetParam() != "none-shared")
    GTEST_SKIP() << "the matvec shapes depend on the reduction only: run under none and none-shared";
  struct Shape {
    uint32_t rows, parts, local, unroll, groups;  // groups: 0, or the most work-groups a dispatch has
  };
  const Shape shapes[] = {{1, 1, 32, 1, 0}, {3, 2, 64, 3, 2}, {8, 8, 16, 2, 0}, {5, 4, 256, 4, 3}};
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0,
                            GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q5_K};
  uint32_t seed = 300;
  for (const Shape& s : shapes) {
    VulkanBackendOptions o = options();
    o.activations = ActivationMode::F32;  // the float matvec (the integer one: matvec_q8_inputs)
    o.matvec_rows = s.rows, o.matvec_parts = s.parts, o.matvec_local = s.local, o.matvec_unroll = s.unroll;
    o.matvec_groups = s.groups;
    VulkanBackend vk(o);
    std::vector<OwnedWeight> kept;
    for (GgmlType t : types) {
      const int64_t n_in = type_traits(t).block_size == 256 ? 1024 : 27 * 32;
      kept.push_back(make_weight(t, n_in, 37, seed++));
      vk.upload_weight(kept.back().w);
      check_matmul(vk, kept.back().w, kept.back().w, 1, seed++);
    }
    check_converted_decode(o, 27 * 32, seed);
  }
}

// The device's rounding of a product's input (q8.glsl: d = max|x| / 127 and 1 / d as IEEE division gives
// them, q = round(x / d) half away from zero) equals the host's bit for bit, near-ties included: inputs of
// whole blocks whose values sit within a few ulps of x / d = k + 0.5, read back through a Q8_0 matrix that
// picks one input a row (row r: code 1 at column r, scale 1), so each output is exactly that input's d * q.
TEST_P(VulkanOps, matvec_q8_rounds_every_input_as_the_host_does) {
  VulkanBackendOptions o = options();
  {
    VulkanBackend probe(o);
    if (!probe.caps().integer_dot) GTEST_SKIP() << "no integer dot products under " << GetParam();
  }
  VulkanBackend vk(o);
  const int64_t n = 32 * 16;  // 16 blocks
  OwnedWeight pick = make_weight(GgmlType::Q8_0, n, n, 900);
  const size_t block = type_traits(GgmlType::Q8_0).type_size;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < n / 32; ++b) {
      uint8_t* q = pick.bytes.data() + size_t(r) * pick.w.row_bytes + size_t(b) * block;
      test::put_half(q, 1.0f);
      std::memset(q + 2, 0, 32);
      if (b == r / 32) q[2 + r % 32] = 1;
    }
  }
  vk.upload_weight(pick.w);
  std::mt19937 rng(901);
  std::uniform_real_distribution<float> amax_of(0.05f, 40.0f);
  std::uniform_int_distribution<int> code(-126, 125), nudge(-3, 3);
  for (int round = 0; round < 48; ++round) {
    std::vector<float> x(static_cast<size_t>(n)), xr(x.size()), got(x.size());
    for (int64_t b = 0; b < n / 32; ++b) {
      const float amax = amax_of(rng), d = amax / 127.0f;
      for (int j = 0; j < 32; ++j) {
        float v = amax;
        if (j > 0) {
          // (k + 0.5) d, moved by a few ulps either way: the device's 1 / d one ulp off would round it
          // to the other side.
          v = (float(code(rng)) + 0.5f) * d;
          for (int u = nudge(rng); u != 0; u += u > 0 ? -1 : 1) v = std::nextafter(v, u > 0 ? amax : -amax);
          if (std::abs(v) >= amax) v = std::nextafter(amax, 0.0f) * (v < 0 ? -1.0f : 1.0f);
        }
        x[size_t(32 * b + (j * 7) % 32)] = j % 2 ? -v : v;  // the largest anywhere in the block, signs mixed
      }
    }
    vk.rounded_matmul_input(pick.w, x.data(), 1, xr.data());
    ASSERT_NE(x, xr) << "the integer path was not taken";
    vk.matmul(pick.w, x.data(), 1, got.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[size_t(i)], xr[size_t(i)])
          << "input " << i << " = " << x[size_t(i)] << " (round " << round << "): the device rounded it to "
          << got[size_t(i)] << ", the host to " << xr[size_t(i)];
    }
  }
}

// The integer decode matvec (shaders/matvec_q8.comp, --activations q8) where the device has integer dot
// products: every block format at input lengths of one block, of fewer blocks than a work-group's
// invocations, and of several rounds of them (160 blocks: 128 invocations take two), 37 rows (a partial
// group of 8); the input rounded as the host's reference rounds it, ties and zero blocks included (the
// rounding is checked by the products: one code off is ~50x the bound here).
TEST_P(VulkanOps, matvec_q8_inputs) {
  VulkanBackendOptions o = options();
  {
    VulkanBackend probe(o);
    if (!probe.caps().integer_dot) GTEST_SKIP() << "no integer dot products under " << GetParam();
  }
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0,
                            GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K};
  uint32_t seed = 500;
  VulkanBackend vk(o);
  std::vector<OwnedWeight> kept;
  for (GgmlType t : types) {
    for (int64_t blocks : {1, 9, 160}) {
      const int64_t n_in = type_traits(t).block_size == 256 ? 256 * ((blocks + 7) / 8) : 32 * blocks;
      kept.push_back(make_weight(t, n_in, 37, seed++));
      const Weight& w = kept.back().w;
      vk.upload_weight(w);
      std::vector<float> x = rand_floats(size_t(n_in), seed), xr(x.size());
      vk.rounded_matmul_input(w, x.data(), 1, xr.data());
      EXPECT_NE(x, xr) << type_name(t) << " " << n_in << ": the integer path was not taken";
      check_matmul(vk, w, w, 1, seed++);
    }
  }
  // Exact ties (x / d = k + 0.5 for the block's d = 1) round away from zero; an all-zero block has d = 0.
  {
    OwnedWeight ow = make_weight(GgmlType::Q8_0, 96, 9, seed++);
    vk.upload_weight(ow.w);
    std::vector<float> x(96, 0.0f), xr(96), ref(9), got(9);
    for (int j = 0; j < 32; ++j) x[size_t(j)] = j == 0 ? 127.0f : float(j % 7) - 3.5f;
    for (int j = 64; j < 96; ++j) x[size_t(j)] = float(j % 5) * 0.25f - 0.5f;
    vk.rounded_matmul_input(ow.w, x.data(), 1, xr.data());
    EXPECT_EQ(xr[1], -3.0f);  // d = 127 / 127 = 1: -2.5 -> -3
    EXPECT_EQ(xr[4], 1.0f);   // 0.5 -> 1
    EXPECT_EQ(xr[40], 0.0f);  // the zero block
    vk.matmul(ow.w, x.data(), 1, got.data());
    cpu_->matmul(ow.w, xr.data(), 1, ref.data());
    for (int r = 0; r < 9; ++r)
      EXPECT_NEAR(got[size_t(r)], ref[size_t(r)], 1e-4 * std::abs(ref[size_t(r)]) + 1e-6);
  }
  check_converted_decode(o, 160 * 32, seed);
  // The gate and up products with the gated unit in one dispatch (matvec_q8_glu.comp): 37 rows (a partial
  // group, no rounding of the output) and 96 (three blocks of 32, rounded for the down product), both
  // activations, against the host's products of the same rounded input and its gated unit.
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
    for (int64_t n_out : {37, 96}) {
      const int64_t n_in = type_traits(t).block_size == 256 ? 512 : 27 * 32;
      // Kept while vk lives: an uploaded weight's memory is not reused by another.
      kept.push_back(make_weight(t, n_in, n_out, seed++));
      kept.push_back(make_weight(t, n_in, n_out, seed++));
      const OwnedWeight& g = kept[kept.size() - 2];
      const OwnedWeight& u = kept.back();
      vk.upload_weight(g.w);
      vk.upload_weight(u.w);
      for (FfnAct act : {FfnAct::SiLU, FfnAct::GeluTanh}) {
        std::vector<float> x = rand_floats(size_t(n_in), seed++), xr(x.size());
        vk.rounded_matmul_input(g.w, x.data(), 1, xr.data());
        const size_t un = size_t(n_out);
        std::vector<float> gr(un), ur(un), ref(un), got(un), up(un);
        cpu_->matmul(g.w, xr.data(), 1, gr.data());
        cpu_->matmul(u.w, xr.data(), 1, ur.data());
        cpu_->glu(gr.data(), ur.data(), ref.data(), n_out, act);
        vk.matmul_glu(g.w, u.w, x.data(), 1, act, got.data(), up.data());
        const double scale = double(*std::max_element(
            ref.begin(), ref.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
        for (size_t r = 0; r < un; ++r)
          EXPECT_NEAR(got[r], ref[r], 1e-5 * std::fabs(scale) + 1e-6)
              << type_name(t) << " row " << r << " of " << n_out;
      }
    }
  }
}

// --weights int4b64 / int8b0 / f16 / f32: rows converted at upload, against the CPU's float path on the
// conversion's exact values (160 inputs leave INT4B64 a group of one block).
TEST_P(VulkanOps, matmul_of_converted_weights) {
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0, WeightsMode::F16, WeightsMode::F32}) {
    VulkanBackendOptions o = options();
    o.weights = mode;
    VulkanBackend vk(o);
    const ConvertedWeight cw(mode, 160, 21, 77);
    vk.upload_weight(cw.w);
    for (int64_t n_tok : {1, 5, 17}) check_matmul(vk, cw.w, cw.we, n_tok, 5 + uint32_t(n_tok));
  }
}

// A matrix larger than one buffer may be (here: a 64 KiB clamp) is split by rows; the lookup and the
// product cross the buffers.
TEST_P(VulkanOps, matrix_split_over_buffers) {
  VulkanBackendOptions o = options();
  o.max_buffer_bytes = 1 << 16;
  VulkanBackend vk(o);
  OwnedWeight ow = make_weight(GgmlType::Q8_0, 256, 1001, 9);  // 272 bytes a row: 240 rows a buffer
  vk.upload_weight(ow.w);
  EXPECT_EQ(vk.weight_buffers(ow.w), 5u);
  for (int64_t n_tok : {1, 6, 19}) check_matmul(vk, ow.w, ow.w, n_tok, 10);
  const int32_t ids[3] = {1000, 239, 240};
  std::vector<float> ref(3 * 256), got(ref.size(), NAN);
  cpu_->embed(ow.w, ids, 3, 1.0f, ref.data());
  vk.embed(ow.w, ids, 3, 1.0f, got.data());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "element " << i;
}

// --gpu-memory image (shaders/weights.glsl: the products' _image variants): every GGUF type the device
// formats take and the converted formats, each matrix in an image (none left a buffer), decode (1 token:
// the float matvecs, and the integer one where the device has integer dot products) and prompts with
// partial token and row tiles; on the device's cooperative matrices too where it lists them (134 tokens).
TEST_P(VulkanOps, products_of_weights_in_images) {
  VulkanBackendOptions o = options();
  o.memory = GpuMemory::Image;
  o.max_tokens = 134;
  o.max_in_elems = o.max_out_elems = 134 * 512;
  VulkanBackend vk(o);
  if (!vk.runtime().sampled_images()) GTEST_SKIP() << "the device samples no RGBA32UI images";
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                            GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q5_1,
                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  uint32_t seed = 3100;
  std::vector<OwnedWeight> kept;
  for (GgmlType t : types) {
    const int64_t bs = type_traits(t).block_size;
    const int64_t n_in = bs == 1 ? 77 : bs == 256 ? 512 : 160, n_out = 37;
    kept.push_back(make_weight(t, n_in, n_out, seed++));
    vk.upload_weight(kept.back().w);
    EXPECT_EQ(vk.weight_buffers(kept.back().w), 0u) << type_name(t) << " is not in an image";
    for (int64_t n_tok : {1, 3, 21}) check_matmul(vk, kept.back().w, kept.back().w, n_tok, seed++);
    if (vk.caps().coopmat_f16 && GetParam() == "none")
      check_matmul(vk, kept.back().w, kept.back().w, 134, seed++, true);
  }
  EXPECT_EQ(vk.image_weights(), kept.size());
  EXPECT_TRUE(vk.buffer_weights().empty());
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0}) {
    VulkanBackendOptions oc = o;
    oc.weights = mode;
    VulkanBackend vc(oc);
    const ConvertedWeight cw(mode, 160, 21, seed++);
    vc.upload_weight(cw.w);
    EXPECT_EQ(vc.image_weights(), 1u) << weights_mode_name(mode);
    for (int64_t n_tok : {1, 5}) check_matmul(vc, cw.w, cw.we, n_tok, seed++);
  }
}

// The image limits (lowered to 64 x 64 texels through the test clamp): a row wider than an image line takes
// several lines (F32 rows of 300: 1200 bytes, 80 texels, two lines of 40; Q8_0 rows of 1024: 72 texels,
// two lines of 40, 32 rows filling the height), the products reading across them;
// a matrix whose lines exceed the height stays a buffer, named with the limit on stderr and in
// buffer_weights(), and still multiplies.
TEST_P(VulkanOps, image_limits_split_rows_over_lines_or_keep_a_buffer) {
  if (GetParam() != "none" && GetParam() != "powervr-rogue")
    GTEST_SKIP() << "the image mapping does not depend on the profile: run under none and powervr-rogue";
  VulkanBackendOptions o = options();
  o.memory = GpuMemory::Image;
  o.image_max = 64;
  VulkanBackend vk(o);
  if (!vk.runtime().sampled_images()) GTEST_SKIP() << "the device samples no RGBA32UI images";
  OwnedWeight two_lines = make_weight(GgmlType::F32, 300, 31, 41, "blk.0.two_lines");  // 62 lines
  OwnedWeight q8 = make_weight(GgmlType::Q8_0, 1024, 32, 42, "blk.0.q8");  // 1088 bytes: 72 texels, 64 lines
  OwnedWeight tall = make_weight(GgmlType::Q4_0, 96, 65, 43, "blk.0.tall");  // 65 lines > 64
  testing::internal::CaptureStderr();
  for (const OwnedWeight* ow : {&two_lines, &q8, &tall}) vk.upload_weight(ow->w);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(vk.weight_buffers(two_lines.w), 0u);
  EXPECT_EQ(vk.weight_buffers(q8.w), 0u);
  EXPECT_EQ(vk.weight_buffers(tall.w), 1u);
  ASSERT_EQ(vk.buffer_weights().size(), 1u) << err;
  const std::string& line = vk.buffer_weights()[0];
  EXPECT_NE(line.find("blk.0.tall stays a buffer"), std::string::npos) << line;
  EXPECT_NE(line.find("exceeds the 2D image limit of 64 x 64"), std::string::npos) << line;
  EXPECT_NE(err.find("note: Vulkan --gpu-memory image: " + line), std::string::npos) << err;
  uint32_t seed = 50;
  for (const OwnedWeight* ow : {&two_lines, &q8, &tall})
    for (int64_t n_tok : {1, 6}) check_matmul(vk, ow->w, ow->w, n_tok, seed++);
}

// A row larger than one buffer may be cannot be split: refused, naming the weight and the limits.
TEST_P(VulkanOps, a_row_past_the_buffer_limit_is_refused_by_name) {
  VulkanBackendOptions o = options();
  o.max_buffer_bytes = 1 << 10;
  VulkanBackend vk(o);
  OwnedWeight ow = make_weight(GgmlType::F32, 300, 4, 12, "blk.0.too_wide");  // 1200-byte rows
  try {
    vk.upload_weight(ow.w);
    FAIL() << "a 1200-byte row went into 1 KiB buffers";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("blk.0.too_wide"), std::string::npos) << m;
    EXPECT_NE(m.find("max storage buffer range"), std::string::npos) << m;
    EXPECT_NE(m.find("1200 bytes"), std::string::npos) << m;
  }
}

TEST_P(VulkanOps, rmsnorm_add_rmsnorm_add_and_glu) {
  auto vk = make();
  for (int64_t n : {1, 7, 576, 1001}) {
    const int64_t rows = 3;
    const std::vector<float> x = rand_floats(size_t(rows * n), 20 + uint32_t(n)),
                             w = rand_floats(size_t(n), 3);
    const std::vector<float> r = rand_floats(size_t(rows * n), 4);
    std::vector<float> ref(x.size()), got(x.size(), NAN);
    cpu_->rmsnorm(x.data(), w.data(), ref.data(), rows, n, 1e-6f);
    vk->rmsnorm(x.data(), w.data(), got.data(), rows, n, 1e-6f);
    // A reordered sum of squares (relative n u) through the square root: 2 n u of each output, plus the
    // final products' rounding.
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], (2.0 * n + 4) * kU * std::abs(ref[i]) + 1e-30);
    std::vector<float> acc_ref = x, acc_got = x, y_ref(x.size()), y_got(x.size(), NAN);
    cpu_->add(acc_ref.data(), r.data(), rows * n);
    cpu_->rmsnorm(acc_ref.data(), w.data(), y_ref.data(), rows, n, 1e-6f);
    vk->add_rmsnorm(acc_got.data(), r.data(), w.data(), y_got.data(), rows, n, 1e-6f);
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(acc_got[i], acc_ref[i]);
      ASSERT_NEAR(y_got[i], y_ref[i], (2.0 * n + 4) * kU * std::abs(y_ref[i]) + 1e-30);
    }
    std::vector<float> a_ref = x, a_got = x;
    cpu_->add(a_ref.data(), r.data(), rows * n);
    vk->add(a_got.data(), r.data(), rows * n);
    ASSERT_EQ(a_got, a_ref);
    std::vector<float> g = x;
    for (float& v : g) v *= 8.0f;
    for (FfnAct act : {FfnAct::SiLU, FfnAct::GeluTanh}) {
      std::vector<float> gr(g.size()), gg(g.size(), NAN);
      cpu_->glu(g.data(), r.data(), gr.data(), rows * n, act);
      vk->glu(g.data(), r.data(), gg.data(), rows * n, act);
      // Vulkan allows exp an error of 3 + 2|a| ulps for exp(a) (the spec's precision table); the rest is a
      // few roundings. a = -g for SiLU, -2z for GELU.
      for (size_t i = 0; i < gr.size(); ++i) {
        const double gv = g[i], z = 0.7978845608028654 * (gv + 0.044715 * gv * gv * gv);
        const double a = act == FfnAct::SiLU ? std::abs(gv) : std::abs(2.0 * z);
        ASSERT_NEAR(gg[i], gr[i], (8.0 + 2.0 * a) * 0x1p-23 * std::abs(gr[i]) + 1e-30) << "element " << i;
      }
    }
  }
}

TEST_P(VulkanOps, rope_both_modes_partial_rotation) {
  auto vk = make();
  const int64_t n_tok = 5, heads = 3, hd = 64, rope_dim = 32;
  const RopeTable table(100, rope_dim, 10000.0f, 1.0f);
  const int32_t pos[5] = {99, 0, 3, 3, 57};
  for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
    std::vector<float> ref = rand_floats(size_t(n_tok * heads * hd), 8), got = ref;
    cpu_->rope(ref.data(), n_tok, heads, hd, rope_dim, pos, table, mode);
    vk->rope(got.data(), n_tok, heads, hd, rope_dim, pos, table, mode);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 4 * kU * (std::abs(ref[i]) + 1.0)) << i;
  }
}

// kv_store then attention on the device cache, against the CPU's on a host cache: grouped queries, a
// sliding window, positions over two attention chunks; both cache types, both K-row readers.
// q, k, v resident on the device (as in a forward pass): one rope_kv_store dispatch whose q, k and cache rows
// equal bit for bit those of the two rope dispatches and the kv_store one (the same arithmetic), in both
// modes and cache types, 8 of 12 dims turned (the rest copied), 4 query heads over 2 KV heads, 3 tokens at
// scattered positions; the f16 cache also as an RGBA16F image (--kv-memory image: the _kvimage variants, four
// elements an invocation).
TEST_P(VulkanOps, rope_kv_store_is_one_dispatch_equal_to_rope_rope_kv_store) {
  const int64_t n_tok = 3, hd = 12, kv_dim = 2 * hd, layer = 1;
  const RopeTable table(kCtx, 8, 10000.0f, 1.0f);
  const int32_t pos[3] = {40, 3, 76};
  for (const auto& [type, kv_memory] :
       {std::pair{GgmlType::F16, KvMemory::Buffer}, std::pair{GgmlType::F32, KvMemory::Buffer},
        std::pair{GgmlType::F16, KvMemory::Image}}) {
    for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
      SCOPED_TRACE(fmt::format("{} cache in a {}, {} mode", type_name(type), kv_memory_name(kv_memory),
                               mode == RopeMode::Neox ? "Neox" : "norm"));
      RopeShape r;
      r.n_head = 4, r.n_head_kv = 2, r.head_dim = hd, r.rope_dim = 8, r.table = &table, r.mode = mode;
      std::vector<float> q = rand_floats(size_t(n_tok * 4 * hd), 61),
                         k = rand_floats(size_t(n_tok * kv_dim), 62),
                         v = rand_floats(size_t(n_tok * kv_dim), 63);
      std::vector<float> q2 = q, k2 = k;
      VulkanBackendOptions o = options();
      o.profiling = true;
      o.kv_layers = kLayers, o.kv_ctx = kCtx, o.kv_dim = kv_dim, o.kv_type = type, o.kv_memory = kv_memory;
      for (std::vector<float>* a : {&q, &k, &v}) o.resident.push_back({a->data(), a->size() * 4});
      VulkanBackend be(o);
      KvCache fused(kLayers, kCtx, 2, hd, type), apart(kLayers, kCtx, 2, hd, type);
      for (std::vector<float>* a : {&q, &k, &v}) be.host_wrote(a->data(), a->size() * 4);
      be.reset_kernel_times();
      be.rope_kv_store(q.data(), k.data(), v.data(), fused, layer, pos, n_tok, r);
      const std::vector<KernelTime> t = be.kernel_times();
      ASSERT_EQ(t.size(), 1u);
      EXPECT_EQ(t[0].name, "rope_kv_store");
      EXPECT_EQ(t[0].calls, 1);
      be.to_host(q.data(), q.size() * 4);
      be.to_host(k.data(), k.size() * 4);
      be.read_kv(fused);
      // The same ops apart, on copies that are not resident, into a cleared device cache.
      auto be2 = make(kv_dim, type, 0, kv_memory);
      be2->rope(q2.data(), n_tok, 4, hd, 8, pos, table, mode);
      be2->rope(k2.data(), n_tok, 2, hd, 8, pos, table, mode);
      be2->kv_store(apart, layer, k2.data(), v.data(), pos, n_tok);
      be2->read_kv(apart);
      EXPECT_EQ(q, q2);
      EXPECT_EQ(k, k2);
      for (int kind = 0; kind < 2; ++kind) {
        for (int32_t p : pos) {
          const size_t at = size_t(p) * fused.row_bytes();
          EXPECT_EQ(
              0, std::memcmp(fused.plane(layer, kind) + at, apart.plane(layer, kind) + at, fused.row_bytes()))
              << "plane " << kind << " position " << p;
        }
      }
    }
  }
}

TEST_P(VulkanOps, kv_store_and_attention) {
  // Heads of 40 (rows read 16 bytes at a time) and 22 (element by element: not a multiple of 16 bytes); the
  // fourth case with the cache split one layer a buffer (the second layer, read below, in the second buffer);
  // the last three with the f16 cache in RGBA16F images (--kv-memory image), the last split one layer an
  // image (600 lines: 2 x 300 positions).
  const KvMemory B = KvMemory::Buffer, I = KvMemory::Image;
  for (const auto& [kv_type, hd, split, mem] :
       {std::tuple{GgmlType::F16, int64_t(40), false, B}, std::tuple{GgmlType::F32, int64_t(40), false, B},
        std::tuple{GgmlType::F16, int64_t(22), false, B}, std::tuple{GgmlType::F32, int64_t(40), true, B},
        std::tuple{GgmlType::F16, int64_t(40), false, I}, std::tuple{GgmlType::F16, int64_t(22), false, I},
        std::tuple{GgmlType::F16, int64_t(40), true, I}}) {
    const int64_t n_head = 6, n_head_kv = 2, kv_dim = n_head_kv * hd;
    const uint64_t layer_bytes = 2 * uint64_t(kCtx * kv_dim) * (kv_type == GgmlType::F16 ? 2 : 4);
    auto vk = mem == I ? make(kv_dim, kv_type, 0, I, split ? uint32_t(2 * kCtx) : 0)
                       : make(kv_dim, kv_type, split ? layer_bytes : 0);
    ASSERT_EQ(mem == I ? vk->kv_images() : vk->kv_buffers(), split ? size_t(kLayers) : size_t(1));
    KvCache ref(kLayers, kCtx, n_head_kv, hd, kv_type), dev_shape(kLayers, kCtx, n_head_kv, hd, kv_type);
    uint32_t seed = 100;
    for (int64_t p0 = 0; p0 < kCtx; p0 += 7) {
      const int64_t nt = std::min<int64_t>(7, kCtx - p0);
      std::vector<int32_t> pos(static_cast<size_t>(nt));
      for (int64_t t = 0; t < nt; ++t) pos[size_t(t)] = int32_t(p0 + t);
      for (int64_t layer = 0; layer < kLayers; ++layer) {
        const std::vector<float> k = rand_floats(size_t(nt * kv_dim), seed++),
                                 v = rand_floats(size_t(nt * kv_dim), seed++);
        cpu_->kv_store(ref, layer, k.data(), v.data(), pos.data(), nt);
        vk->kv_store(dev_shape, layer, k.data(), v.data(), pos.data(), nt);
      }
    }
    KvCache back(kLayers, kCtx, n_head_kv, hd, kv_type);
    vk->read_kv(back);
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int kind = 0; kind < 2; ++kind) {
        const size_t elem = kv_type == GgmlType::F16 ? 2 : 4;
        for (int64_t i = 0; i < kCtx * kv_dim; ++i) {
          float a, b;
          if (elem == 2) {
            uint16_t ha, hb;
            std::memcpy(&ha, ref.plane(l, kind) + 2 * i, 2);
            std::memcpy(&hb, back.plane(l, kind) + 2 * i, 2);
            a = fp16_to_fp32(ha);
            b = fp16_to_fp32(hb);
            // packHalf2x16's rounding is the driver's: at most one half-ulp step from round-to-nearest-even.
            ASSERT_NEAR(b, a, std::abs(a) * 0x1p-10 + 0x1p-24)
                << "layer " << l << " plane " << kind << " at " << i;
          } else {
            std::memcpy(&a, ref.plane(l, kind) + 4 * i, 4);
            std::memcpy(&b, back.plane(l, kind) + 4 * i, 4);
            ASSERT_EQ(b, a);
          }
        }
      }
    }
    // Attention reads what the device stored; the reference reads the device's rows too, so the check
    // is of attention alone.
    vk->kv_to_host(ref, 0, kCtx);
    for (int64_t window : {int64_t(0), int64_t(61)}) {
      AttnParams p;
      p.n_head = n_head;
      p.n_head_kv = n_head_kv;
      p.head_dim = hd;
      p.scale = 1.0f / std::sqrt(float(hd));
      p.window = window;
      const int32_t pos[5] = {0, 299, 64, 257, 100};
      std::vector<float> q = rand_floats(size_t(5 * n_head * hd), 7);
      // The query at 299 is 4x the key at 280 of its KV head: its largest score is in the second chunk of
      // 256 keys, so that the first chunk's sums must be rescaled.
      for (int64_t h = 0; h < n_head; ++h) {
        const uint8_t* krow = ref.plane(1, 0) + 280 * ref.row_bytes();
        for (int64_t d = 0; d < hd; ++d) {
          const int64_t e = h / (n_head / n_head_kv) * hd + d;
          float kv;
          if (kv_type == GgmlType::F16) {
            uint16_t b;
            std::memcpy(&b, krow + 2 * e, 2);
            kv = fp16_to_fp32(b);
          } else {
            std::memcpy(&kv, krow + 4 * e, 4);
          }
          q[size_t((1 * n_head + h) * hd + d)] = 4.0f * kv;
        }
      }
      std::vector<float> want(q.size()), have(q.size(), NAN);
      cpu_->attention(q.data(), ref, 1, pos, 5, p, want.data());
      vk->attention(q.data(), dev_shape, 1, pos, 5, p, have.data());
      // Softmax-weighted sums of values within [-1, 1]: a reordered sum over up to 300 keys and exp's few
      // ulps, absolute 1e-5.
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(have[i], want[i], 1e-5) << "window " << window << " element " << i;
      // One token (decode's pipeline, on more invocations): the query at 299 alone.
      const int32_t pos1[1] = {299};
      const std::vector<float> q1(q.begin() + n_head * hd, q.begin() + 2 * n_head * hd);
      std::vector<float> want1(q1.size()), have1(q1.size(), NAN);
      cpu_->attention(q1.data(), ref, 1, pos1, 1, p, want1.data());
      vk->attention(q1.data(), dev_shape, 1, pos1, 1, p, have1.data());
      for (size_t i = 0; i < want1.size(); ++i)
        ASSERT_NEAR(have1[i], want1[i], 1e-5) << "one token, window " << window << " element " << i;
    }
  }
}

// --kv-memory image refuses what it cannot hold, naming the cause: an f32 cache (the images hold halves),
// rows that are not whole texels, and a layer taller than the 2D image side.
TEST_P(VulkanOps, kv_image_refusals_name_the_cause) {
  if (GetParam() != "none") GTEST_SKIP() << "the checks are the host's: run under none";
  auto refused = [&](GgmlType type, int64_t kv_dim, uint32_t image_max, const char* want) {
    try {
      make(kv_dim, type, 0, KvMemory::Image, image_max);
      ADD_FAILURE() << "made a KV image of " << kv_dim << " " << type_name(type);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused(GgmlType::F32, 40, 0, "use --cache-type f16");
  refused(GgmlType::F16, 42, 0, "whole texels of four halves (kv_dim 42)");
  refused(GgmlType::F16, 40, 599, "over the device's 2D image side of 599");
}

INSTANTIATE_TEST_SUITE_P(Profiles, VulkanOps, ::testing::ValuesIn(test::vulkan_test_profiles()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(VulkanDevice, profiles_clamp_the_capabilities) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  vulkan::Capabilities c = vulkan::query_capabilities(vulkan::list_devices()[0]);
  vulkan::apply_profile(c, vulkan::find_profile("powervr-cxt"));
  EXPECT_EQ(c.subgroup_size, 128u);
  EXPECT_LE(c.shared_memory_bytes, 32768u);
  EXPECT_FALSE(c.float16);
  EXPECT_FALSE(c.integer_dot);
  EXPECT_FALSE(c.coopmat_khr);
  vulkan::Capabilities n = vulkan::query_capabilities(vulkan::list_devices()[0]);
  vulkan::apply_profile(n, vulkan::find_profile("no-16bit"));
  EXPECT_FALSE(n.storage16);
  EXPECT_FALSE(n.float16);
  EXPECT_THROW(vulkan::find_profile("mali-t880"), Error);
}

}  // namespace
}  // namespace tilellm
