// The self-check catches a deliberately broken kernel (injected through the backend's test hook), names it
// in a warning, and the op then runs on the CPU backend with the CPU's results, while the other kernels stay
// on the device; a forward pass with such an op in every layer still gives the CPU backend's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../common/paths.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/opencl/opencl_backend.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "broken_kernels.h"
#include "forward_rig.h"
#include "model/model.h"
#include "runtime/session.h"
#include "test_device.h"

namespace tilellm {
namespace {

// The fused residual add + RMSNorm that forgets to write the new residual back.
constexpr const char* kBrokenAddRmsnorm = R"(
__kernel void add_rmsnorm(__global float* acc, __global const float* x, __global const float* w,
                          __global float* y, int n, float eps, __local float* scratch) {
  const int row = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
  for (int i = lid; i < n; i += ls) y[(ulong)row * n + i] = (acc[(ulong)row * n + i] + x[(ulong)row * n + i]) * w[i];
}
)";

// Q4_0 matmul that reads only the low nibbles (a plausible unpacking bug): the matmul kernel as the backend
// builds it (the tiled GEMM, or the row kernel where no tile fits), over a broken block reader.
constexpr const char* kBrokenMatmulQ4_0 = R"(
void tl_fetch_broken_q4_0(__global const uchar* row, int b, int n_in, tl_raw32* r) {
  tl_fetch_q4_0(row, b, n_in, r);
}
void tl_decode_broken_q4_0(const tl_raw32* r, float* w) {
  tl_decode_q4_0(r, w);
  for (int j = 16; j < 32; ++j) w[j] = 0.0f;
}
TL_MATMUL_BLOCK32(matmul_q4_0, broken_q4_0)
)";

// The integer prompt GEMM of Q4_0 (kernels/gemm_q8.cl) whose codes lose their high nibbles' half of the
// block (the same unpacking bug as above).
constexpr const char* kBrokenMatmulQ8Q4_0 = R"(
float2 tl_q8w_broken_q4_0(const tl_raw32* r, uint c[8]) {
  const float2 dm = tl_q8w_q4_0(r, c);
  for (int k = 4; k < 8; ++k) c[k] = 0u;
  return dm;
}
#define TL_Q8S_broken_q4_0 0
#define tl_fetch_broken_q4_0 tl_fetch_q4_0
TL_GEMM_Q8_KERNEL(matmul_q8_q4_0, broken_q4_0)
)";

// The prompt input's rounding to int8 (matmul_q8.cl) with its codes halved, d kept (a wrong scale).
constexpr const char* kBrokenQuantizeQ8 = R"(
__kernel void quantize_q8(__global const float* x, int n_in, int n_tok, __global uint* q) {
  const int b = get_global_id(0), t = get_global_id(1), nb = n_in / 32;
  if (b >= nb || t >= n_tok) return;
  __global const float* v = x + (ulong)t * n_in + 32 * b;
  float amax = 0.0f;
  for (int k = 0; k < 32; ++k) amax = fmax(amax, fabs(v[k]));
  const float d = tl_div127(amax), id = d != 0.0f ? tl_reciprocal(d) : 0.0f;
  __global uint* row = q + (ulong)t * TL_Q8_ROW(nb);
  int sum = 0;
  for (int k = 0; k < 8; ++k) {
    const int4 c = convert_int4(round(vload4(k, v) * (0.5f * id)));
    sum += c.x + c.y + c.z + c.w;
    row[8 * b + k] = as_uint(convert_char4(c));
  }
  ((__global float*)row)[8 * nb + b] = d;
  ((__global float*)row)[9 * nb + b] = d * (float)sum;
}
)";

// SiLU·mul that forgets the SiLU: out = gate * up.
constexpr const char* kBrokenGluSilu = R"(
__kernel void glu_silu(__global const float* gate, __global const float* up, __global float* out, int n) {
  const int i = get_global_id(0);
  if (i < n) out[i] = gate[i] * up[i];
}
)";

