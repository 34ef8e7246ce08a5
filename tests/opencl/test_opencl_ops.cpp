// Every op of the OpenCL backend against the CPU backend (the reference, float path) on random data of odd
// sizes, under every device profile: "none" runs the device as it is; the others clamp local memory,
// work-group size, subgroups and the work-group multiple (so global-size rounding with tail guards runs with
// multiples of 16, 32 and 128 on any device).
//
// Tolerances, in units of u = 2^-24 (float32 unit roundoff), each justified where it is checked. Ops whose
// device arithmetic is the CPU's operation for operation (embedding, add, kv_store) must match bit for bit.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/kv_cache.h"
#include "backends/opencl/error.h"
#include "backends/opencl/opencl_backend.h"
#include "backends/registry.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "format/quants.h"
#include "random_data.h"
#include "test_device.h"

namespace tilellm {
namespace {

using test::have_device;
using test::make_weight;
using test::OwnedWeight;
using test::rand_floats;

constexpr double kU = 0x1p-24;

std::vector<float> dequantize(const Weight& w) {
  std::vector<float> f(size_t(w.n_in * w.n_out));
  for (int64_t r = 0; r < w.n_out; ++r) dequantize_row(w.type, w.row(r), f.data() + r * w.n_in, w.n_in);
  return f;
}

// y (n_out rows) against a float64 product of the exact weights wf ([n_out][n_in]) and x: the device forms
// each weight exactly and sums n_in products in float, so each row is within (n_in + 1) u sum |w_i x_i|.
void expect_near_float64_product(const std::vector<float>& wf, const std::vector<float>& x,
                                 const std::vector<float>& y, const std::string& what) {
  const size_t n_in = x.size();
  for (size_t r = 0; r < y.size(); ++r) {
    double ref = 0.0, mag = 0.0;
    for (size_t i = 0; i < n_in; ++i) {
      ref += double(wf[r * n_in + i]) * x[i];
      mag += std::abs(double(wf[r * n_in + i]) * x[i]);
    }
    EXPECT_LE(std::abs(ref - y[r]), (double(n_in) + 1.0) * kU * mag) << what << " row " << r;
  }
}

// The block formats the device reads, each through a (weights mode, GGUF type) that keeps it (the GGUF
// ones, the two --weights conversions, Kq4 for Q4_K and Kq8 for the other K-quants), and the suffix of its
// kernels' names.
struct BlockFormat {
  WeightsMode mode;
  GgmlType type;
  const char* fmt;
};
constexpr BlockFormat kBlockFormats[] = {
    {WeightsMode::Native, GgmlType::Q4_0, "q4_0"},  {WeightsMode::Native, GgmlType::Q4_1, "q4_1"},
    {WeightsMode::Native, GgmlType::Q8_0, "q8_0"},  {WeightsMode::Int4B64, GgmlType::F32, "int4b64"},
    {WeightsMode::Int8B0, GgmlType::F32, "int8b0"}, {WeightsMode::Native, GgmlType::Q4_K, "kq4"},
    {WeightsMode::Native, GgmlType::Q5_K, "kq8"},   {WeightsMode::Native, GgmlType::Q6_K, "kq8"}};

// Fixture: a CPU backend (2 threads, float path) and an OpenCL backend under the profile of the parameter.
class OpenclOps : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr int64_t kLayers = 3, kCtx = 77;

  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  }

  std::unique_ptr<OpenclBackend> make(int64_t kv_dim = 0, GgmlType kv_type = GgmlType::F16,
                                      int64_t attention_chunk_blocks = 4, int64_t attention_pass_blocks = 4) {
    OpenclBackendOptions o;
    o.device = test::opencl_test_device();
    o.profile = GetParam();
    o.max_tokens = 8;
    o.max_in_elems = 1 << 16;
    o.max_out_elems = 1 << 16;
    o.max_width = 1024;
    o.self_check = false;  // these tests check the kernels themselves; a CPU fallback would hide a fault
    o.int_gemm = false;    // the float GEMM: the integer one (q8_plain_dot below) rounds x
    o.attention_chunk_blocks = attention_chunk_blocks;
    o.attention_pass_blocks = attention_pass_blocks;
    if (kv_dim > 0) {
      o.kv_layers = kLayers;
      o.kv_ctx = kCtx;
      o.kv_dim = kv_dim;
      o.kv_type = kv_type;
    }
    return std::make_unique<OpenclBackend>(o);
  }

  // Small sizes for tests that set options of their own (profiling, resident arrays, a KV cache, a
  // converted format): the device under the parameter's profile, no self-check.
  OpenclBackendOptions small_options(int64_t max_tokens) const {
    OpenclBackendOptions o;
    o.device = test::opencl_test_device();
    o.profile = GetParam();
    o.max_tokens = max_tokens;
    o.max_in_elems = o.max_out_elems = 1 << 12;
    o.max_width = 256;
    o.self_check = false;
    o.int_gemm = false;  // as make()
    return o;
  }

  // small_options with kernel timing, a KV cache of kLayers x kCtx rows of kv_dim in `type`, and the host
  // arrays kept on the device: what the fused decode launches' tests run on.
  OpenclBackendOptions fused_options(int64_t max_tokens, int64_t kv_dim, GgmlType type,
                                     std::initializer_list<std::vector<float>*> resident) const {
    OpenclBackendOptions o = small_options(max_tokens);
    o.profiling = true;
    o.kv_layers = kLayers;
    o.kv_ctx = kCtx;
    o.kv_dim = kv_dim;
    o.kv_type = type;
    for (std::vector<float>* a : resident) o.resident.push_back({a->data(), a->size() * sizeof(float)});
    return o;
  }

  // Weights must outlive the backend (it keys them by address): each test keeps its own here.
  OwnedWeight& keep(OwnedWeight w) {
    return *kept_.emplace_back(std::make_unique<OwnedWeight>(std::move(w)));
  }

  std::vector<std::unique_ptr<OwnedWeight>> kept_;
  ThreadPool pool_{2};
  CpuBackend cpu_{pool_, ActivationMode::F32, 1 << 16};
};

TEST_P(OpenclOps, capabilities_are_clamped_to_the_profile) {
  auto be = make();
  const opencl::Capabilities& c = be->caps();
  const opencl::DeviceProfile& p = opencl::find_profile(GetParam());
  EXPECT_EQ(c.profile, GetParam());
  EXPECT_LE(c.local_mem_bytes, p.local_mem_bytes);
  EXPECT_LE(c.max_work_group_size, p.max_work_group_size);
  EXPECT_LE(c.max_alloc_bytes, p.max_alloc_bytes);
  if (p.wg_multiple > 0) {
    EXPECT_EQ(c.wg_multiple, std::min(p.wg_multiple, c.max_work_group_size));
  }
  if (p.max_subgroup_size == 0) {
    EXPECT_FALSE(c.subgroups);
  }
  EXPECT_GT(c.compute_units, 0u);
}

TEST_P(OpenclOps, self_check_passes_every_kernel_on_this_device) {
  OpenclBackendOptions o = small_options(8);
  o.self_check = true;
  OpenclBackend be(o);
  EXPECT_TRUE(be.cpu_fallbacks().empty()) << be.cpu_fallbacks().front();
}

TEST_P(OpenclOps, embedding_matches_cpu_bit_for_bit) {
  auto be = make();
  const int32_t ids[5] = {6, 0, 12, 6, 3};
  for (GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q5_0,
        GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::BF16}) {
    const int64_t n_in = type_traits(t).block_size == 256 ? 512 : (type_traits(t).block_size == 1 ? 99 : 96);
    OwnedWeight& w = keep(make_weight(t, n_in, 13, 11));
    be->upload_weight(w.w);
    for (float scale : {1.0f, 0.37f}) {
      std::vector<float> a(size_t(5 * n_in)), b(size_t(5 * n_in), -7.0f);
      cpu_.embed(w.w, ids, 5, scale, a.data());
      be->embed(w.w, ids, 5, scale, b.data());
      // The device forms each weight with the CPU's exact formula and applies the same single rounding of
      // the scale multiply, so the results are identical.
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << type_name(t) << " scale " << scale;
    }
  }
  const int32_t bad = 13;
  OwnedWeight& w = keep(make_weight(GgmlType::F32, 8, 13, 1));
  be->upload_weight(w.w);
  std::vector<float> out(8);
  EXPECT_THROW(be->embed(w.w, &bad, 1, 1.0f, out.data()), Error);
}

TEST_P(OpenclOps, matmul_matches_cpu_for_every_weight_type) {
  auto be = make();
  for (GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q5_0,
        GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::BF16}) {
    const int64_t bs = type_traits(t).block_size;
    const int64_t n_in = bs == 1 ? 333 : bs * (bs == 256 ? 3 : 11);  // odd multiples of the block size
    const int64_t n_out = 37;  // not a multiple of the matvec kernel's 4 rows per group
    OwnedWeight& w = keep(make_weight(t, n_in, n_out, 21));
    be->upload_weight(w.w);
    // 7 tokens: the matmul kernel, one full tile of 4 tokens and a partial one; 1 token: the matvec kernel.
    for (int64_t n_tok : {7, 1}) {
      const std::vector<float> x = rand_floats(size_t(n_tok * n_in), 5);
      std::vector<float> a(size_t(n_tok * n_out)), b(size_t(n_tok * n_out), -7.0f);
      cpu_.matmul(w.w, x.data(), n_tok, a.data());
      be->matmul(w.w, x.data(), n_tok, b.data());
      // Both sides sum the same n_in exact products w_i x_i in float, in different orders; each result is
      // within gamma_n * sum |w_i x_i| (gamma_n ~ n u) of the exact sum, so they differ by at most 2 n u sum
      // |w_i x_i|.
      const std::vector<float> wf = dequantize(w.w);
      int bad = 0;
      for (int64_t tk = 0; tk < n_tok; ++tk) {
        for (int64_t r = 0; r < n_out; ++r) {
          double mag = 0.0;
          for (int64_t i = 0; i < n_in; ++i)
            mag += std::abs(double(wf[size_t(r * n_in + i)]) * x[size_t(tk * n_in + i)]);
          const double err = std::abs(double(a[size_t(tk * n_out + r)]) - b[size_t(tk * n_out + r)]);
          if (!(err <= 2.0 * double(n_in) * kU * mag) && bad++ < 3) {
            ADD_FAILURE() << type_name(t) << " y[" << tk << "][" << r << "]: cpu "
                          << a[size_t(tk * n_out + r)] << " opencl " << b[size_t(tk * n_out + r)];
          }
        }
      }
    }
  }
}

TEST_P(OpenclOps, profiling_times_each_kernel_launch) {
  // With profiling on, every launch is counted under its kernel's name with a positive device time; a reset
  // clears the totals; without profiling nothing is recorded.
  for (bool profiling : {true, false}) {
    OpenclBackendOptions o = small_options(8);
    o.profiling = profiling;
    OpenclBackend be(o);
    OwnedWeight& w = keep(make_weight(GgmlType::Q4_0, 96, 13, 2));
    be.upload_weight(w.w);
    const std::vector<float> x = rand_floats(2 * 96, 3), nw = rand_floats(96, 4);
    std::vector<float> y(26), xn(2 * 96);
    be.matmul(w.w, x.data(), 1, y.data());
    be.matmul(w.w, x.data(), 2, y.data());
    be.matmul(w.w, x.data(), 1, y.data());
    be.rmsnorm(x.data(), nw.data(), xn.data(), 2, 96, 1e-5f);
    const std::vector<KernelTime> t = be.kernel_times();
    if (!profiling) {
      EXPECT_TRUE(t.empty());
      continue;
    }
    ASSERT_EQ(t.size(), 3u);  // in the order they first ran
    EXPECT_EQ(t[0].name, "matvec_q4_0");
    EXPECT_EQ(t[0].calls, 2);
    EXPECT_EQ(t[1].name, "matmul_q4_0");
    EXPECT_EQ(t[1].calls, 1);
    EXPECT_EQ(t[2].name, "rmsnorm");
    EXPECT_EQ(t[2].calls, 1);
    for (const KernelTime& k : t) EXPECT_GT(k.ns, 0.0) << k.name;
    be.reset_kernel_times();
    EXPECT_TRUE(be.kernel_times().empty());
  }
}

