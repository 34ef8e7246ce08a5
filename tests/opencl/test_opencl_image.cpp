// The image weight path (--gpu-memory image): every image kernel (matvec and matmul for F16, Q4_0, Q4_1,
// Q8_0, and KQ4 for Q4_K) against the CPU backend on random odd shapes under every device profile; the
// wrapped row mapping forced by a narrow image; the fallback to a buffer, with its note, for a weight that
// does not fit or has no image kernel; the self-check of the image kernels; and SmolLM2's greedy decode with
// weights in images equal to the buffer path's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../common/paths.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/opencl/image_weight.h"
#include "backends/opencl/opencl_backend.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "format/quants.h"
#include "model/model.h"
#include "random_data.h"
#include "runtime/session.h"
#include "test_device.h"

namespace tilellm {
namespace {

using test::have_device;
using test::make_weight;
using test::OwnedWeight;
using test::rand_floats;

constexpr double kU = 0x1p-24;
constexpr GgmlType kImageTypes[] = {GgmlType::F16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0,
                                    GgmlType::Q4_K};

// y = W x on both backends for n_tok tokens, checked element by element: both sides sum the same n_in exact
// products w_i x_i in float, in different orders, so each is within gamma_n sum |w_i x_i| (gamma_n ~ n u) of
// the exact sum and they differ by at most 2 n u sum |w_i x_i|.
void expect_matmul_matches(CpuBackend& cpu, OpenclBackend& be, const Weight& w, int64_t n_tok,
                           uint32_t seed) {
  const int64_t n_in = w.n_in, n_out = w.n_out;
  const std::vector<float> x = rand_floats(size_t(n_tok * n_in), seed);
  std::vector<float> a(size_t(n_tok * n_out)), b(size_t(n_tok * n_out), -7.0f);
  cpu.matmul(w, x.data(), n_tok, a.data());
  be.matmul(w, x.data(), n_tok, b.data());
  std::vector<float> wf(size_t(n_in * n_out));
  for (int64_t r = 0; r < n_out; ++r) dequantize_row(w.type, w.row(r), wf.data() + r * n_in, n_in);
  int bad = 0;
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < n_out; ++r) {
      double mag = 0.0;
      for (int64_t i = 0; i < n_in; ++i)
        mag += std::abs(double(wf[size_t(r * n_in + i)]) * x[size_t(t * n_in + i)]);
      const double err = std::abs(double(a[size_t(t * n_out + r)]) - b[size_t(t * n_out + r)]);
      if (!(err <= 2.0 * double(n_in) * kU * mag) && bad++ < 3) {
        ADD_FAILURE() << w.name << " (" << type_name(w.type) << ") " << n_tok << " tokens, y[" << t << "]["
                      << r << "]: cpu " << a[size_t(t * n_out + r)] << " opencl " << b[size_t(t * n_out + r)];
      }
    }
  }
}

// Odd sizes: F16 rows of an odd length (the last 32-weight unit partial), block rows of an odd block count
// (Q4_K: three 256-weight super-blocks, 24 blocks of 32 in KQ4).
int64_t odd_n_in(GgmlType t, int64_t blocks) {
  if (t == GgmlType::Q4_K) return 256 * 3;
  return t == GgmlType::F16 ? 32 * blocks + 13 : 32 * blocks;
}

class OpenclImage : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  }

  std::unique_ptr<OpenclBackend> make(size_t max_width = 0, size_t max_height = 0) {
    OpenclBackendOptions o;
    o.device = test::opencl_test_device();
    o.profile = GetParam();
    o.max_tokens = 8;
    o.max_in_elems = 1 << 16;
    o.max_out_elems = 1 << 16;
    o.max_width = 1024;
    o.self_check = false;  // these tests check the kernels themselves; a CPU fallback would hide a fault
    o.memory = GpuMemory::Image;
    o.image_max_width = max_width;
    o.image_max_height = max_height;
    auto be = std::make_unique<OpenclBackend>(o);
    if (!be->caps().images) return nullptr;
    return be;
  }

  OwnedWeight& keep(OwnedWeight w) {
    return *kept_.emplace_back(std::make_unique<OwnedWeight>(std::move(w)));
  }

  std::vector<std::unique_ptr<OwnedWeight>> kept_;
  ThreadPool pool_{2};
  CpuBackend cpu_{pool_, ActivationMode::F32, 1 << 16};
};