// The fused decode gate/up/GLU for Q4_1 over a reader that drops the high nibbles.
constexpr const char* kBrokenMatvecGluQ4_1 = R"(
#define TL_MVB_PREFETCH_broken_q4_1 1
float2 tl_rowp_broken_q4_1(__global const uchar* row, int nb) { return tl_rowp_q4_1(row, nb); }
tl_raw16 tl_raw_broken_q4_1(__global const uchar* row, int u, int nb, float2 rowp) {
  return tl_raw_q4_1(row, u, nb, rowp);
}
tl_w16 tl_w16_broken_q4_1(tl_raw16 r) {
  tl_w16 w = tl_w16_q4_1(r);
  w.w2 = w.w3 = (float4)(0.0f);
  return w;
}
TL_MATVEC_GLU_BLOCK32(matvec_glu_q4_1, 8, 16, broken_q4_1)
)";

// The prompts' tiled attention returning its queries instead of attending.
constexpr const char* kBrokenAttentionTiled = R"(
__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void attention_tiled(
    __global const float* q, __global const float* cache, ulong layer_off, int n_ctx, int kv_dim,
    __global const int* pos, int n_tok, int n_head, int group, int head_dim, float scale, int window,
    __global float* out, __local float* lq, __local float* lk, __local float* lv, __local float* lp,
    __local float* lc) {
  const int h = get_group_id(0) % n_head, t0 = (get_group_id(0) / n_head) * 16;
  for (int e = get_local_id(0); e < 16 * head_dim; e += 128) {
    const ulong at = ((ulong)(t0 + e / head_dim) * n_head + h) * head_dim + e % head_dim;
    if (t0 + e / head_dim < n_tok) out[at] = q[at];
  }
}
)";

bool have_device() {
  return !opencl::list_devices().empty();
}

// The sum of a split product's slices that drops the last slice.
constexpr const char* kBrokenGemmSplitSum = R"(
__kernel void gemm_split_sum(__global const float* parts, int n_splits, int n, __global float* y) {
  const int i = get_global_id(0);
  if (i >= n) return;
  float s = 0.0f;
  for (int z = 0; z + 1 < n_splits; ++z) s += parts[(ulong)z * n + i];
  y[i] = s;
}
)";

OpenclBackendOptions options_with(const char* name, const char* source) {
  OpenclBackendOptions o;
  o.device = test::opencl_test_device();
  o.max_tokens = 4;
  o.max_in_elems = o.max_out_elems = 1 << 12;
  o.max_width = 256;
  o.test_kernel_name = name;
  o.test_kernel_source = source;
  // The float GEMM serves prompts, as on a device without a dot product (PoCL): tests of the integer GEMM
  // turn it on with q8_plain_dot, on any device.
  o.int_gemm = false;
  return o;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// n_out rows of a block format whose blocks start with their half scale (Q4_0, Q8_0): random codes, every
// block's scale d.
struct BlockRows {
  std::vector<uint8_t> bytes;
  Weight w;
  BlockRows(GgmlType t, int64_t n_in, int64_t n_out, float d, uint32_t seed)
      : bytes(row_size(t, n_in) * size_t(n_out)) {
    std::mt19937 rng(seed);
    for (uint8_t& v : bytes) v = uint8_t(rng());
    const uint16_t h = fp32_to_fp16(d);
    for (size_t b = 0; b < bytes.size(); b += type_traits(t).type_size) std::memcpy(&bytes[b], &h, 2);
    w.name = std::string(type_name(t));
    w.type = t;
    w.data = bytes.data();
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_bytes = row_size(t, n_in);
  }
  BlockRows(const BlockRows&) = delete;  // w points into bytes
  BlockRows& operator=(const BlockRows&) = delete;
};

TEST(OpenclSelfCheck, broken_rmsnorm_is_caught_and_replaced_by_the_cpu) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  ::testing::internal::CaptureStderr();
  OpenclBackend be(options_with("rmsnorm", test::kBrokenRmsnorm));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(be.cpu_fallbacks(), std::vector<std::string>{"rmsnorm"});
  EXPECT_NE(err.find("warning: OpenCL kernel rmsnorm failed its self-check"), std::string::npos) << err;

  ThreadPool pool(1);
  CpuBackend cpu(pool, ActivationMode::F32, 0);
  const std::vector<float> x = random_floats(3 * 77, 1), w = random_floats(77, 2);
  std::vector<float> a(x.size()), b(x.size());
  cpu.rmsnorm(x.data(), w.data(), a.data(), 3, 77, 1e-6f);
  be.rmsnorm(x.data(), w.data(), b.data(), 3, 77, 1e-6f);
  EXPECT_EQ(a, b);  // the CPU backend computed it
}