TEST_P(OpenclOps, matmul_shared_equals_separate_matmuls) {
  auto be = make();
  OwnedWeight& w1 = keep(make_weight(GgmlType::Q4_1, 160, 21, 3));
  OwnedWeight& w2 = keep(make_weight(GgmlType::Q8_0, 160, 9, 4));
  be->upload_weight(w1.w);
  be->upload_weight(w2.w);
  const std::vector<float> x = rand_floats(2 * 160, 8);
  std::vector<float> y1(42), y2(18), s1(42), s2(18);
  be->matmul(w1.w, x.data(), 2, s1.data());
  be->matmul(w2.w, x.data(), 2, s2.data());
  const Weight* ws[2] = {&w1.w, &w2.w};
  float* ys[2] = {y1.data(), y2.data()};
  be->matmul_shared(ws, ys, 2, x.data(), 2);
  EXPECT_EQ(y1, s1);  // the same kernel on the same input: identical
  EXPECT_EQ(y2, s2);
}

TEST_P(OpenclOps, decode_matvecs_into_resident_arrays_share_one_launch) {
  // Decode's q, k, v (or gate, up): block-format weights of one format over one x, each writing the start of
  // its own device-resident array, run as one launch; the results equal one launch per weight. Odd row
  // counts put a half-used group at the end of every weight. A fourth weight starts a second launch.
  std::vector<float> x = rand_floats(160, 11), y1(21), y2(9), y3(13), y4(7);
  OpenclBackendOptions o = small_options(4);
  o.profiling = true;
  for (std::vector<float>* a : {&x, &y1, &y2, &y3, &y4}) o.resident.push_back({a->data(), a->size() * 4});
  OpenclBackend be(o);
  OwnedWeight* w[4] = {
      &keep(make_weight(GgmlType::Q4_0, 160, 21, 5)), &keep(make_weight(GgmlType::Q4_0, 160, 9, 6)),
      &keep(make_weight(GgmlType::Q4_0, 160, 13, 7)), &keep(make_weight(GgmlType::Q4_0, 160, 7, 8))};
  for (OwnedWeight* ow : w) be.upload_weight(ow->w);
  be.host_wrote(x.data(), x.size() * 4);
  const Weight* ws[4] = {&w[0]->w, &w[1]->w, &w[2]->w, &w[3]->w};
  float* ys[4] = {y1.data(), y2.data(), y3.data(), y4.data()};
  be.reset_kernel_times();
  be.matmul_shared(ws, ys, 4, x.data(), 1);
  const std::vector<KernelTime> t = be.kernel_times();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].name, "matvec_q4_0");
  EXPECT_EQ(t[0].calls, 2);  // q, k, v-like three in one launch, then the fourth
  std::vector<float>* got[4] = {&y1, &y2, &y3, &y4};
  for (int i = 0; i < 4; ++i) {
    be.to_host(got[i]->data(), got[i]->size() * 4);
    std::vector<float> want(got[i]->size());
    be.matmul(*ws[i], x.data(), 1, want.data());  // want is not resident: a launch of its own
    EXPECT_EQ(*got[i], want) << "weight " << i;
  }
}

TEST_P(OpenclOps, decode_gate_up_and_glu_run_as_one_kernel) {
  // Decode's gate and up products and their activation in one launch (matvec_glu_<format>), for every block
  // format the device holds (the GGUF ones, the two --weights conversions, Kq4 for Q4_K and Kq8 for the
  // other K-quants; the kernel names show each weight took its format's path), with both activations: equal
  // bit for bit to the unfused device path (two matvecs, then the glu kernel), which sums the same units in
  // the same order; the matvecs and glu are held to the CPU by their own tests. 37 rows leave the last group
  // half used. Float products, and the integer ones of --activations q8 (matvec_glu_q8_<format> after the
  // input's rounding, for the formats they read; plain integer multiply-adds on any device).
  const int64_t n_out = 37;
  for (const bool q8 : {false, true})
    for (const BlockFormat& c : kBlockFormats) {
      const int64_t n_in = type_traits(c.type).block_size == 256 ? 512 : 160;
      const std::vector<float> x = rand_floats(size_t(n_in), 33);
      OpenclBackendOptions o = small_options(4);
      o.weights = c.mode;
      o.profiling = true;
      o.q8_plain_dot = q8;
      o.activations = ActivationMode::Quantized;
      OpenclBackend be(o);
      // Kq8 (Q5_K, Q6_K) has no integer kernel; a profile without a GEMM tile builds none.
      const bool int_kernel = q8 && be.gemm_tiles().on() && std::string_view(c.fmt) != "kq8";
      const std::string kernel = std::string(int_kernel ? "matvec_glu_q8_" : "matvec_glu_") + c.fmt;
      OwnedWeight& g = keep(make_weight(c.type, n_in, n_out, 31));
      OwnedWeight& u = keep(make_weight(c.type, n_in, n_out, 32));
      be.upload_weight(g.w);
      be.upload_weight(u.w);
      for (FfnAct act : {FfnAct::SiLU, FfnAct::GeluTanh}) {
        std::vector<float> fused(static_cast<size_t>(n_out), -7.0f), want(static_cast<size_t>(n_out)),
            up(static_cast<size_t>(n_out));
        be.reset_kernel_times();
        be.matmul_glu(g.w, u.w, x.data(), 1, act, fused.data(), up.data());
        std::vector<KernelTime> t = be.kernel_times();
        if (int_kernel) {  // the rounding first
          ASSERT_EQ(t.size(), 2u) << kernel;
          EXPECT_EQ(t[0].name, "quantize_q8");
          t.erase(t.begin());
        }
        ASSERT_EQ(t.size(), 1u) << kernel;
        EXPECT_EQ(t[0].name, kernel);
        EXPECT_EQ(t[0].calls, 1);
        be.Backend::matmul_glu(g.w, u.w, x.data(), 1, act, want.data(), up.data());
        EXPECT_EQ(fused, want) << kernel << (act == FfnAct::SiLU ? " silu" : " gelu");
      }
    }
}

TEST_P(OpenclOps, decode_matvec_and_glu_over_long_rows) {
  // Rows of 8448 (>= 8192) take the decode kernels' wider work-groups (matvec_block_wg), over 528 half blocks
  // per row: every item makes 4 or 5 passes, the prefetching loop's last "next" unit included. For each
  // device format: the matvec against a float64 sum over the exact weights (the device forms each weight
  // exactly and sums n_in products in float: within (n_in + 1) u sum |w_i x_i|), and the fused gate/up/GLU
  // kernel equal bit for bit to the unfused device path at that size.
  struct Case {
    WeightsMode mode;
    GgmlType type;
  };
  const Case cases[] = {{WeightsMode::Native, GgmlType::Q4_0}, {WeightsMode::Native, GgmlType::Q4_1},
                        {WeightsMode::Native, GgmlType::Q8_0}, {WeightsMode::Int4B64, GgmlType::F32},
                        {WeightsMode::Int8B0, GgmlType::F32},  {WeightsMode::Native, GgmlType::Q4_K}};
  const int64_t n_in = 8448, n_out = 9;
  const std::vector<float> x = rand_floats(size_t(n_in), 41);
  for (const Case& c : cases) {
    OpenclBackendOptions o = small_options(1);
    o.max_in_elems = n_in;
    o.weights = c.mode;
    OpenclBackend be(o);
    OwnedWeight& g = keep(make_weight(c.type, n_in, n_out, 51));
    OwnedWeight& u = keep(make_weight(c.type, n_in, n_out, 52));
    be.upload_weight(g.w);
    be.upload_weight(u.w);
    std::vector<float> wf = dequantize(g.w);
    if (c.mode != WeightsMode::Native) {
      const AsymFormat kind = c.mode == WeightsMode::Int4B64 ? AsymFormat::Int4B64 : AsymFormat::Int8B0;
      std::vector<float> row(static_cast<size_t>(n_in));
      for (int64_t r = 0; r < n_out; ++r) {
        std::copy_n(wf.begin() + r * n_in, n_in, row.begin());
        dequantize_row_asym(kind, row.data(), n_in, wf.data() + r * n_in);
      }
    }
    std::vector<float> y(static_cast<size_t>(n_out), -7.0f);
    be.matmul(g.w, x.data(), 1, y.data());
    expect_near_float64_product(wf, x, y, fmt::format("{} {}", type_name(c.type), weights_mode_name(c.mode)));
    std::vector<float> fused(static_cast<size_t>(n_out), -7.0f), want(static_cast<size_t>(n_out)),
        up(static_cast<size_t>(n_out));
    be.matmul_glu(g.w, u.w, x.data(), 1, FfnAct::SiLU, fused.data(), up.data());
    be.Backend::matmul_glu(g.w, u.w, x.data(), 1, FfnAct::SiLU, want.data(), up.data());
    EXPECT_EQ(fused, want) << type_name(c.type) << " " << weights_mode_name(c.mode);
  }
}

TEST_P(OpenclOps, device_memory_counts_each_weight_once_in_its_device_layout) {
  OpenclBackendOptions o = small_options(2);
  OpenclBackend be(o);
  const OpenclBackend::DeviceMemory empty = be.device_memory();
  EXPECT_EQ(empty.weights, 0u);
  EXPECT_GT(empty.other, 0u);  // the scratch buffers sized from the options
  OwnedWeight& a = keep(make_weight(GgmlType::Q4_K, 512, 9, 61));
  OwnedWeight& b = keep(make_weight(GgmlType::Q4_0, 96, 5, 62));
  be.upload_weight(a.w);
  be.upload_weight(b.w);
  be.upload_weight(a.w);  // again: the same device copy
  const OpenclBackend::DeviceMemory m = be.device_memory();
  EXPECT_EQ(m.weights, 9 * OpenclBackend::device_row_bytes(GgmlType::Q4_K, 512) +
                           5 * OpenclBackend::device_row_bytes(GgmlType::Q4_0, 96));
  EXPECT_EQ(m.kv, 0u);
  EXPECT_EQ(m.other, empty.other);
  EXPECT_NE(be.memory_summary().find("weights"), std::string::npos);
}

TEST_P(OpenclOps, matmul_of_a_weight_not_uploaded_is_an_error) {
  auto be = make();
  OwnedWeight w = make_weight(GgmlType::F32, 16, 4, 1);
  std::vector<float> x(16, 1.0f), y(4);
  EXPECT_THROW(be->matmul(w.w, x.data(), 1, y.data()), Error);
}

// The prefill matmul (the tiled GEMM, or the row kernels where no tile fits) against the CPU at every tail:
// n_tok = 1 .. tt + 3 (one-token products sent to the matmul kernel too) and n_out not a multiple of the
// rows per tile nor of 4, for every format a kernel reads (Q4_K and Q6_K for Kq4 and Kq8), with one block
// and with 4096 + one block of inputs (float formats: also rows ending in a partial block). Bound as in
// matmul_matches_cpu_for_every_weight_type.
void check_matmul_tails(OpenclBackend& be, CpuBackend& cpu, std::vector<std::unique_ptr<OwnedWeight>>& kept,
                        const std::vector<int64_t>& n_toks_long) {
  const int64_t tt = be.gemm_tiles().on() ? be.gemm_tiles().tt() : OpenclBackend::kMatmulTile;
  const int64_t tr = be.gemm_tiles().on() ? be.gemm_tiles().tr() : 4;
  std::vector<int64_t> all;  // 1 .. tt + 3: every partial token tile, the full one, and past it
  for (int64_t n = 1; n <= tt + 3; ++n) all.push_back(n);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0,
                     GgmlType::Q4_K, GgmlType::Q6_K}) {
    const bool fl = type_traits(t).block_size == 1;
    const int64_t bs = std::max<int64_t>(32, type_traits(t).block_size);  // K-quants (Kq4, Kq8): 256
    struct Case {
      int64_t n_in, n_out;
      const std::vector<int64_t>* n_toks;
    };
    std::vector<Case> cases = {{bs, 3, &all}, {bs, 2 * tr + 5, &all}, {4096 + bs, 2 * tr + 5, &n_toks_long}};
    if (fl) {
      cases.push_back({45, tr + 1, &all});
      cases.push_back({4096 + 45, tr + 3, &n_toks_long});
    }
    for (const Case& c : cases) {
      const uint32_t seed = uint32_t(c.n_in * 131 + c.n_out);
      OwnedWeight& w =
          *kept.emplace_back(std::make_unique<OwnedWeight>(make_weight(t, c.n_in, c.n_out, seed)));
      be.upload_weight(w.w);
      const std::vector<float> wf = dequantize(w.w);
      for (int64_t n_tok : *c.n_toks) {
        const std::vector<float> x = rand_floats(size_t(n_tok * c.n_in), seed + uint32_t(n_tok));
        std::vector<float> a(size_t(n_tok * c.n_out)), b(size_t(n_tok * c.n_out), -7.0f);
        cpu.matmul(w.w, x.data(), n_tok, a.data());
        be.matmul(w.w, x.data(), n_tok, b.data());
        int bad = 0;
        for (int64_t tk = 0; tk < n_tok; ++tk) {
          for (int64_t r = 0; r < c.n_out; ++r) {
            double mag = 0.0;
            for (int64_t i = 0; i < c.n_in; ++i)
              mag += std::abs(double(wf[size_t(r * c.n_in + i)]) * x[size_t(tk * c.n_in + i)]);
            const size_t o = size_t(tk * c.n_out + r);
            if (!(std::abs(double(a[o]) - b[o]) <= 2.0 * double(c.n_in) * kU * mag) && bad++ < 3) {
              ADD_FAILURE() << type_name(t) << " " << c.n_out << " x " << c.n_in << ", " << n_tok
                            << " tokens: y[" << tk << "][" << r << "]: cpu " << a[o] << " opencl " << b[o];
            }
          }
        }
        if (bad > 0) return;
      }
    }
  }
}