TEST_P(OpenclImage, image_kernels_match_cpu_for_every_image_format) {
  auto be = make();
  if (!be) GTEST_SKIP() << "the device has no image support";
  size_t images = 0;
  for (GgmlType t : kImageTypes) {
    const int64_t n_in = odd_n_in(t, 11), n_out = 37;  // 37: not a multiple of the matvec's 4 rows
    OwnedWeight& w = keep(make_weight(t, n_in, n_out, 21, "random"));
    be->upload_weight(w.w);
    ASSERT_EQ(be->image_weights(), ++images) << type_name(t) << " did not go into an image";
    // 7 tokens: the matmul kernel, one full tile of 4 tokens and a partial one; 1 token: the matvec kernel.
    for (int64_t n_tok : {7, 1}) expect_matmul_matches(cpu_, *be, w.w, n_tok, 5);
  }
  EXPECT_TRUE(be->buffer_weights().empty());
}

// The narrowest image (8 texels, one 128-byte line) wraps every row here over several image lines: Q4_0's
// rows of 16 texels over 2, Q4_1's 24 over 3, Q8_0's 32 over 4, F16's 56 over 7, KQ4's 40 over 5.
TEST_P(OpenclImage, rows_wrapped_over_image_lines_match_cpu) {
  auto be = make(/*max_width=*/8);
  if (!be) GTEST_SKIP() << "the device has no image support";
  for (GgmlType t : kImageTypes) {
    const int64_t n_in = odd_n_in(t, 13), n_out = 23;
    const opencl::ImagePlan plan =
        opencl::plan_weight_image(be->caps(), OpenclBackend::device_row_bytes(t, n_in), n_out, 8);
    ASSERT_TRUE(plan.fits) << plan.why;
    EXPECT_EQ(plan.width, 8u);
    EXPECT_EQ(plan.lines, t == GgmlType::Q4_0   ? 2u
                          : t == GgmlType::Q4_1 ? 3u
                          : t == GgmlType::Q8_0 ? 4u
                          : t == GgmlType::Q4_K ? 5u
                                                : 7u)
        << type_name(t);
    OwnedWeight& w = keep(make_weight(t, n_in, n_out, 31, "wrapped"));
    be->upload_weight(w.w);
    for (int64_t n_tok : {5, 1}) expect_matmul_matches(cpu_, *be, w.w, n_tok, 6);
  }
  EXPECT_EQ(be->image_weights(), 5u);
  EXPECT_TRUE(be->buffer_weights().empty());
}