TEST(OpenclSelfCheck, broken_tiled_attention_is_caught_and_prompts_take_the_per_token_kernel) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  ::testing::internal::CaptureStderr();
  OpenclBackend be(options_with("attention_tiled", kBrokenAttentionTiled));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(be.cpu_fallbacks(), std::vector<std::string>{"attention_tiled"});
  EXPECT_NE(err.find("warning: OpenCL kernel attention_tiled failed its self-check"), std::string::npos)
      << err;
  AttnParams p;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim = 64;
  EXPECT_FALSE(be.attention_tiled(32, p));
  OpenclBackend intact(options_with("", ""));
  EXPECT_TRUE(intact.cpu_fallbacks().empty());
  EXPECT_TRUE(intact.attention_tiled(32, p));
}

TEST(OpenclSelfCheck, broken_q4_0_matmul_is_caught_and_other_types_stay_on_the_device) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  ::testing::internal::CaptureStderr();
  OpenclBackend be(options_with("matmul_q4_0", kBrokenMatmulQ4_0));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(be.cpu_fallbacks(), std::vector<std::string>{"matmul_q4_0"});
  EXPECT_NE(err.find("matmul_q4_0"), std::string::npos) << err;

  // A Q4_0 weight: random nibbles, a sane scale per block.
  const int64_t n_in = 96, n_out = 7;
  const BlockRows rows(GgmlType::Q4_0, n_in, n_out, 0.02f, 3);
  be.upload_weight(rows.w);
  ThreadPool pool(1);
  CpuBackend cpu(pool, ActivationMode::F32, 0);
  const std::vector<float> x = random_floats(2 * n_in, 4);
  std::vector<float> a(2 * n_out), b(2 * n_out);
  cpu.matmul(rows.w, x.data(), 2, a.data());
  be.matmul(rows.w, x.data(), 2, b.data());
  EXPECT_EQ(a, b);
}

TEST(OpenclSelfCheck, broken_integer_q4_0_gemm_is_caught_and_prompts_take_the_float_gemm) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  ::testing::internal::CaptureStderr();
  OpenclBackendOptions o = options_with("matmul_q8_q4_0", kBrokenMatmulQ8Q4_0);
  o.q8_plain_dot = true;  // the integer GEMM on any device; every other integer kernel passes
  OpenclBackend be(o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(be.cpu_fallbacks(), std::vector<std::string>{"matmul_q8_q4_0"});
  EXPECT_NE(err.find("prompt products take the float GEMM"), std::string::npos) << err;

  // Q4_0 prompts take the float GEMM: the CPU's float path, the input not rounded.
  const int64_t n_in = 96, n_out = 7;
  const BlockRows rows(GgmlType::Q4_0, n_in, n_out, 0.02f, 3);
  be.upload_weight(rows.w);
  ThreadPool pool(1);
  CpuBackend cpu(pool, ActivationMode::F32, 0);
  const std::vector<float> x = random_floats(2 * n_in, 4);
  std::vector<float> a(2 * n_out), b(2 * n_out), xr(x.size());
  be.rounded_matmul_input(rows.w, x.data(), 2, xr.data());
  EXPECT_EQ(xr, x);
  cpu.matmul(rows.w, x.data(), 2, a.data());
  be.matmul(rows.w, x.data(), 2, b.data());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * (1.0f + std::abs(a[i]))) << i;
  // Q8_0's integer GEMM passed and still runs: its input is rounded.
  const BlockRows q8(GgmlType::Q8_0, n_in, n_out, 0.01f, 5);
  be.upload_weight(q8.w);
  be.rounded_matmul_input(q8.w, x.data(), 2, xr.data());
  EXPECT_NE(xr, x);
}