OpenclBackendOptions tails_options(const std::string& profile) {
  OpenclBackendOptions o;
  o.device = test::opencl_test_device();
  o.profile = profile;
  o.max_tokens = 128;  // past the largest token tile + 3
  o.max_in_elems = 128 * (4096 + 45);
  o.max_out_elems = 128 * 256;
  o.max_width = 1024;
  o.self_check = false;
  o.int_gemm = false;  // the float GEMM's tails (the integer GEMM's: q8_plain_dot, below)
  o.one_token_matvec = false;
  return o;
}

TEST_P(OpenclOps, tiled_matmul_matches_cpu_at_every_tail) {
  OpenclBackend be(tails_options(GetParam()));
  // Every profile (PowerVR Rogue's 4 KiB of local memory included) holds a tile; the one chosen fits.
  const OpenclBackend::GemmTiles& g = be.gemm_tiles();
  ASSERT_TRUE(g.on());
  EXPECT_LE(g.local_bytes(), be.caps().local_mem_bytes);
  EXPECT_LE(g.items(), be.caps().max_work_group_size);
  EXPECT_EQ(g.rm % 4, 0);
  EXPECT_EQ(g.tm % 4, 0);
  const int64_t tt = g.tt();
  check_matmul_tails(be, cpu_, kept_, {1, 2, 3, 5, tt - 1, tt, tt + 1, tt + 3});
}

TEST_P(OpenclOps, two_stage_tile_matches_cpu_at_every_tail) {
  // The largest tile the profile holds twice (one barrier a block) that the device builds and launches: a
  // tile at exactly the local memory limit can be refused (NVIDIA's driver refuses 128x64x2 at launch).
  OpenclBackendOptions o = tails_options(GetParam());
  std::unique_ptr<OpenclBackend> be;
  {
    OpenclBackend probe(o);
    for (const OpenclBackend::GemmTiles& c : OpenclBackend::gemm_tile_choices()) {
      if (be || c.stages != 2 || c.local_bytes() > probe.caps().local_mem_bytes ||
          c.items() > probe.caps().max_work_group_size)
        continue;
      o.gemm_tile = c.name();
      try {
        be = std::make_unique<OpenclBackend>(o);
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_TRUE(what.find("as compiled") != std::string::npos ||
                    what.find("refuses to launch") != std::string::npos)
            << what;
      }
    }
  }
  if (!be) GTEST_SKIP() << "no tile fits twice";
  EXPECT_EQ(be->gemm_tiles().name(), o.gemm_tile);
  EXPECT_EQ(be->gemm_tiles().stages, 2);
  const int64_t tt = be->gemm_tiles().tt();
  check_matmul_tails(*be, cpu_, kept_, {1, 2, 3, 5, tt - 1, tt, tt + 1, tt + 3});
}

// The integer prompt GEMM (kernels/gemm_q8.cl, --activations q8), built with four integer multiply-adds in
// place of a dot product (q8_plain_dot: this device may have none), for every block format it reads (the
// converted ones through backends converting to them): rows and tokens past every tile edge, one block and
// 4096 inputs and one more block, split K forced to one block a slice and not split; one token takes the
// integer decode product (matvec_q8_*) over the same rounding. Reference: the CPU's
// float path on the exact weights and the input as the backend rounds it (rounded_matmul_input); the device
// sums each block's products exactly in integers and rounds a few times a block, so each output is within 4
// n_in u of sum |w x| (Vulkan's bound for the same products), m s's magnitude included for the 4-bit codes'
// offsets.
TEST_P(OpenclOps, integer_prompt_gemm_matches_rounded_reference_at_every_tail) {
  OpenclBackendOptions o = tails_options(GetParam());
  o.q8_plain_dot = true;
  o.one_token_matvec = true;  // one token: the integer decode product
  o.activations = ActivationMode::Quantized;
  struct Kind {
    WeightsMode mode;
    GgmlType type;
  };
  for (const Kind k : {Kind{WeightsMode::Native, GgmlType::Q4_0}, Kind{WeightsMode::Native, GgmlType::Q4_1},
                       Kind{WeightsMode::Native, GgmlType::Q8_0}, Kind{WeightsMode::Native, GgmlType::Q4_K},
                       Kind{WeightsMode::Int4B64, GgmlType::F32}, Kind{WeightsMode::Int8B0, GgmlType::F32}}) {
    for (int64_t split_blocks : {0, 1}) {
      OpenclBackendOptions ok = o;
      ok.weights = k.mode;
      ok.gemm_split_blocks = split_blocks;
      // The weights outlive the backend, which knows them by address.
      std::vector<std::unique_ptr<OwnedWeight>> natives;
      std::vector<std::unique_ptr<test::ConvertedWeight>> convs;
      OpenclBackend be(ok);
      // The integer GEMM shares the float GEMM's tile. A device whose kernels leave a profile no room for
      // one runs prompts on the row kernels, in floats (NVIDIA's OpenCL under powervr-rogue: its compiled
      // kernels take local memory of their own beside the profile's 4 KiB).
      if (!be.gemm_tiles().on()) GTEST_SKIP() << "no GEMM tile fits this device under " << GetParam();
      const int64_t tr = be.gemm_tiles().tr(), tt = be.gemm_tiles().tt();
      const int64_t bs = k.type == GgmlType::Q4_K ? 256 : 32;
      struct Case {
        int64_t n_in, n_out;
        std::vector<int64_t> n_toks;
      };
      const std::vector<Case> cases = {
          {bs, 2 * tr + 5, {1, 2, 3, tt - 1, tt, tt + 3}},
          {split_blocks ? 3 * bs : bs * (4096 / bs + 1), tr + 3, {1, 5, tt + 1}}};
      for (const Case& c : cases) {
        const uint32_t seed = uint32_t(c.n_in * 7 + c.n_out + split_blocks);
        Weight w, we;
        if (k.mode == WeightsMode::Native) {
          natives.push_back(std::make_unique<OwnedWeight>(make_weight(k.type, c.n_in, c.n_out, seed)));
          w = we = natives.back()->w;
        } else {
          convs.push_back(std::make_unique<test::ConvertedWeight>(k.mode, c.n_in, c.n_out, seed));
          w = convs.back()->w;
          we = convs.back()->we;
        }
        be.upload_weight(w);
        const std::vector<float> wf = dequantize(we);
        for (int64_t n_tok : c.n_toks) {
          const std::vector<float> x = rand_floats(size_t(n_tok * c.n_in), seed + uint32_t(n_tok));
          std::vector<float> xr(x.size()), a(size_t(n_tok * c.n_out)), b(a.size(), -7.0f);
          be.rounded_matmul_input(w, x.data(), n_tok, xr.data());
          EXPECT_NE(xr, x) << "the input was not rounded";
          cpu_.matmul(we, xr.data(), n_tok, a.data());
          be.matmul(w, x.data(), n_tok, b.data());
          int bad = 0;
          for (int64_t tk = 0; tk < n_tok; ++tk) {
            for (int64_t r = 0; r < c.n_out; ++r) {
              // The device's terms are d c x and m x (codes c >= 0 for the 4-bit formats and INT8B0, so
              // Q4_0's m = -8 d): |d c| + |m| <= |w| + 2 |m|, and |m| is at most the row's largest |w| (m
              // is a weight, that of code 0, or -8 d where |w| reaches 7 |d| in a random row).
              double wmax = 0.0, mag = 0.0;
              for (int64_t i = 0; i < c.n_in; ++i)
                wmax = std::max(wmax, std::abs(double(wf[size_t(r * c.n_in + i)])));
              for (int64_t i = 0; i < c.n_in; ++i) {
                const double wv = std::abs(double(wf[size_t(r * c.n_in + i)]));
                mag += (wv + 3.0 * wmax) * std::abs(double(xr[size_t(tk * c.n_in + i)]));
              }
              const size_t i = size_t(tk * c.n_out + r);
              if (!(std::abs(double(a[i]) - b[i]) <= 4.0 * double(c.n_in) * kU * mag) && bad++ < 3) {
                ADD_FAILURE() << type_name(k.type) << " (" << weights_mode_name(k.mode) << ") " << c.n_out
                              << " x " << c.n_in << ", " << n_tok << " tokens, split " << split_blocks
                              << ": y[" << tk << "][" << r << "]: reference " << a[i] << " opencl " << b[i];
              }
            }
          }
          if (bad > 0) return;
        }
      }
    }
  }
}