// A weight taller than the image height limit, and formats without image kernels, stay buffers: one note
// each names the weight and the reason, and the products are still right (the buffer kernels).
TEST_P(OpenclImage, weights_that_do_not_fit_stay_buffers_with_a_note) {
  auto be = make(0, /*max_height=*/30);
  if (!be) GTEST_SKIP() << "the device has no image support";
  OwnedWeight& tall = keep(make_weight(GgmlType::Q4_0, 32 * 7, 41, 7, "blk.0.tall.weight"));
  OwnedWeight& f32 = keep(make_weight(GgmlType::F32, 45, 9, 8, "blk.0.f32.weight"));
  OwnedWeight& q5 = keep(make_weight(GgmlType::Q5_0, 32 * 3, 11, 9, "blk.0.q5.weight"));
  OwnedWeight& fits = keep(make_weight(GgmlType::Q8_0, 32 * 5, 29, 10, "blk.0.fits.weight"));
  testing::internal::CaptureStderr();
  for (OwnedWeight* w : {&tall, &f32, &q5, &fits}) be->upload_weight(w->w);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(be->buffer_weights().size(), 3u) << err;
  EXPECT_EQ(be->image_weights(), 1u);
  const std::vector<std::string>& notes = be->buffer_weights();
  EXPECT_NE(
      notes[0].find("weight blk.0.tall.weight stays a buffer: its image of 8 x 41 texels exceeds the 2D "
                    "image limit of"),
      std::string::npos)
      << notes[0];
  EXPECT_NE(notes[0].find("x 30"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("blk.0.f32.weight stays a buffer: no image kernel reads F32"), std::string::npos)
      << notes[1];
  EXPECT_NE(notes[2].find("blk.0.q5.weight stays a buffer: no image kernel reads Q5_0"), std::string::npos)
      << notes[2];
  // One line on stderr per weight that stayed a buffer, and none for the one in an image.
  for (const std::string& n : notes)
    EXPECT_NE(err.find("note: OpenCL --gpu-memory image: " + n + "\n"), std::string::npos) << err;
  EXPECT_EQ(err.find("blk.0.fits.weight"), std::string::npos) << err;
  for (OwnedWeight* w : {&tall, &f32, &q5, &fits}) {
    for (int64_t n_tok : {3, 1}) expect_matmul_matches(cpu_, *be, w->w, n_tok, 12);
  }
}

TEST_P(OpenclImage, self_check_passes_the_image_kernels_on_this_device) {
  if (!make()) GTEST_SKIP() << "the device has no image support";
  OpenclBackendOptions o;
  o.device = test::opencl_test_device();
  o.profile = GetParam();
  o.max_tokens = 8;
  o.max_in_elems = o.max_out_elems = 1 << 12;
  o.max_width = 256;
  o.memory = GpuMemory::Image;
  OpenclBackend be(o);
  EXPECT_TRUE(be.cpu_fallbacks().empty()) << be.cpu_fallbacks().front();
}

INSTANTIATE_TEST_SUITE_P(Profiles, OpenclImage,
                         ::testing::Values("none", "powervr-rogue", "mali-valhall", "adreno-7xx"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// The Q4_0 image matvec replaced by one that writes 1 for every row: the self-check catches it, decode
// then takes the image matmul kernel, and the results are right.
constexpr const char* kBrokenMatvecImage = R"(
__kernel void matvec_image_q4_0(read_only image2d_t w, int width, int lines, int n_in, int n_out,
                                __global const float* x, __global float* y, __local float4* scratch) {
  const int r = get_global_id(0);
  if (r < n_out) y[r] = 1.0f;
}
)";

TEST(OpenclImageSelfCheck, a_broken_image_kernel_is_caught_and_decode_uses_the_image_matmul) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  OpenclBackendOptions o;
  o.device = test::opencl_test_device();
  o.max_tokens = 8;
  o.max_in_elems = o.max_out_elems = 1 << 12;
  o.max_width = 256;
  o.memory = GpuMemory::Image;
  o.test_kernel_name = "matvec_image_q4_0";
  o.test_kernel_source = kBrokenMatvecImage;
  testing::internal::CaptureStderr();
  std::unique_ptr<OpenclBackend> be;
  try {
    be = std::make_unique<OpenclBackend>(o);
  } catch (const Error& e) {
    testing::internal::GetCapturedStderr();
    // Without image support no image kernel is built, so the hook finds none to replace.
    GTEST_SKIP() << e.what();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(be->cpu_fallbacks(), std::vector<std::string>{"matvec_image_q4_0"});
  EXPECT_NE(err.find("warning: OpenCL kernel matvec_image_q4_0 failed its self-check"), std::string::npos)
      << err;
  EXPECT_NE(err.find("one-token products use the matmul kernel"), std::string::npos) << err;
  OwnedWeight w = make_weight(GgmlType::Q4_0, 32 * 9, 19, 3, "decode");
  be->upload_weight(w.w);
  ASSERT_EQ(be->image_weights(), 1u);
  ThreadPool pool(2);
  CpuBackend cpu(pool, ActivationMode::F32, 1 << 12);
  expect_matmul_matches(cpu, *be, w.w, 1, 4);
}

// The layout plan alone (no device): the mapping's numbers and every reason a weight stays a buffer.
TEST(OpenclImagePlan, mapping_and_limits) {
  opencl::Capabilities c;
  c.images = true;
  c.image2d_max_width = 100;  // usable width 96 texels
  c.image2d_max_height = 1000;
  c.max_alloc_bytes = uint64_t(1) << 30;
  // 1000 bytes -> 1024 (a 128-byte multiple) -> 64 texels: one line per row.
  opencl::ImagePlan p = opencl::plan_weight_image(c, 1000, 37);
  ASSERT_TRUE(p.fits) << p.why;
  EXPECT_EQ(p.width, 64u);
  EXPECT_EQ(p.lines, 1u);
  EXPECT_EQ(p.height, 37u);
  // 3000 bytes -> 3072 -> 192 texels: two lines of 96.
  p = opencl::plan_weight_image(c, 3000, 37);
  ASSERT_TRUE(p.fits) << p.why;
  EXPECT_EQ(p.width, 96u);
  EXPECT_EQ(p.lines, 2u);
  EXPECT_EQ(p.height, 74u);
  // 3200 bytes -> 3328 -> 208 texels: three lines of 72 (70 rounded up to 8).
  p = opencl::plan_weight_image(c, 3200, 5);
  ASSERT_TRUE(p.fits) << p.why;
  EXPECT_EQ(p.lines, 3u);
  EXPECT_EQ(p.width, 72u);
  // Too tall, directly or after wrapping.
  p = opencl::plan_weight_image(c, 1000, 1001);
  EXPECT_FALSE(p.fits);
  EXPECT_NE(p.why.find("exceeds the 2D image limit of 100 x 1000"), std::string::npos) << p.why;
  EXPECT_FALSE(opencl::plan_weight_image(c, 3000, 501).fits);
  // A test clamp lowers the limits further.
  EXPECT_FALSE(opencl::plan_weight_image(c, 1000, 37, 0, 36).fits);
  // Larger than the largest allocation.
  c.max_alloc_bytes = 64 * 16 * 36;
  p = opencl::plan_weight_image(c, 1000, 37);
  EXPECT_FALSE(p.fits);
  EXPECT_NE(p.why.find("largest allocation"), std::string::npos) << p.why;
  // Narrower than one 128-byte line.
  p = opencl::plan_weight_image(c, 1000, 37, 7);
  EXPECT_FALSE(p.fits);
  EXPECT_NE(p.why.find("below one 128-byte line"), std::string::npos) << p.why;
  // No image support at all.
  c.images = false;
  p = opencl::plan_weight_image(c, 1000, 37);
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.why, "the device has no image support");
}

// --gpu-memory image is a device mode: the CPU backend refuses it by name.
TEST(OpenclImageSession, image_memory_on_the_cpu_backend_is_an_error) {
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so;
  so.n_ctx = 16;
  so.gpu_memory = GpuMemory::Image;
  try {
    Session s(*model, so);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--gpu-memory image"), std::string::npos) << e.what();
    const std::string what = e.what();
    const size_t has = what.find("GPU backend (this build has ");
    EXPECT_NE(has, std::string::npos) << what;
    EXPECT_NE(what.find("opencl", has), std::string::npos) << what;  // among the build's device backends
  }
}

int32_t argmax(const float* v, int64_t n) {
  return int32_t(std::max_element(v, v + n) - v);
}

// SmolLM2-135M greedy decode with its matrices in images equals the buffer path's, token for token, and the
// logits agree to float rounding: both compute the same exact weights in float and differ only in the order
// of the sums (the buffer path's f16 KV rows can then round to neighbouring halves, ~5e-4 relative, as in
// test_opencl_model; bound 1e-3 of the largest logit). Every matrix but the tied embedding is in an image.
TEST(OpenclImageModel, smollm2_greedy_with_image_weights_equals_buffer_path) {
  if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  const std::string path = test::model_path(test::kSmolLM2);
  ASSERT_MODEL(path);
  auto model = Model::load(path);
  SessionOptions so;
  so.n_ctx = 48;
  so.n_threads = 2;
  so.backend = "opencl";
  so.device = test::opencl_test_device();
  Session buffer(*model, so);
  so.gpu_memory = GpuMemory::Image;
  testing::internal::CaptureStderr();
  Session image(*model, so);
  const std::string err = testing::internal::GetCapturedStderr();
  // SmolLM2's weights fit PoCL's images; only the embedding (tied to the output) stays a buffer.
  EXPECT_NE(err.find("weight token_embd.weight stays a buffer: the embedding kernel reads it"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

  std::ifstream f(test::source_path("tests/data/goldens/smollm2.json"));
  ASSERT_TRUE(f) << "missing tests/data/goldens/smollm2.json";
  const nlohmann::json golden = nlohmann::json::parse(f);
  const int64_t V = model->config().n_vocab;
  double worst = 0.0;
  size_t generated = 0;
  for (int c = 0; c < 2; ++c) {
    std::vector<int32_t> prompt = golden["cases"][size_t(c)]["prompt_tokens"].get<std::vector<int32_t>>();
    prompt.resize(std::min<size_t>(prompt.size(), 12));
    buffer.reset();
    image.reset();
    buffer.eval(prompt.data(), int64_t(prompt.size()));
    image.eval(prompt.data(), int64_t(prompt.size()));
    std::vector<int32_t> tb, ti;
    for (int step = 0; step < 10; ++step) {
      const float* lb = buffer.logits();
      const float* li = image.logits();
      double diff = 0.0, mag = 0.0;
      for (int64_t i = 0; i < V; ++i) {
        diff = std::max(diff, std::abs(double(lb[i]) - li[i]));
        mag = std::max(mag, std::abs(double(lb[i])));
      }
      worst = std::max(worst, diff / mag);
      ASSERT_LE(diff, 1e-3 * mag) << "prompt " << c << " step " << step;
      tb.push_back(argmax(lb, V));
      ti.push_back(argmax(li, V));
      buffer.eval(&tb.back(), 1);
      image.eval(&ti.back(), 1);
    }
    EXPECT_EQ(tb, ti) << "prompt " << c;
    generated += tb.size();
  }
  std::printf("image vs buffer: worst relative logit difference %.3g over %zu tokens\n", worst, generated);
}

}  // namespace
}  // namespace tilellm