// --cl-int-matvec off keeps decode's products float, yet the self-check still judges the integer decode
// kernels on their own cases (its verdict is cached for every session of the same programs): none fails,
// one-token products take the float kernel (input not rounded), and with the option on the integer one.
TEST(OpenclSelfCheck, integer_decode_kernels_are_checked_whatever_int_matvec_says) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  const int64_t n_in = 96, n_out = 7;
  const BlockRows rows(GgmlType::Q4_0, n_in, n_out, 0.02f, 3);
  const std::vector<float> x = random_floats(n_in, 4);
  for (const bool on : {false, true}) {
    ::testing::internal::CaptureStderr();
    OpenclBackendOptions o = options_with("", "");
    o.q8_plain_dot = true;  // the integer kernels on any device
    o.int_matvec = on;
    OpenclBackend be(o);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(be.cpu_fallbacks().empty()) << err;
    EXPECT_EQ(err.find("failed its self-check"), std::string::npos) << err;
    be.upload_weight(rows.w);
    std::vector<float> xr(x.size());
    be.rounded_matmul_input(rows.w, x.data(), 1, xr.data());
    EXPECT_EQ(xr != x, on);
  }
}

TEST(OpenclSelfCheck, broken_prompt_rounding_is_caught_and_every_prompt_takes_the_float_gemm) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  ::testing::internal::CaptureStderr();
  OpenclBackendOptions o = options_with("quantize_q8", kBrokenQuantizeQ8);
  o.q8_plain_dot = true;
  OpenclBackend be(o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  // The first format's product (checked before the rounding it read) and the rounding fail; the check
  // stops there, so no other integer kernel is judged on products that ran on the float GEMM.
  EXPECT_EQ(be.cpu_fallbacks(), (std::vector<std::string>{"matmul_q8_q4_0", "quantize_q8"}));
  EXPECT_NE(err.find("quantize_q8 failed its self-check"), std::string::npos) << err;
  const int64_t n_in = 96, n_out = 5;
  const BlockRows rows(GgmlType::Q8_0, n_in, n_out, 0.01f, 5);
  be.upload_weight(rows.w);
  const std::vector<float> x = random_floats(3 * n_in, 6);
  std::vector<float> xr(x.size()), a(3 * n_out), b(3 * n_out);
  be.rounded_matmul_input(rows.w, x.data(), 3, xr.data());
  EXPECT_EQ(xr, x);  // Q8_0's integer kernel is untouched, yet its prompts are not rounded
  ThreadPool pool(1);
  CpuBackend cpu(pool, ActivationMode::F32, 0);
  cpu.matmul(rows.w, x.data(), 3, a.data());
  be.matmul(rows.w, x.data(), 3, b.data());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * (1.0f + std::abs(a[i]))) << i;
}

TEST(OpenclSelfCheck, broken_split_sum_is_caught_and_products_run_unsplit) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  ::testing::internal::CaptureStderr();
  OpenclBackendOptions o = options_with("gemm_split_sum", kBrokenGemmSplitSum);
  o.gemm_split_blocks = 1;  // every product would split
  OpenclBackend be(o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(be.cpu_fallbacks(), std::vector<std::string>{"gemm_split_sum"});
  EXPECT_NE(err.find("gemm_split_sum failed its self-check"), std::string::npos) << err;
  EXPECT_NE(err.find("prompt products run unsplit"), std::string::npos) << err;
  EXPECT_EQ(be.gemm_split_for(7, 2, 4096).slices, 1);

  // A Q8_0 product of 3 blocks still matches the CPU (the unsplit kernel).
  const int64_t n_in = 96, n_out = 5;
  const BlockRows rows(GgmlType::Q8_0, n_in, n_out, 0.01f, 5);
  be.upload_weight(rows.w);
  ThreadPool pool(1);
  CpuBackend cpu(pool, ActivationMode::F32, 0);
  const std::vector<float> x = random_floats(3 * n_in, 6);
  std::vector<float> a(3 * n_out), b(3 * n_out);
  cpu.matmul(rows.w, x.data(), 3, a.data());
  be.matmul(rows.w, x.data(), 3, b.data());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4f * (1.0f + std::abs(a[i]))) << i;
}