TEST(OpenclGemmTile, small_two_stage_tiles_match_cpu_and_a_tile_too_large_is_refused) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  ThreadPool pool(2);
  CpuBackend cpu(pool, ActivationMode::F32, 1 << 16);
  std::vector<std::unique_ptr<OwnedWeight>> kept;
  // The profiles' test above takes 128x64x2 (none) and 64x64x2 (Mali, Adreno); these the smaller ones.
  for (const char* name : {"32x32x2", "16x16x2"}) {
    OpenclBackendOptions o = tails_options("none");
    o.gemm_tile = name;
    OpenclBackend be(o);
    ASSERT_EQ(be.gemm_tiles().name(), name);
    check_matmul_tails(be, cpu, kept, {1, be.gemm_tiles().tt() + 3});
  }
  // PowerVR Rogue's 4 KiB of local memory holds only the single 16 x 16 tile.
  OpenclBackendOptions o = tails_options("powervr-rogue");
  o.gemm_tile = "16x16x2";
  std::string msg;
  try {
    OpenclBackend be(o);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("--cl-gemm-tile 16x16x2 needs work-groups of 16 items and 8192 bytes of local memory"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("(profile powervr-rogue) allows"), std::string::npos) << msg;
  const std::string bad = [] {
    try {
      make_backend_options(*find_backend("opencl"), {{"--cl-gemm-tile", "100x64"}});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(bad.find("--cl-gemm-tile: '100x64' is not auto or a tile of the GEMM: 128x64 128x64x2 64x64"),
            std::string::npos)
      << bad;
}

// Split K towards `want` slices over nbt blocks: slices of ceil(nbt / want) blocks, as many as that takes
// (none empty).
int64_t slices_for(int64_t want, int64_t nbt) {
  const int64_t b = (nbt + want - 1) / want;
  return (nbt + b - 1) / b;
}

TEST_P(OpenclOps, split_k_matmul_matches_cpu_at_every_tail) {
  // Every tiled product split into slices of 3 blocks (the last one shorter where the blocks do not divide):
  // the slices' sums added in order stay within the unsplit bound.
  OpenclBackendOptions o = tails_options(GetParam());
  o.gemm_split_blocks = 3;
  OpenclBackend be(o);
  ASSERT_TRUE(be.gemm_tiles().on());
  const OpenclBackend::GemmSplit sp = be.gemm_split_for(2 * be.gemm_tiles().tr() + 5, 5, 4096 + 32);
  EXPECT_EQ(sp.blocks, 3);
  EXPECT_EQ(sp.slices, 43);  // 129 blocks
  const int64_t tt = be.gemm_tiles().tt();
  check_matmul_tails(be, cpu_, kept_, {1, 2, 5, tt, tt + 3});
}

TEST_P(OpenclOps, split_k_is_chosen_from_the_tiles_and_compute_units) {
  OpenclBackendOptions o = tails_options(GetParam());
  o.gemm_split = 8;
  OpenclBackend be(o);
  const int64_t tr = be.gemm_tiles().tr(), tt = be.gemm_tiles().tt();
  const int64_t target = 8 * int64_t(std::max<uint32_t>(be.caps().compute_units, 1));  // 8 groups a unit
  // One tile of 129 blocks: split towards the target, at most kMaxGemmSlices slices of at least 4 blocks.
  OpenclBackend::GemmSplit sp = be.gemm_split_for(tr, tt, 4096 + 32);
  EXPECT_EQ(sp.slices, slices_for(std::min<int64_t>(target, OpenclBackend::kMaxGemmSlices), 129));
  EXPECT_GE(sp.blocks, 4);
  EXPECT_GE(sp.slices * sp.blocks, 129);
  EXPECT_LT((sp.slices - 1) * sp.blocks, 129);
  // Two tiles: half the slices, rounded down (no more groups than the target).
  sp = be.gemm_split_for(tr + 1, tt, 4096 + 32);
  EXPECT_EQ(sp.slices, slices_for(std::min<int64_t>(target / 2, OpenclBackend::kMaxGemmSlices), 129));
  // Too few blocks to split: 7 blocks hold one slice of 4 at most.
  sp = be.gemm_split_for(tr, tt, 7 * 32);
  EXPECT_EQ(sp.slices, 1);
  EXPECT_EQ(sp.blocks, 7);
  // More tiles than half the target: unsplit (two slices would pass the groups a unit runs at once; the
  // H200's 256-tile products at 512 tokens lost 14% so); half of it: two slices. One token, so that the
  // slices of a large GPU's many row tiles fit the scratch these options size (a bound that splits less).
  sp = be.gemm_split_for((target / 2 + 1) * tr, 1, 4096);
  EXPECT_EQ(sp.slices, 1);
  sp = be.gemm_split_for(target / 2 * tr, 1, 4096);
  EXPECT_EQ(sp.slices, 2);
  // A split product matches the CPU as the unsplit one does.
  check_matmul_tails(be, cpu_, kept_, {2, tt});
  // Off: never split, whatever the shape.
  o.gemm_split = 0;
  OpenclBackend off(o);
  EXPECT_EQ(off.gemm_split_for(1, 1, 4096).slices, 1);
}

TEST(OpenclGemmSplit, cli_option_sets_the_target_or_turns_it_off) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  const BackendEntry& e = *find_backend("opencl");
  auto split_of = [&](const std::string& v) {
    std::shared_ptr<BackendOptions> o = make_backend_options(e, {{"--cl-gemm-split", v}});
    BackendParams p;
    p.device = test::opencl_test_device();
    p.max_tokens = 64;
    p.max_in_elems = p.max_out_elems = 64 * 4096;
    p.max_width = 4096;
    p.options = o.get();
    std::unique_ptr<Backend> be = e.make(p);
    // One tile of 128 blocks: split under any target above one group.
    const auto& cl = dynamic_cast<OpenclBackend&>(*be);
    return std::pair{cl.gemm_split_for(1, 1, 4096).slices, cl.caps().compute_units};
  };
  EXPECT_EQ(split_of("off").first, 1);
  // One tile splits into as many slices as 8 (or, with auto, 3) groups a unit.
  const auto [slices, units] = split_of("auto");
  EXPECT_EQ(slices, slices_for(std::min<int64_t>(3 * units, OpenclBackend::kMaxGemmSlices), 128));
  EXPECT_EQ(split_of("8").first,
            slices_for(std::min<int64_t>(8 * units, OpenclBackend::kMaxGemmSlices), 128));
  for (const char* bad : {"0", "9", "two", ""}) {
    std::string msg;
    try {
      make_backend_options(e, {{"--cl-gemm-split", bad}});
    } catch (const Error& err) {
      msg = err.what();
    }
    EXPECT_NE(
        msg.find("--cl-gemm-split: '" + std::string(bad) + "' is not auto, off or a number from 1 to 8"),
        std::string::npos)
        << bad << ": " << msg;
  }
}

TEST(OpenclMatvecOptions, unrolled_loads_sum_as_the_formats_own_loop_and_other_group_sizes_hold) {
  // --cl-matvec-unroll U: a decode product's item loads U of its units before converting any (quants.cl
  // TL_MVB_UNITS), summing the same units in the same order as the formats' own loop (one unit ahead for the
  // 4-bit formats, none for the 8-bit ones). For every block format, rows of 160, 1056 and 8448 inputs (5,
  // 33 and 264 blocks: a round past the row's end at every U, 64- and 128-item groups) and 37 rows: the
  // matvec and the gate/up/GLU kernel equal bit for bit to the default build's.
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  std::vector<std::unique_ptr<OwnedWeight>> kept;
  const int64_t n_out = 37;
  auto options = [](WeightsMode mode, int unroll) {
    OpenclBackendOptions o;
    o.device = test::opencl_test_device();
    o.max_tokens = 1;
    o.max_in_elems = o.max_out_elems = 1 << 14;
    o.max_width = 256;
    o.self_check = false;
    o.weights = mode;
    o.matvec_unroll = unroll;
    return o;
  };
  for (WeightsMode mode : {WeightsMode::Native, WeightsMode::Int4B64, WeightsMode::Int8B0}) {
    // The weights of this mode's formats, each at the three row lengths, and the default build's outputs.
    std::vector<const Weight*> gates, ups;
    for (const BlockFormat& c : kBlockFormats) {
      if (c.mode != mode) continue;
      for (int64_t n_in : {160, 1056, 8448}) {
        if (n_in % type_traits(c.type).block_size != 0) continue;
        const auto seed = uint32_t(n_in + int64_t(c.type) * 7);
        gates.push_back(
            &kept.emplace_back(std::make_unique<OwnedWeight>(make_weight(c.type, n_in, n_out, seed)))->w);
        ups.push_back(
            &kept.emplace_back(std::make_unique<OwnedWeight>(make_weight(c.type, n_in, n_out, seed + 1)))->w);
      }
    }
    auto outputs = [&](int unroll) {
      OpenclBackend be(options(mode, unroll));
      std::vector<std::vector<float>> out;
      for (size_t i = 0; i < gates.size(); ++i) {
        be.upload_weight(*gates[i]);
        be.upload_weight(*ups[i]);
        const std::vector<float> x = rand_floats(size_t(gates[i]->n_in), 61);
        std::vector<float> y(static_cast<size_t>(n_out), -7.0f), glu(static_cast<size_t>(n_out), -7.0f),
            up(static_cast<size_t>(n_out));
        be.matmul(*gates[i], x.data(), 1, y.data());
        be.matmul_glu(*gates[i], *ups[i], x.data(), 1, FfnAct::SiLU, glu.data(), up.data());
        out.push_back(std::move(y));
        out.push_back(std::move(glu));
      }
      return out;
    };
    const std::vector<std::vector<float>> want = outputs(0);
    // Every U on the GGUF formats (4- and 8-bit, per-block and per-16 parameters); one on the conversions,
    // whose readers the same loop calls.
    const std::vector<int> unrolls =
        mode == WeightsMode::Native ? std::vector<int>{1, 3, 8} : std::vector<int>{3};
    for (int unroll : unrolls) {
      const std::vector<std::vector<float>> got = outputs(unroll);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const Weight& w = *gates[i / 2];
        EXPECT_EQ(got[i], want[i]) << weights_mode_name(mode) << " " << type_name(w.type) << " n_in "
                                   << w.n_in << (i % 2 ? " glu" : " matvec") << " unroll " << unroll;
      }
    }
  }
  // --cl-matvec-items: other group sizes sum other units together, so against a float64 sum over the exact
  // weights (within (n_in + 1) u sum |w x|), and the GLU kernel equal to the unfused path of the same build.
  for (int items : {16, 256}) {
    OpenclBackendOptions o = options(WeightsMode::Native, 3);
    o.matvec_items = items;
    OpenclBackend sized(o);
    for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
      const int64_t n_in = 8448;
      OwnedWeight& g = *kept.emplace_back(std::make_unique<OwnedWeight>(make_weight(type, n_in, n_out, 71)));
      OwnedWeight& u = *kept.emplace_back(std::make_unique<OwnedWeight>(make_weight(type, n_in, n_out, 72)));
      sized.upload_weight(g.w);
      sized.upload_weight(u.w);
      const std::vector<float> x = rand_floats(size_t(n_in), 73), wf = dequantize(g.w);
      std::vector<float> y(static_cast<size_t>(n_out), -7.0f);
      sized.matmul(g.w, x.data(), 1, y.data());
      expect_near_float64_product(wf, x, y, fmt::format("{} items {}", type_name(type), items));
      std::vector<float> fused(static_cast<size_t>(n_out), -7.0f), want(static_cast<size_t>(n_out)),
          up(static_cast<size_t>(n_out));
      sized.matmul_glu(g.w, u.w, x.data(), 1, FfnAct::SiLU, fused.data(), up.data());
      sized.Backend::matmul_glu(g.w, u.w, x.data(), 1, FfnAct::SiLU, want.data(), up.data());
      EXPECT_EQ(fused, want) << type_name(type) << " items " << items;
    }
  }
  // Both options reach the kernels: a matvec_q4_0 of the same arguments (the test hook, built with the same
  // generated header) writes its group's size and TL_MV_UNROLL; without this, an option that never reached
  // the program would pass the equalities above.
  const std::string reporter = R"(
__kernel void matvec_q4_0(__global const uchar* w0, __global const uchar* w1, __global const uchar* w2,
    ulong row_bytes, int n_in, int n0, int n1, int n2, __global const float* x, __global float* y0,
    __global float* y1, __global float* y2, __local float4* scratch, __global const float* x_scale,
    __global float* res, __global const float* res_g, __global float* res_part, __global int* res_count,
    float res_eps, __global const float* rope_cs, int head_dim, int n_half, TL_MVB_KV cache, ulong layer_off,
    int n_ctx, __global const int* pos, __global uint* yq, __global int* yq_xch, __global int* yq_count) {
  const int r = get_group_id(0) * TL_MVB_ROWS;
  if (get_local_id(0) == 0 && r < n0) y0[r] = (float)(100 * get_local_size(0) + TL_MV_UNROLL);
}
)";
  OwnedWeight& probe =
      *kept.emplace_back(std::make_unique<OwnedWeight>(make_weight(GgmlType::Q4_0, 4096, 5, 81)));
  const std::vector<float> px = rand_floats(4096, 82);
  for (const auto& [unroll, items] : {std::pair{3, 16}, std::pair{8, 32}, std::pair{1, 64}}) {
    OpenclBackendOptions o = options(WeightsMode::Native, unroll);
    o.matvec_items = items;
    o.test_kernel_name = "matvec_q4_0";
    o.test_kernel_source = reporter;
    OpenclBackend be(o);
    be.upload_weight(probe.w);
    std::vector<float> y(5, -7.0f);
    be.matmul(probe.w, px.data(), 1, y.data());
    EXPECT_EQ(y[0], float(100 * items + unroll)) << "unroll " << unroll << " items " << items;
  }
  // Bad values are refused by name.
  const struct {
    const char* flag;
    std::vector<const char*> bad;
    const char* takes;
  } refusals[] = {{"--cl-matvec-unroll", {"0", "9", "two", ""}, "auto or a number from 1 to 8"},
                  {"--cl-matvec-items", {"8", "48", "512", "many"}, "auto or a power of two from 16 to 256"},
                  {"--cl-flush", {"0", "65", "-1", "often"}, "auto, off or a number from 1 to 64"}};
  for (const auto& r : refusals) {
    for (const char* bad : r.bad) {
      std::string msg;
      try {
        make_backend_options(*find_backend("opencl"), {{r.flag, bad}});
      } catch (const Error& err) {
        msg = err.what();
      }
      EXPECT_NE(msg.find(fmt::format("{}: '{}' is not {}", r.flag, bad, r.takes)), std::string::npos)
          << bad << ": " << msg;
    }
  }
}

