// The converted weight formats of the OpenCL backend (--weights int4b64, int8b0, f16: kernels/quants.cl,
// matmul_int4b64.cl, matmul_int8b0.cl) against the CPU backend in the same mode on its float path
// (--activations f32: the same conversion's exact weights as F32 rows), on random data of odd shapes under
// every device profile.
//  - matmul (7 tokens: full and partial tiles) and matvec (1 token) agree to float accumulation error;
//  - a tied embedding table keeps its GGUF type for the lookup (bit for bit the CPU's) while the same tensor
//    as the output matrix is converted;
//  - an input count the formats cannot hold is an error naming the weight.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/opencl/opencl_backend.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "format/quants.h"
#include "model/weights.h"
#include "random_data.h"
#include "test_device.h"

namespace tilellm {
namespace {

using test::make_weight;
using test::OwnedWeight;
using test::rand_floats;

constexpr double kU = 0x1p-24;

class OpenclConverted : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (opencl::list_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  }

  std::unique_ptr<OpenclBackend> make(WeightsMode mode) {
    OpenclBackendOptions o;
    o.device = test::opencl_test_device();
    o.profile = GetParam();
    o.max_tokens = 8;
    o.max_in_elems = 1 << 16;
    o.max_out_elems = 1 << 16;
    o.max_width = 1024;
    o.weights = mode;
    o.self_check = false;  // these tests check the kernels themselves; a CPU fallback would hide a fault
    o.int_gemm = false;    // the float GEMM: the integer one rounds x (its tests: test_opencl_ops.cpp)
    return std::make_unique<OpenclBackend>(o);
  }

  ThreadPool pool_{2};
};

TEST_P(OpenclConverted, matmul_matches_cpu_in_the_same_mode) {
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0, WeightsMode::F16}) {
    for (GgmlType src : {GgmlType::Q8_0, GgmlType::F32}) {
      // 11 blocks of 32: INT4B64's last group is one block; 37 rows: not a multiple of the matvec's 4.
      const int64_t n_in = 352, n_out = 37;
      OwnedWeight w = make_weight(src, n_in, n_out, 21 + uint32_t(mode));
      ModelWeights mw;
      mw.output = w.w;
      CpuBackend cpu(pool_, ActivationMode::F32, 1 << 16);
      cpu.prepare_weights(mw.weight_set(), mode);
      auto be = make(mode);
      be->upload_weight(mw.output);
      // The exact converted weights, for the error bound's magnitudes.
      std::vector<float> row(static_cast<size_t>(n_in)), wf(static_cast<size_t>(n_in * n_out));
      for (int64_t r = 0; r < n_out; ++r) {
        dequantize_row(src, w.w.row(r), row.data(), n_in);
        if (mode == WeightsMode::F16) {
          for (int64_t k = 0; k < n_in; ++k)
            wf[size_t(r * n_in + k)] = fp16_to_fp32(fp32_to_fp16(row[size_t(k)]));
        } else {
          dequantize_row_asym(mode == WeightsMode::Int4B64 ? AsymFormat::Int4B64 : AsymFormat::Int8B0,
                              row.data(), n_in, wf.data() + r * n_in);
        }
      }
      for (int64_t n_tok : {7, 1}) {
        const std::vector<float> x = rand_floats(size_t(n_tok * n_in), 5);
        std::vector<float> a(size_t(n_tok * n_out)), b(size_t(n_tok * n_out), -7.0f);
        cpu.matmul(mw.output, x.data(), n_tok, a.data());
        be->matmul(mw.output, x.data(), n_tok, b.data());
        // Both sides sum the same n_in products w_i x_i in float in different orders (2 n u sum |w_i x_i|
        // apart at most); a device that fuses d * q + m into one fma forms w_i to within u |w_i| of the
        // CPU's, one more u sum |w_i x_i|.
        int bad = 0;
        for (int64_t tk = 0; tk < n_tok; ++tk) {
          for (int64_t r = 0; r < n_out; ++r) {
            double mag = 0.0;
            for (int64_t i = 0; i < n_in; ++i)
              mag += std::abs(double(wf[size_t(r * n_in + i)]) * x[size_t(tk * n_in + i)]);
            const double err = std::abs(double(a[size_t(tk * n_out + r)]) - b[size_t(tk * n_out + r)]);
            if (!(err <= (2.0 * double(n_in) + 1.0) * kU * mag) && bad++ < 3) {
              ADD_FAILURE() << weights_mode_name(mode) << " from " << type_name(src) << " n_tok " << n_tok
                            << " y[" << tk << "][" << r << "]: cpu " << a[size_t(tk * n_out + r)]
                            << " opencl " << b[size_t(tk * n_out + r)];
            }
          }
        }
      }
    }
  }
}

TEST_P(OpenclConverted, tied_table_is_looked_up_in_its_gguf_type_and_multiplied_converted) {
  const int64_t n_embd = 96, n_vocab = 29;
  OwnedWeight t = make_weight(GgmlType::Q8_0, n_embd, n_vocab, 7);
  ModelWeights mw;
  mw.tok_embd = t.w;
  mw.output = t.w;  // tied: the same tensor
  for (WeightsMode mode : {WeightsMode::Int8B0, WeightsMode::Int4B64}) {
    CpuBackend cpu(pool_, ActivationMode::F32, 1 << 16);
    cpu.prepare_weights(mw.weight_set(), mode);
    auto be = make(mode);
    be->upload_model(mw.weight_set());
    const int32_t ids[3] = {28, 0, 13};
    std::vector<float> a(size_t(3 * n_embd)), b(a.size(), -7.0f);
    cpu.embed(mw.tok_embd, ids, 3, 0.5f, a.data());
    be->embed(mw.tok_embd, ids, 3, 0.5f, b.data());
    EXPECT_EQ(a, b) << weights_mode_name(mode);
    const std::vector<float> x = rand_floats(size_t(n_embd), 3);
    std::vector<float> ya(static_cast<size_t>(n_vocab)), yb(ya.size()), yn(ya.size());
    cpu.matmul(mw.output, x.data(), 1, ya.data());
    be->matmul(mw.output, x.data(), 1, yb.data());
    CpuBackend native(pool_, ActivationMode::F32, 1 << 16);
    native.matmul(mw.output, x.data(), 1, yn.data());
    double diff = 0.0, mag = 0.0, moved = 0.0;
    for (int64_t r = 0; r < n_vocab; ++r) {
      diff = std::max(diff, std::abs(double(ya[size_t(r)]) - yb[size_t(r)]));
      moved = std::max(moved, std::abs(double(yn[size_t(r)]) - yb[size_t(r)]));
      mag = std::max(mag, std::abs(double(ya[size_t(r)])));
    }
    EXPECT_LE(diff, 1e-5 * mag) << weights_mode_name(mode);
    // The converted matrix is not the GGUF one: the product moved by the conversion's rounding.
    EXPECT_GT(moved, 1e-5 * mag) << weights_mode_name(mode);
  }
}

TEST_P(OpenclConverted, inputs_not_a_multiple_of_32_are_an_error) {
  OwnedWeight w = make_weight(GgmlType::F32, 33, 4, 1);
  auto be = make(WeightsMode::Int8B0);
  try {
    be->upload_weight(w.w);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("random.F32: 33 inputs is not a multiple of 32"), std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Profiles, OpenclConverted,
                         ::testing::Values("none", "powervr-rogue", "mali-valhall", "adreno-7xx"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace tilellm