// A whole forward pass with an op on a fallback: a CPU op goes down and back up for its activations (in
// every layer of the prompt for GLU, which writes over its gate input in place; for RMSNorm at the first
// layer's start and on the last row for the logits, the other norms coming with the residual add), a failed
// fused add+RMSNorm runs the device's unfused add and RMSNorm. Either way the logits still equal the CPU
// float path's. f32 cache: only float rounding separates the two (bound 1e-4, as in test_opencl_model.cpp).
// min_downloads: the downloads a decode step must make beyond the logits (the fallback's traffic).
void forward_with_fallback_matches_cpu(const char* kernel, const char* source, uint64_t min_downloads) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  const int64_t V = model->config().n_vocab;
  ::testing::internal::CaptureStderr();
  test::OpenclForwardRig rig(*model, 64, 16, GgmlType::F32, kernel, source);
  ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(rig.be->cpu_fallbacks(), std::vector<std::string>{kernel});
  SessionOptions so;
  so.n_ctx = 64;
  so.n_batch = 16;
  so.n_threads = 2;
  so.activations = ActivationMode::F32;
  so.kv_type = GgmlType::F32;
  Session cpu(*model, so);
  auto rel_diff = [V](const float* a, const float* b) {
    double diff = 0.0, mag = 0.0;
    for (int64_t i = 0; i < V; ++i) {
      diff = std::max(diff, std::abs(double(a[i]) - b[i]));
      mag = std::max(mag, std::abs(double(a[i])));
    }
    return diff / mag;
  };

  const std::array<int32_t, 8> prompt = {504, 2365, 6354, 16438, 27003, 690, 260, 23790};  // golden case 0
  rig.run(prompt.data(), int64_t(prompt.size()), 0);
  cpu.eval(prompt.data(), int64_t(prompt.size()));
  EXPECT_LE(rel_diff(cpu.logits(), rig.logits.data()), 1e-4);
  int64_t n_past = int64_t(prompt.size());
  for (int step = 0; step < 3; ++step) {
    const int32_t t = int32_t(std::max_element(cpu.logits(), cpu.logits() + V) - cpu.logits());
    const uint64_t d0 = rig.be->downloads();
    rig.run(&t, 1, n_past++);
    // The logits, plus what the fallback op needed.
    EXPECT_GE(rig.be->downloads() - d0, 1 + min_downloads) << "step " << step;
    cpu.eval(&t, 1);
    EXPECT_LE(rel_diff(cpu.logits(), rig.logits.data()), 1e-4) << "step " << step;
  }
}

TEST(OpenclSelfCheck, forward_with_rmsnorm_on_the_cpu_matches_the_cpu_backend) {
  forward_with_fallback_matches_cpu("rmsnorm", test::kBrokenRmsnorm,
                                    2);  // layer 0's input, the output norm's
}

TEST(OpenclSelfCheck, forward_with_glu_on_the_cpu_matches_the_cpu_backend) {
  // The prompt's GLU runs on the CPU; decode's goes with the gate and up products in matvec_glu_q4_1.
  forward_with_fallback_matches_cpu("glu_silu", kBrokenGluSilu, 0);
}

TEST(OpenclSelfCheck, forward_with_the_fused_decode_glu_failed_runs_matvecs_and_glu_on_the_device) {
  forward_with_fallback_matches_cpu("matvec_glu_q4_1", kBrokenMatvecGluQ4_1, 0);
}

TEST(OpenclSelfCheck, forward_with_add_rmsnorm_failed_runs_add_and_rmsnorm_on_the_device) {
  forward_with_fallback_matches_cpu("add_rmsnorm", kBrokenAddRmsnorm, 0);
}

TEST(OpenclSelfCheck, test_hook_rejects_an_unknown_kernel_name) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  EXPECT_THROW(OpenclBackend{options_with("no_such_kernel", test::kBrokenRmsnorm)}, Error);
}

}  // namespace
}  // namespace tilellm