// The memory lines of backends made through the registry with `flag` off and on (empty where no device),
// and `flag` refusing anything but on and off by name.
std::pair<std::string, std::string> memory_lines_with(const char* flag) {
  const BackendEntry& e = *find_backend("opencl");
  for (const char* bad : {"maybe", "1", "auto"}) {
    std::string msg;
    try {
      make_backend_options(e, {{flag, bad}});
    } catch (const Error& err) {
      msg = err.what();
    }
    EXPECT_NE(msg.find(fmt::format("{}: '{}' is not on or off", flag, bad)), std::string::npos)
        << bad << ": " << msg;
  }
  if (opencl::list_devices().empty()) return {};
  BackendParams p;
  p.device = test::opencl_test_device();
  p.self_check = false;
  p.max_in_elems = p.max_out_elems = p.max_width = 4096;
  std::string lines[2];
  for (int on = 0; on < 2; ++on) {
    const std::shared_ptr<BackendOptions> opts = make_backend_options(e, {{flag, on ? "on" : "off"}});
    p.options = opts.get();
    lines[on] = e.make(p)->memory_summary();
  }
  return {lines[0], lines[1]};
}

TEST(OpenclIntMatvec, on_by_default_off_reaches_the_backend_and_bad_values_refused) {
  // Decode's integer products are the default where the integer GEMM runs; --cl-int-matvec off reaches a
  // backend made through the registry, whose memory line says which decode products run (a device without a
  // dot product, PoCL, runs float ones either way).
  EXPECT_TRUE(OpenclBackendOptions{}.int_matvec);
  const auto [off, on] = memory_lines_with("--cl-int-matvec");
  if (off.empty()) return;
  const bool integer_gemm = on.find("prompts: integer GEMM") != std::string::npos;
  EXPECT_EQ(on.find("decode: integer products") != std::string::npos, integer_gemm) << on;
  EXPECT_NE(
      off.find(integer_gemm ? "decode: float products (--cl-int-matvec off)" : "decode: float products"),
      std::string::npos)
      << off;
}

TEST(OpenclIntGemm, on_by_default_off_reaches_the_backend_and_bad_values_refused) {
  // The integer prompt GEMM is the default where the device has a dot product; --cl-int-gemm off reaches a
  // backend made through the registry (its memory line says which prompt GEMM runs and why).
  EXPECT_TRUE(OpenclBackendOptions{}.int_gemm);
  const auto [off, on] = memory_lines_with("--cl-int-gemm");
  if (off.empty()) return;
  EXPECT_NE(off.find("float GEMM (--cl-int-gemm off)"), std::string::npos) << off;
  EXPECT_EQ(on.find("float GEMM (--cl-int-gemm off)"), std::string::npos) << on;
}

TEST_P(OpenclOps, row_matmul_kernels_match_cpu_at_every_tail) {
  // The kernels of a device that cannot hold the smallest GEMM tile.
  OpenclBackendOptions o = tails_options(GetParam());
  o.tiled_matmul = false;
  OpenclBackend be(o);
  ASSERT_FALSE(be.gemm_tiles().on());
  check_matmul_tails(be, cpu_, kept_, {1, 2, 3, 5});
}

TEST(OpenclGemmTiles, chosen_from_local_memory_work_group_limit_and_multiple) {
  opencl::Capabilities c;
  c.max_work_group_size = 1024;
  c.local_mem_bytes = 48 * 1024;
  c.wg_multiple = 32;
  OpenclBackend::GemmTiles g = OpenclBackend::gemm_tiles_for(c);
  EXPECT_EQ(g.tr(), 128);
  EXPECT_EQ(g.tt(), 64);
  EXPECT_EQ(g.items(), 128u);
  EXPECT_EQ(g.rm, 8);
  EXPECT_EQ(g.tm, 8);
  EXPECT_TRUE(g.ahead());  // the 128-row tile reads the next block before the products
  // A multiple no candidate's group is a multiple of: still the largest that fits.
  c.wg_multiple = 256;
  EXPECT_EQ(OpenclBackend::gemm_tiles_for(c).tr(), 128);
  // Less local memory: smaller tiles, the preferred multiple deciding between those that fit.
  c.wg_multiple = 32;
  c.local_mem_bytes = 16 * 1024;
  g = OpenclBackend::gemm_tiles_for(c);
  EXPECT_EQ(g.tr(), 64);
  EXPECT_EQ(g.tt(), 64);
  EXPECT_EQ(g.items(), 128u);
  EXPECT_FALSE(g.ahead());
  c.local_mem_bytes = 8 * 1024;
  g = OpenclBackend::gemm_tiles_for(c);
  EXPECT_EQ(g.items(), 64u);
  EXPECT_LE(g.local_bytes(), c.local_mem_bytes);
  c.local_mem_bytes = 4096;
  g = OpenclBackend::gemm_tiles_for(c);
  EXPECT_EQ(g.tr(), 16);
  EXPECT_EQ(g.local_bytes(), 4096u);
  // A work-group limit (the device's, or a kernel's) below the group: the next smaller one.
  c.local_mem_bytes = 48 * 1024;
  c.max_work_group_size = 100;
  EXPECT_EQ(OpenclBackend::gemm_tiles_for(c).items(), 64u);
  EXPECT_EQ(OpenclBackend::gemm_tiles_for(c, 63).items(), 16u);
  // Kernels compiled past the device's local memory: the next tile below the one that did not fit.
  c.max_work_group_size = 1024;
  g = OpenclBackend::gemm_tiles_for(c, SIZE_MAX, 24 * 1024 - 1);
  EXPECT_EQ(g.tr(), 64);
  EXPECT_EQ(g.tt(), 64);
  c.max_work_group_size = 100;
  // Nothing fits: the row kernels.
  c.local_mem_bytes = 2048;
  EXPECT_FALSE(OpenclBackend::gemm_tiles_for(c).on());
  c.local_mem_bytes = 48 * 1024;
  c.max_work_group_size = 8;
  EXPECT_FALSE(OpenclBackend::gemm_tiles_for(c).on());
}

TEST_P(OpenclOps, rmsnorm_matches_cpu) {
  auto be = make();
  for (int64_t n : {int64_t(1), int64_t(37), int64_t(576), int64_t(1023)}) {
    const int64_t rows = 5;
    const std::vector<float> x = rand_floats(size_t(rows * n), 31, -3.0f, 3.0f);
    const std::vector<float> w = rand_floats(size_t(n), 32);
    std::vector<float> a(x.size()), b(x.size(), -7.0f);
    cpu_.rmsnorm(x.data(), w.data(), a.data(), rows, n, 1e-5f);
    be->rmsnorm(x.data(), w.data(), b.data(), rows, n, 1e-5f);
    // The sums of squares (positive terms) differ by at most 2 n u relative (different orders); the mean,
    // eps add, sqrt (<= 3 ulp in OpenCL without correctly rounded sqrt) and division (<= 2.5 ulp) add a
    // few u, halved by the square root; the two products add 2 u per side. Bound: (n + 16) u relative.
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_LE(std::abs(double(a[i]) - b[i]), double(n + 16) * kU * std::abs(double(a[i])))
          << "n " << n << " [" << i << "]";
    }
    // In place (y = x) gives the same.
    std::vector<float> c = x;
    be->rmsnorm(c.data(), w.data(), c.data(), rows, n, 1e-5f);
    EXPECT_EQ(c, b);
  }
}

TEST_P(OpenclOps, add_rmsnorm_matches_add_then_rmsnorm_on_the_cpu) {
  // The fused residual add + RMSNorm: the new residual is exactly the CPU's add (one rounding per element),
  // and the norm is within rmsnorm_matches_cpu's bound; its result also equals the device's own add followed
  // by its rmsnorm (same work split and summation order).
  auto be = make();
  for (int64_t n : {int64_t(1), int64_t(37), int64_t(576), int64_t(1023)}) {
    const int64_t rows = 3;
    const std::vector<float> x = rand_floats(size_t(rows * n), 41, -3.0f, 3.0f);
    const std::vector<float> r = rand_floats(size_t(rows * n), 42, -1.0f, 1.0f);
    const std::vector<float> w = rand_floats(size_t(n), 43);
    std::vector<float> acc_cpu = x, acc_dev = x, acc_two = x, a(x.size()), b(x.size(), -7.0f), c(x.size());
    cpu_.add(acc_cpu.data(), r.data(), rows * n);
    cpu_.rmsnorm(acc_cpu.data(), w.data(), a.data(), rows, n, 1e-5f);
    be->add_rmsnorm(acc_dev.data(), r.data(), w.data(), b.data(), rows, n, 1e-5f);
    EXPECT_EQ(acc_dev, acc_cpu) << "n " << n;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_LE(std::abs(double(a[i]) - b[i]), double(n + 16) * kU * std::abs(double(a[i])))
          << "n " << n << " [" << i << "]";
    }
    be->add(acc_two.data(), r.data(), rows * n);
    be->rmsnorm(acc_two.data(), w.data(), c.data(), rows, n, 1e-5f);
    EXPECT_EQ(c, b) << "n " << n;
  }
}

TEST_P(OpenclOps, decode_norm_is_left_to_the_products_that_read_it) {
  // Decode's output product with the residual add and the next RMSNorm (matmul_add_rmsnorm), its output read
  // by q/k/v-like products (one launch) and the gate/up/GLU kernel, all on device-resident arrays as in a
  // forward pass: no norm kernel runs until something else reads the norm (here the host, which gets it
  // scaled by one rms_scale launch). Against the unfused device ops (fuse_norms off), which their own tests
  // hold to the CPU, for every block format the device reads:
  //  - the residual bit for bit (the same product, then one rounding of the add either way);
  //  - the norm's output: the sums of squares in other orders (<= n u relative each) and the scale applied
  //    before or after the weight (2 roundings either way): (n + 16) u relative;
  //  - a product over it: the same sums of terms that differ by that much, each sum within n u of exact:
  //    (2 n + 16) u sum |w_j y_j|, and through the GLU (SiLU's slope <= 1.1) 1.1 e_g |up| + |silu(g)| e_u
  //    plus a few roundings of the output.
  // A float-row (F16) product reading the norm gets it scaled first (converted with the rest in the
  // --weights modes, it takes the scale as they do).
  const float eps = 1e-5f;
  constexpr int64_t kQ = 37, kK = 9, kV = 13, kFf = 37, kF16 = 11;
  for (const BlockFormat& c : kBlockFormats) {
    const std::string matvec = std::string("matvec_") + c.fmt;
    const bool k_quant = type_traits(c.type).block_size == 256;
    const int64_t n = k_quant ? 256 : 96, m = k_quant ? 512 : 160;  // the norm's width, the product's input
    OwnedWeight& wo = keep(make_weight(c.type, m, n, 61));
    OwnedWeight* reads[5] = {&keep(make_weight(c.type, n, kQ, 62)), &keep(make_weight(c.type, n, kK, 63)),
                             &keep(make_weight(c.type, n, kV, 64)), &keep(make_weight(c.type, n, kFf, 65)),
                             &keep(make_weight(c.type, n, kFf, 66))};
    OwnedWeight& wf = keep(make_weight(GgmlType::F16, n, kF16, 67));
    const std::vector<float> x0 = rand_floats(size_t(m), 68), acc0 = rand_floats(size_t(n), 69, -2.0f, 2.0f),
                             g = rand_floats(size_t(n), 70);
    // The forward's arrays, resident on the device; what one run leaves in them.
    struct Run {
      std::vector<float> x, acc, xn, o, q, k, v, gate, up, f;
      std::vector<KernelTime> before_read, after_read;
    };
    auto run = [&](bool fuse) {
      Run r{x0,
            acc0,
            std::vector<float>(size_t(n)),
            std::vector<float>(size_t(n)),
            std::vector<float>(size_t(kQ)),
            std::vector<float>(size_t(kK)),
            std::vector<float>(size_t(kV)),
            std::vector<float>(size_t(kFf)),
            std::vector<float>(size_t(kFf)),
            std::vector<float>(size_t(kF16)),
            {},
            {}};
      OpenclBackendOptions o = small_options(1);
      o.weights = c.mode;
      o.profiling = true;
      o.fuse_norms = fuse;
      for (std::vector<float>* a : {&r.x, &r.acc, &r.xn, &r.o, &r.q, &r.k, &r.v, &r.gate, &r.up, &r.f})
        o.resident.push_back({a->data(), a->size() * 4});
      OpenclBackend be(o);
      be.upload_weight(wo.w);
      for (OwnedWeight* w : reads) be.upload_weight(w->w);
      be.upload_weight(wf.w);
      be.host_wrote(r.x.data(), r.x.size() * 4);
      be.host_wrote(r.acc.data(), r.acc.size() * 4);
      be.reset_kernel_times();
      be.matmul_add_rmsnorm(wo.w, r.x.data(), 1, r.o.data(), r.acc.data(), g.data(), r.xn.data(), eps);
      const Weight* qkv[3] = {&reads[0]->w, &reads[1]->w, &reads[2]->w};
      float* ys[3] = {r.q.data(), r.k.data(), r.v.data()};
      be.matmul_shared(qkv, ys, 3, r.xn.data(), 1);
      be.matmul_glu(reads[3]->w, reads[4]->w, r.xn.data(), 1, FfnAct::SiLU, r.gate.data(), r.up.data());
      r.before_read = be.kernel_times();
      be.reset_kernel_times();
      be.matmul(wf.w, r.xn.data(), 1, r.f.data());  // float rows: the norm scaled for it
      for (std::vector<float>* a : {&r.acc, &r.xn, &r.q, &r.k, &r.v, &r.gate, &r.f})
        be.to_host(a->data(), a->size() * 4);
      r.after_read = be.kernel_times();
      return r;
    };
    const Run fused = run(true), ref = run(false);
    auto names = [](const std::vector<KernelTime>& t) {  // in name order
      std::vector<std::string> v;
      for (const KernelTime& k : t) v.push_back(fmt::format("{} x{}", k.name, k.calls));
      std::sort(v.begin(), v.end());
      return fmt::format("{}", fmt::join(v, " "));
    };
    // Fused: the residual product and the q/k/v launch, and the GLU kernel; no norm kernel.
    EXPECT_EQ(names(fused.before_read), fmt::format("matvec_glu_{} x1 {} x2", c.fmt, matvec)) << matvec;
    // The F16 matrix (converted with the rest under --weights int4b64 / int8b0, then reading the scale).
    EXPECT_EQ(names(fused.after_read), c.mode == WeightsMode::Native
                                           ? "matvec_f16 x1 rms_scale x1"
                                           : fmt::format("{} x1 rms_scale x1", matvec))
        << matvec;
    EXPECT_NE(names(ref.before_read).find("add_rmsnorm x1"), std::string::npos) << matvec;

    EXPECT_EQ(fused.acc, ref.acc) << matvec;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_LE(std::abs(double(fused.xn[size_t(i)]) - ref.xn[size_t(i)]),
                double(n + 16) * kU * std::abs(double(ref.xn[size_t(i)])))
          << matvec << " norm [" << i << "]";
    }
    // Row i of w as the device forms it (exact), and sum_j w_ij y_j, sum_j |w_ij y_j| over the unfused norm.
    auto row_of = [&](const Weight& w, int64_t i) {
      std::vector<float> row(static_cast<size_t>(n)), exact(static_cast<size_t>(n));
      dequantize_row(w.type, w.row(i), row.data(), n);
      if (c.mode == WeightsMode::Native) return row;
      dequantize_row_asym(c.mode == WeightsMode::Int4B64 ? AsymFormat::Int4B64 : AsymFormat::Int8B0,
                          row.data(), n, exact.data());
      return exact;
    };
    auto dot = [&](const Weight& w, int64_t i, bool magnitude) {
      const std::vector<float> row = row_of(w, i);
      double s = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        const double t = double(row[size_t(j)]) * ref.xn[size_t(j)];
        s += magnitude ? std::abs(t) : t;
      }
      return s;
    };
    auto magnitude = [&](const OwnedWeight& w, int64_t i) { return dot(w.w, i, true); };
    const double per = double(2 * n + 16) * kU;
    const std::vector<float>* outs[3][2] = {{&fused.q, &ref.q}, {&fused.k, &ref.k}, {&fused.v, &ref.v}};
    for (int w = 0; w < 3; ++w) {
      for (size_t i = 0; i < outs[w][1]->size(); ++i) {
        ASSERT_LE(std::abs(double((*outs[w][0])[i]) - (*outs[w][1])[i]),
                  per * magnitude(*reads[w], int64_t(i)))
            << matvec << " product " << w << " row " << i;
      }
    }
    for (int64_t i = 0; i < kFf; ++i) {
      // The gate and up values over the unfused norm (within e of the device's sums).
      const double eg = per * magnitude(*reads[3], i), eu = per * magnitude(*reads[4], i);
      const double gv = std::abs(dot(reads[3]->w, i, false)) + eg,
                   uv = std::abs(dot(reads[4]->w, i, false)) + eu;
      const double bound = 1.1 * eg * uv + 1.1 * gv * eu + 16.0 * kU * std::abs(double(ref.gate[size_t(i)]));
      ASSERT_LE(std::abs(double(fused.gate[size_t(i)]) - ref.gate[size_t(i)]), bound)
          << matvec << " glu row " << i;
    }
    // The F16 product read the scaled norm: the same kernel over inputs within the norm's bound.
    for (int64_t i = 0; i < kF16; ++i) {
      ASSERT_LE(std::abs(double(fused.f[size_t(i)]) - ref.f[size_t(i)]), per * dot(wf.w, i, true))
          << matvec << " f16 row " << i;
    }
  }
}

TEST_P(OpenclOps, rope_matches_cpu_in_both_modes) {
  auto be = make();
  const int64_t n_tok = 5, n_heads = 3, head_dim = 66;
  const int32_t pos[5] = {0, 1, 17, 49, 23};
  for (int64_t rope_dim : {int64_t(66), int64_t(32)}) {
    const RopeTable table(50, rope_dim, 10000.0f, 1.0f);
    for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
      std::vector<float> a = rand_floats(size_t(n_tok * n_heads * head_dim), 41), b = a;
      const std::vector<float> x = a;
      cpu_.rope(a.data(), n_tok, n_heads, head_dim, rope_dim, pos, table, mode);
      be->rope(b.data(), n_tok, n_heads, head_dim, rope_dim, pos, table, mode);
      // a c - b s from the same table values: two products and a difference, 3 roundings each side, so
      // |diff| <= 6 u (|a| + |b|) (|c|, |s| <= 1); exact unless the compiler ignores FP_CONTRACT OFF.
      for (size_t i = 0; i < a.size(); ++i) {
        const size_t head0 = i / size_t(head_dim) * size_t(head_dim);
        double mag = 0.0;
        for (size_t j = head0; j < head0 + size_t(head_dim); ++j) mag = std::max(mag, std::abs(double(x[j])));
        ASSERT_LE(std::abs(double(a[i]) - b[i]), 12.0 * kU * mag)
            << "rope_dim " << rope_dim << " [" << i << "]";
      }
    }
  }
}

TEST_P(OpenclOps, glu_matches_cpu_and_float64) {
  auto be = make();
  const int64_t n = 1001;
  const std::vector<float> g = rand_floats(size_t(n), 51, -8.0f, 8.0f), u = rand_floats(size_t(n), 52);
  for (FfnAct act : {FfnAct::SiLU, FfnAct::GeluTanh}) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n), -7.0f);
    cpu_.glu(g.data(), u.data(), a.data(), n, act);
    be->glu(g.data(), u.data(), b.data(), n, act);
    // The same formula in float64 is the judge: the CPU's exponential has its own error (its vector
    // polynomial is tested against float64 in tests/backends), so both sides are held to the float64 value.
    // Device error: the exponent e (-x, or -2z for GELU) is formed in float with up to 6 roundings, so it is
    // off by <= 6 u |e| absolute, which exp turns into 6 u |e| relative; exp itself within 3 ulp (OpenCL's
    // bound), then 1 + e^.., the division (2.5 ulp) and two products. Bound: (8 |e| + 32) u relative.
    // The CPU's result must then lie within its own float64 error of the device's.
    for (size_t i = 0; i < a.size(); ++i) {
      const double x = g[i];
      const double e = act == FfnAct::SiLU ? -x : -2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x);
      const double ref = x / (1.0 + std::exp(e)) * u[i];
      const double dev_err = std::abs(double(b[i]) - ref);
      ASSERT_LE(dev_err, (8.0 * std::abs(e) + 32.0) * kU * std::abs(ref) + 1e-37) << "[" << i << "] x " << x;
      ASSERT_LE(std::abs(double(a[i]) - b[i]), std::abs(double(a[i]) - ref) + dev_err * (1 + 1e-9) + 1e-37)
          << "[" << i << "]";
    }
  }
}

TEST_P(OpenclOps, add_matches_cpu_bit_for_bit) {
  auto be = make();
  const int64_t n = 1003;
  std::vector<float> a = rand_floats(size_t(n), 61), b = a;
  const std::vector<float> x = rand_floats(size_t(n), 62);
  cpu_.add(a.data(), x.data(), n);
  be->add(b.data(), x.data(), n);
  EXPECT_EQ(a, b);  // one correctly rounded addition per element on both sides
}

// Fills the cache of both backends with the same random K/V rows (positions 0..kCtx-1, in a few calls).
void fill_caches(CpuBackend& cpu, OpenclBackend& be, KvCache& ck, KvCache& gk, int64_t kv_dim,
                 uint32_t seed) {
  for (int64_t layer = 0; layer < ck.n_layer(); ++layer) {
    for (int64_t p0 = 0; p0 < ck.n_ctx(); p0 += 8) {
      const int64_t n = std::min<int64_t>(8, ck.n_ctx() - p0);
      const std::vector<float> k = rand_floats(size_t(n * kv_dim), seed++),
                               v = rand_floats(size_t(n * kv_dim), seed++);
      std::vector<int32_t> pos(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = int32_t(p0 + i);
      cpu.kv_store(ck, layer, k.data(), v.data(), pos.data(), n);
      be.kv_store(gk, layer, k.data(), v.data(), pos.data(), n);
    }
  }
}

// RoPE over 4 query heads and 2 KV heads of hd dims each, the first rope_dim of them turned.
RopeShape four_over_two(int64_t hd, int64_t rope_dim, const RopeTable& table, RopeMode mode) {
  RopeShape r;
  r.n_head = 4;
  r.n_head_kv = 2;
  r.head_dim = hd;
  r.rope_dim = rope_dim;
  r.table = &table;
  r.mode = mode;
  return r;
}

TEST_P(OpenclOps, rope_kv_store_is_one_launch_equal_to_rope_rope_kv_store) {
  // q, k, v resident on the device (as in a forward pass): one rope_kv_store launch whose q, k and cache rows
  // equal bit for bit those of the two rope launches and the kv_store launch (the same arithmetic), in both
  // modes and cache types, with 8 of 12 dims turned (the rest copied), 4 query heads over 2 KV heads and
  // 3 tokens at scattered positions.
  const int64_t n_tok = 3, hd = 12, kv_dim = 2 * hd, layer = 1;
  const RopeTable table(kCtx, 8, 10000.0f, 1.0f);
  const int32_t pos[3] = {40, 3, 76};
  for (GgmlType type : {GgmlType::F16, GgmlType::F32}) {
    for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
      const RopeShape r = four_over_two(hd, 8, table, mode);
      std::vector<float> q = rand_floats(size_t(n_tok * 4 * hd), 61),
                         k = rand_floats(size_t(n_tok * kv_dim), 62),
                         v = rand_floats(size_t(n_tok * kv_dim), 63);
      std::vector<float> q2 = q, k2 = k;
      OpenclBackend be(fused_options(4, kv_dim, type, {&q, &k, &v}));
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
      // The same ops apart, on copies that are not resident (staging buffers), into a cleared device cache.
      auto be2 = make(kv_dim, type);
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
              << type_name(type) << " kind " << kind << " position " << p;
        }
      }
    }
  }
}

TEST_P(OpenclOps, decode_qkv_products_turn_and_store_their_rows_in_one_launch) {
  // Decode's q/k/v products with RoPE and the KV write (matmul_rope_kv_store), Norm mode, q, k, v resident:
  // one matvec launch whose q, k, v and cache rows equal bit for bit those of the unfused device path (the
  // q/k/v launch, then rope_kv_store: the same sums, the same turn of each pair), in both cache types, for
  // a nibble, a byte and a K-quant format, with 12 of 16 dims turned (the rest copied), 4 query heads over 2
  // KV heads; also reading a norm left pending by the product before (the scale taken either way). Neox
  // pairs do not lie in a group's rows: that mode keeps the two launches. Float products, and the integer
  // ones of --activations q8 (gemm_q8.cl's matvec_q8_*), which read the rounding of the norm that the
  // residual product made in its own launch, both paths.
  const int64_t hd = 16, kv_dim = 2 * hd, nq = 4 * hd, n_in = 256, n = 256;
  const RopeTable table(kCtx, 12, 10000.0f, 1.0f);
  const int32_t pos[1] = {37};
  for (const bool q8 : {false, true})
    for (GgmlType wt : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
      OwnedWeight& wq = keep(make_weight(wt, n_in, nq, 71));
      OwnedWeight& wk = keep(make_weight(wt, n_in, kv_dim, 72));
      OwnedWeight& wv = keep(make_weight(wt, n_in, kv_dim, 73));
      OwnedWeight& wo = keep(make_weight(wt, n_in, n, 74));
      for (GgmlType type : {GgmlType::F16, GgmlType::F32}) {
        for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
          const RopeShape r = four_over_two(hd, 12, table, mode);
          std::vector<float> x = rand_floats(size_t(n_in), 75), acc = rand_floats(size_t(n), 76),
                             xn(static_cast<size_t>(n)), o_scratch(static_cast<size_t>(n)),
                             q(static_cast<size_t>(nq)), k(static_cast<size_t>(kv_dim)),
                             v(static_cast<size_t>(kv_dim)), q2(q.size()), k2(k.size()), v2(v.size());
          const std::vector<float> g = rand_floats(size_t(n), 77);
          OpenclBackendOptions o =
              fused_options(1, kv_dim, type, {&x, &acc, &xn, &o_scratch, &q, &k, &v, &q2, &k2, &v2});
          o.q8_plain_dot = q8;  // the integer decode products (plain integer multiply-adds), both paths
          o.activations = ActivationMode::Quantized;
          OpenclBackend be(o);
          for (OwnedWeight* w : {&wq, &wk, &wv, &wo}) be.upload_weight(w->w);
          be.host_wrote(x.data(), x.size() * 4);
          be.host_wrote(acc.data(), acc.size() * 4);
          // The norm the q/k/v products read, left pending by the product before them.
          be.matmul_add_rmsnorm(wo.w, x.data(), 1, o_scratch.data(), acc.data(), g.data(), xn.data(), 1e-5f);
          const Weight* ws[3] = {&wq.w, &wk.w, &wv.w};
          KvCache kv(kLayers, kCtx, 2, hd, type);  // the geometry (the device holds the rows)
          be.reset_kernel_times();
          be.matmul_rope_kv_store(ws, xn.data(), 1, q.data(), k.data(), v.data(), kv, 0, pos, r);
          const std::vector<KernelTime> t = be.kernel_times();
          be.Backend::matmul_rope_kv_store(ws, xn.data(), 1, q2.data(), k2.data(), v2.data(), kv, 1, pos, r);
          // The integer products (where the profile holds a GEMM tile: they are built with it) read xn as
          // the residual product before them rounded it in its own launch: no rounding launch here.
          const std::string fmt_name = wt == GgmlType::Q4_0 ? "q4_0" : wt == GgmlType::Q8_0 ? "q8_0" : "kq4";
          const bool int_kernel = std::any_of(t.begin(), t.end(), [&](const KernelTime& e) {
            return e.name == "matvec_q8_" + fmt_name;  // the float kernel is matvec_<format>
          });
          EXPECT_EQ(int_kernel, q8 && be.gemm_tiles().on()) << type_name(wt);
          ASSERT_EQ(t.size(), mode == RopeMode::Norm ? 1u : 2u) << type_name(wt);
          for (std::vector<float>* a : {&q, &k, &v, &q2, &k2, &v2}) be.to_host(a->data(), a->size() * 4);
          EXPECT_EQ(q, q2) << type_name(wt) << " " << type_name(type);
          EXPECT_EQ(k, k2) << type_name(wt) << " " << type_name(type);
          EXPECT_EQ(v, v2) << type_name(wt) << " " << type_name(type);
          KvCache back(kLayers, kCtx, 2, hd, type);
          be.read_kv(back);
          for (int kind = 0; kind < 2; ++kind) {
            const size_t at = size_t(pos[0]) * back.row_bytes();
            EXPECT_EQ(0, std::memcmp(back.plane(0, kind) + at, back.plane(1, kind) + at, back.row_bytes()))
                << type_name(wt) << " " << type_name(type) << " kind " << kind;
          }
        }
      }
    }
}

TEST_P(OpenclOps, kv_store_matches_cpu_bit_for_bit) {
  for (GgmlType type : {GgmlType::F16, GgmlType::F32}) {
    const int64_t kv_dim = 2 * 40;
    auto be = make(kv_dim, type);
    KvCache ck(kLayers, kCtx, 2, 40, type), gk(kLayers, kCtx, 2, 40, type), back(kLayers, kCtx, 2, 40, type);
    fill_caches(cpu_, *be, ck, gk, kv_dim, 100);
    be->read_kv(back);
    // f32 is a copy; f16 is one round-to-nearest-even conversion on both sides (vstore_half_rte).
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int kind = 0; kind < 2; ++kind) {
        EXPECT_EQ(0, std::memcmp(ck.plane(l, kind), back.plane(l, kind), size_t(kCtx) * ck.row_bytes()))
            << type_name(type) << " layer " << l << " kind " << kind;
      }
    }
    const int32_t bad = int32_t(kCtx);
    std::vector<float> row(size_t(kv_dim), 1.0f);
    EXPECT_THROW(be->kv_store(gk, 0, row.data(), row.data(), &bad, 1), Error);
  }
}

// Attention's parameters: scale 1 / sqrt(head_dim).
AttnParams attn_params(int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t window) {
  AttnParams p;
  p.n_head = n_head;
  p.n_head_kv = n_head_kv;
  p.head_dim = head_dim;
  p.scale = 1.0f / std::sqrt(float(head_dim));
  p.window = window;
  return p;
}

// Scores: q.k over head_dim terms in different orders differ by <= 2 hd u sum|q k| scale <= 2 hd u sqrt(hd)
// (|q|, |k| <= 1, scale = 1/sqrt(hd)); a score error ds changes the softmax weights by a relative ~2 ds, the
// exp's ulps and the running sums (<= n_keys terms) add (n_keys + 8) u. The output is a convex combination
// of V rows (|v| <= 1), so |diff| <= 2 (2 ds + (n_keys + 8) u).
void expect_attention_near(const std::vector<float>& a, const std::vector<float>& b, int64_t head_dim,
                           int64_t n_keys, const std::string& what) {
  const double ds = 2.0 * double(head_dim) * kU * std::sqrt(double(head_dim));
  const double bound = 2.0 * (2.0 * ds + double(n_keys + 8) * kU);
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(std::abs(double(a[i]) - b[i]), bound) << what << " [" << i << "]";
}

// A KV cache split over several device buffers (2 layers fit one here, so layer 2 lives in the second
// buffer) stores and attends exactly as one buffer does.
TEST_P(OpenclOps, kv_cache_split_over_buffers_matches_cpu) {
  const int64_t hd = 40, kv_dim = 2 * hd;
  OpenclBackendOptions o = small_options(8);
  o.kv_layers = kLayers;
  o.kv_ctx = kCtx;
  o.kv_dim = kv_dim;
  o.kv_type = GgmlType::F16;
  o.kv_max_buffer_bytes = 2 * (2 * kCtx * kv_dim * 2);  // two layers' K and V planes
  OpenclBackend be(o);
  EXPECT_EQ(be.kv_buffers(), 2u);
  KvCache ck(kLayers, kCtx, 2, hd, GgmlType::F16), gk(kLayers, kCtx, 2, hd, GgmlType::F16),
      back(kLayers, kCtx, 2, hd, GgmlType::F16);
  fill_caches(cpu_, be, ck, gk, kv_dim, 500);
  be.read_kv(back);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int kind = 0; kind < 2; ++kind) {
      EXPECT_EQ(0, std::memcmp(ck.plane(l, kind), back.plane(l, kind), size_t(kCtx) * ck.row_bytes()))
          << "layer " << l << " kind " << kind;
    }
  }
  AttnParams p;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim = hd;
  p.scale = 0.15f;
  const int32_t pos[2] = {40, 76};
  const std::vector<float> q = rand_floats(size_t(2 * p.n_head * hd), 501);
  std::vector<float> a(q.size()), b(q.size(), -7.0f);
  cpu_.attention(q.data(), ck, 2, pos, 2, p, a.data());
  be.attention(q.data(), gk, 2, pos, 2, p, b.data());
  expect_attention_near(a, b, hd, kCtx, "split cache");
  // A layer larger than the buffer limit is a named error.
  o.kv_max_buffer_bytes = 1000;
  EXPECT_THROW(OpenclBackend{o}, Error);
}

TEST_P(OpenclOps, attention_matches_cpu) {
  // (chunk, pass) blocks (4, 4): every row's keys in one work-group and one pass (at most 3 blocks here);
  // (4, 2): rows of 1 to 2 passes, the second a part one; (1, 1): split over work-groups a block each (rows
  // of 1 to 3 chunks in one batch, windows starting mid-block) and merged.
  const std::pair<int64_t, int64_t> kChunkPass[] = {{4, 4}, {4, 2}, {1, 1}};
  for (const auto& [chunk_blocks, pass_blocks] : kChunkPass) {
    for (GgmlType type : {GgmlType::F16, GgmlType::F32}) {
      // Head sizes that give the kernel 1 to 8 items per key and the values' keys split over slices of
      // items (columns of 4 elements; 42: columns of 1, more than the 32 items, each item walking columns);
      // positions give every block fill from 1 key to 32.
      for (int64_t head_dim : {int64_t(40), int64_t(42), int64_t(64), int64_t(128), int64_t(256)}) {
        const int64_t n_head_kv = 2, n_head = 6, kv_dim = n_head_kv * head_dim;
        auto be = make(kv_dim, type, chunk_blocks, pass_blocks);
        KvCache ck(kLayers, kCtx, n_head_kv, head_dim, type), gk(kLayers, kCtx, n_head_kv, head_dim, type);
        fill_caches(cpu_, *be, ck, gk, kv_dim, 300);
        const int32_t pos[4] = {0, 31, 65, 76};
        const int64_t n_tok = 4;
        const std::vector<float> q = rand_floats(size_t(n_tok * n_head * head_dim), 77);
        for (int64_t window : {int64_t(0), int64_t(20)}) {
          const AttnParams p = attn_params(n_head, n_head_kv, head_dim, window);
          std::vector<float> a(q.size()), b(q.size(), -7.0f);
          cpu_.attention(q.data(), ck, 1, pos, n_tok, p, a.data());
          be->attention(q.data(), gk, 1, pos, n_tok, p, b.data());
          expect_attention_near(a, b, head_dim, kCtx,
                                fmt::format("{} hd {} window {} chunk blocks {} pass blocks {}",
                                            type_name(type), head_dim, window, chunk_blocks, pass_blocks));
        }
      }
    }
  }
}

TEST_P(OpenclOps, decode_attention_rounds_its_output_for_the_integer_product_after_it) {
  // Under the integer decode products (plain integer multiply-adds here), one token's attention rounds its
  // output in the launch that writes it (attention.cl yq: attention itself when the keys fit one chunk,
  // attention_merge when they are split over 2) for the attention output product after it: that product
  // then runs with no quantize_q8 launch, and equals bit for bit the same product over quantize_q8's
  // rounding of the same output (the host rewrites the output, so the backend rounds it again in a launch
  // of its own). Where the kernels cannot round (a head size of 40, not whole blocks of 32) the product
  // rounds its input first. Both cache types; heads of 40, 64 and 128; position 40 (2 key blocks).
  const int32_t pos[1] = {40};
  struct Case {
    int64_t head_dim, chunk_blocks;
    bool kernel_rounds;
  };
  for (const Case c :
       {Case{64, 4, true}, Case{128, 4, true}, Case{64, 1, true}, Case{128, 1, true}, Case{40, 4, false}}) {
    const int64_t n_head_kv = 2, n_head = 4, kv_dim = n_head_kv * c.head_dim, n = n_head * c.head_dim;
    OwnedWeight& wo = keep(make_weight(GgmlType::Q4_0, n, 96, 81));
    for (GgmlType type : {GgmlType::F16, GgmlType::F32}) {
      const std::string what =
          fmt::format("hd {} chunk blocks {} {}", c.head_dim, c.chunk_blocks, type_name(type));
      std::vector<float> q = rand_floats(size_t(n), 82), out(static_cast<size_t>(n)), y(96), y2(96);
      OpenclBackendOptions o = fused_options(1, kv_dim, type, {&q, &out, &y, &y2});
      o.q8_plain_dot = true;
      o.activations = ActivationMode::Quantized;
      o.attention_chunk_blocks = c.chunk_blocks;
      OpenclBackend be(o);
      be.upload_weight(wo.w);
      KvCache ck(kLayers, kCtx, n_head_kv, c.head_dim, type), gk(kLayers, kCtx, n_head_kv, c.head_dim, type);
      fill_caches(cpu_, be, ck, gk, kv_dim, 400);
      be.host_wrote(q.data(), q.size() * 4);
      const AttnParams p = attn_params(n_head, n_head_kv, c.head_dim, 0);
      auto rounding_launches = [&] {
        int64_t calls = 0;
        for (const KernelTime& e : be.kernel_times()) calls += e.name == "quantize_q8" ? e.calls : 0;
        return calls;
      };
      be.reset_kernel_times();
      be.attention(q.data(), gk, 1, pos, 1, p, out.data());
      be.matmul(wo.w, out.data(), 1, y.data());
      const bool ints = be.gemm_tiles().on();  // the integer kernels are built with the GEMM tile
      EXPECT_EQ(rounding_launches(), ints && !c.kernel_rounds ? 1 : 0) << what;
      const std::vector<KernelTime> t = be.kernel_times();
      const bool merged =
          std::any_of(t.begin(), t.end(), [](const KernelTime& e) { return e.name == "attention_merge"; });
      EXPECT_EQ(merged, c.chunk_blocks == 1) << what;  // the case names which kernel wrote the output
      be.to_host(out.data(), out.size() * 4);
      be.host_wrote(out.data(), out.size() * 4);  // the same values, their rounding forgotten
      be.reset_kernel_times();
      be.matmul(wo.w, out.data(), 1, y2.data());
      EXPECT_EQ(rounding_launches(), ints ? 1 : 0) << what;
      be.to_host(y.data(), y.size() * 4);
      be.to_host(y2.data(), y2.size() * 4);
      EXPECT_EQ(y, y2) << what;
      std::vector<float> want(out.size());
      cpu_.attention(q.data(), ck, 1, pos, 1, p, want.data());
      expect_attention_near(want, out, c.head_dim, kCtx, what);
    }
  }
}

TEST_P(OpenclOps, decode_rmsnorm_rounds_its_output_for_the_integer_product_after_it) {
  // As attention above: one row's RMSNorm under the integer decode products rounds its output in its own
  // launch, so the product after it runs with no quantize_q8 launch and equals bit for bit the product over
  // quantize_q8's rounding of the same output, for rows of 224 and 256 values (7 and 8 blocks of 32). A norm
  // in place leaves the rounding to the product.
  struct Case {
    int64_t n;
    bool in_place, kernel_rounds;
  };
  for (const Case c : {Case{224, false, true}, Case{256, false, true}, Case{256, true, false}}) {
    const std::string what = fmt::format("n {}{}", c.n, c.in_place ? " in place" : "");
    std::vector<float> x = rand_floats(size_t(c.n), 83), g = rand_floats(size_t(c.n), 84),
                       xn(static_cast<size_t>(c.n)), y(96), y2(96);
    OwnedWeight& w = keep(make_weight(GgmlType::Q4_0, c.n, 96, 85));
    OpenclBackendOptions o = fused_options(1, 64, GgmlType::F16, {&x, &xn, &y, &y2});
    o.q8_plain_dot = true;
    o.activations = ActivationMode::Quantized;
    OpenclBackend be(o);
    be.upload_weight(w.w);
    be.host_wrote(x.data(), x.size() * 4);
    auto rounding_launches = [&] {
      int64_t calls = 0;
      for (const KernelTime& e : be.kernel_times()) calls += e.name == "quantize_q8" ? e.calls : 0;
      return calls;
    };
    float* out = c.in_place ? x.data() : xn.data();
    be.reset_kernel_times();
    be.rmsnorm(x.data(), g.data(), out, 1, c.n, 1e-5f);
    be.matmul(w.w, out, 1, y.data());
    const bool ints = be.gemm_tiles().on();  // the integer kernels are built with the GEMM tile
    EXPECT_EQ(rounding_launches(), ints && !c.kernel_rounds ? 1 : 0) << what;
    be.to_host(out, size_t(c.n) * 4);
    be.host_wrote(out, size_t(c.n) * 4);  // the same values, their rounding forgotten
    be.reset_kernel_times();
    be.matmul(w.w, out, 1, y2.data());
    EXPECT_EQ(rounding_launches(), ints ? 1 : 0) << what;
    be.to_host(y.data(), y.size() * 4);
    be.to_host(y2.data(), y2.size() * 4);
    EXPECT_EQ(y, y2) << what;
  }
}

// Prompts on attention_tiled (16 tokens of a head a work-group, keys in chunks of 32): 8, 17 and 33
// tokens (one part tile; a whole and a part one; two whole and one token) starting at positions 0, 5 and
// 44, so that tiles start mid-chunk and the last keys end one short of the cache; windows of 0 and 20
// (starting mid-tile); grouped heads; head sizes the kernel takes (40, 64, 128) and one it leaves to the
// per-token kernel (256). Under a profile whose local memory is too small the per-token kernel answers.
TEST_P(OpenclOps, prompt_attention_on_tiles_matches_cpu) {
  for (GgmlType type : {GgmlType::F16, GgmlType::F32}) {
    for (int64_t head_dim : {int64_t(40), int64_t(64), int64_t(128), int64_t(256)}) {
      const int64_t n_head_kv = 2, n_head = 6, kv_dim = n_head_kv * head_dim;
      OpenclBackendOptions o = small_options(33);
      o.max_in_elems = o.max_out_elems = 33 * n_head * head_dim;
      o.kv_layers = kLayers;
      o.kv_ctx = kCtx;
      o.kv_dim = kv_dim;
      o.kv_type = type;
      OpenclBackend be(o);
      KvCache ck(kLayers, kCtx, n_head_kv, head_dim, type), gk(kLayers, kCtx, n_head_kv, head_dim, type);
      fill_caches(cpu_, be, ck, gk, kv_dim, 900);
      for (const auto& [n_tok, first] : {std::pair<int64_t, int32_t>{8, 0}, {17, 5}, {33, 44}}) {
        std::vector<int32_t> pos(static_cast<size_t>(n_tok));
        for (size_t i = 0; i < pos.size(); ++i) pos[i] = first + int32_t(i);
        const std::vector<float> q = rand_floats(size_t(n_tok * n_head * head_dim), 901);
        for (int64_t window : {int64_t(0), int64_t(20)}) {
          const AttnParams p = attn_params(n_head, n_head_kv, head_dim, window);
          if (GetParam() == "none" && head_dim <= 128) {
            EXPECT_TRUE(be.attention_tiled(n_tok, p)) << "head size " << head_dim;
          }
          std::vector<float> a(q.size()), b(q.size(), -7.0f);
          cpu_.attention(q.data(), ck, 1, pos.data(), n_tok, p, a.data());
          be.attention(q.data(), gk, 1, pos.data(), n_tok, p, b.data());
          expect_attention_near(a, b, head_dim, kCtx,
                                fmt::format("{} hd {} tokens {} from {} window {}", type_name(type), head_dim,
                                            n_tok, first, window));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Profiles, OpenclOps,
                         ::testing::Values("none", "powervr-rogue", "mali-valhall", "adreno-7xx"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(OpenclDevice, errors_are_reported_by_name_with_the_call) {
  try {
    opencl::check(CL_INVALID_KERNEL_NAME, "clCreateKernel(foo)");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("clCreateKernel(foo) failed: CL_INVALID_KERNEL_NAME (-46)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_STREQ(opencl::cl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
}

TEST(OpenclDevice, unknown_profile_and_device_are_errors) {
  EXPECT_THROW(opencl::find_profile("geforce-256"), Error);
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  EXPECT_THROW(opencl::Runtime(int(opencl::list_devices().size()), "none"), Error);
}

TEST(OpenclDevice, device_rows_take_the_bytes_their_layouts_promise) {
  // quants.cl's layouts, per 4096 weights: Q4_0 and Q4_1 as the file (2304 and 2560 bytes, split only),
  // Q8_0 4352, Q4_K as KQ4 (16 code bytes and a float pair per 32: 3072, 0.75 a weight), Q5_K and Q6_K as
  // KQ8 (a code byte each and a float pair per 16: 6144); F16 as the file; rows pad to 16 bytes.
  EXPECT_EQ(OpenclBackend::device_row_bytes(GgmlType::Q4_0, 4096), 2304u);
  EXPECT_EQ(OpenclBackend::device_row_bytes(GgmlType::Q4_1, 4096), 2560u);
  EXPECT_EQ(OpenclBackend::device_row_bytes(GgmlType::Q8_0, 4096), 4352u);
  EXPECT_EQ(OpenclBackend::device_row_bytes(GgmlType::Q4_K, 4096), 3072u);
  EXPECT_EQ(OpenclBackend::device_row_bytes(GgmlType::Q5_K, 4096), 6144u);
  EXPECT_EQ(OpenclBackend::device_row_bytes(GgmlType::Q6_K, 4096), 6144u);
  EXPECT_EQ(OpenclBackend::device_row_bytes(GgmlType::F16, 4096), 8192u);
  EXPECT_EQ(OpenclBackend::device_row_bytes(GgmlType::Q4_K, 256), 192u);
  EXPECT_EQ(OpenclBackend::device_row_bytes(GgmlType::Q4_0, 32), 32u);  // 16 codes + 2, padded to 16
}

TEST(OpenclDevice, bandwidth_kernels_read_every_element_once) {
  // gemv-bw's peaks and "read W" columns divide bytes by these kernels' times, so each must read every float4
  // of the buffer exactly once: the sum of their per-item outputs equals the buffer's sum. Small integers
  // (exact in float at any summation order), an element count that fits no global size evenly.
  if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  OpenclBackendOptions o;
  o.device = test::opencl_test_device();
  o.max_tokens = 1;
  o.max_in_elems = o.max_out_elems = 64;
  o.max_width = 64;
  o.self_check = false;
  OpenclBackend be(o);
  opencl::Runtime& rt = be.runtime();
  const cl_ulong n4 = 1237;
  std::vector<float> src(size_t(n4) * 4);
  for (size_t i = 0; i < src.size(); ++i) src[i] = float(int(i % 7) - 3);
  double want = 0.0;
  for (float v : src) want += v;
  const opencl::Buffer in = rt.alloc(src.size() * sizeof(float), CL_MEM_READ_ONLY, src.data());
  const opencl::ProgramHandle prog = rt.build({"bandwidth"});
  for (const char* name : {"read_sum_strided", "read_sum_blocked", "read_sum_pairs"}) {
    // The looping kernels at two global sizes; the pairs kernel's is set by the element count.
    const bool pairs = std::string(name) == "read_sum_pairs";
    const std::vector<size_t> globals =
        pairs ? std::vector<size_t>{size_t((n4 + 1) / 2)} : std::vector<size_t>{64, 640};
    for (size_t global : globals) {
      const opencl::Kernel k = rt.kernel(prog, name);
      // The launch rounds the global size up to the kernel's multiple: the output has room for that.
      const size_t rounded = (global + k.wg_multiple - 1) / k.wg_multiple * k.wg_multiple;
      const opencl::Buffer out = rt.alloc(rounded * sizeof(float));
      opencl::set_arg(k, 0, in);
      opencl::set_arg(k, 1, n4);
      opencl::set_arg(k, 2, out);
      const size_t g[1] = {global};
      rt.launch(k, 1, g, nullptr);
      std::vector<float> part(rounded);
      rt.read(out, 0, part.data(), part.size() * sizeof(float));
      double got = 0.0;
      for (float v : part) got += v;
      EXPECT_EQ(got, want) << name << " over " << global << " items";
    }
  }
}

TEST(OpenclDevice, generated_header_carries_the_constants_and_ends_in_newline) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  opencl::Runtime rt(test::opencl_test_device(), "mali-valhall");
  const std::string h = rt.generated_header("#define TL_KV_F16 1");
  // The profile turns subgroups off only where the family lacks them; PoCL has none either way.
  EXPECT_NE(h.find(rt.caps().subgroups ? "#define TL_SUBGROUPS 1\n" : "#define TL_SUBGROUPS 0\n"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("#define TL_KV_F16 1\n"), std::string::npos) << h;
  EXPECT_EQ(h.back(), '\n');
}

}  // namespace
}  // namespace tilellm
