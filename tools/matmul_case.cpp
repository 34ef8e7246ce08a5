#include "matmul_case.h"

#include <cmath>
#include <random>
#include <set>

#include "backends/check_cases.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/asym_quant.h"
#include "format/quants.h"
#include "format/quants_q8.h"

namespace tilellm::cli {
namespace {

// Rows and columns where the result is compared with the double reference.
std::vector<int> sample(int n, int count) {
  std::set<int> s;
  for (int i = 0; i < count; ++i) s.insert(int(int64_t(i) * (n - 1) / std::max(1, count - 1)));
  return {s.begin(), s.end()};
}

// The exact value a weight of `row` (floats) takes once held in mode m.
void exact_row(WeightsMode m, const float* row, int K, float* out) {
  switch (m) {
    case WeightsMode::Int4B64:
      return dequantize_row_asym(AsymFormat::Int4B64, row, K, out);
    case WeightsMode::Int8B0:
      return dequantize_row_asym(AsymFormat::Int8B0, row, K, out);
    case WeightsMode::Int4B0:
      return dequantize_row_asym(AsymFormat::Int4B0, row, K, out);
    case WeightsMode::F16:
      for (int k = 0; k < K; ++k) out[k] = fp16_to_fp32(fp32_to_fp16(row[k]));
      return;
    case WeightsMode::Native:
    case WeightsMode::F32:
      std::copy(row, row + K, out);
      return;
  }
}

}  // namespace

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = d(rng);
    while (x == 0.0f);
  }
  return v;
}

double kernel_ms(const Backend& be) {
  double ns = 0.0;
  for (const KernelTime& t : be.kernel_times()) ns += t.ns;
  return ns * 1e-6;
}

std::vector<uint8_t> benchmark_rows(GgmlType source, int K, int N, uint32_t seed) {
  const size_t rb = row_size(source, K);
  if (source != GgmlType::F32 && source != GgmlType::Q8_0) {
    if (!is_supported(source) || K % type_traits(source).block_size != 0)
      fail("internal: benchmark weights of {} inputs in {}", K, type_name(source));
    std::mt19937 rng(seed);
    return random_rows(source, K, N, rng);
  }
  const std::vector<float> W = random_floats(size_t(N) * K, seed);
  std::vector<uint8_t> data(rb * size_t(N));
  for (int n = 0; n < N; ++n) {
    const float* src = W.data() + size_t(n) * K;
    if (source == GgmlType::F32)
      std::memcpy(data.data() + size_t(n) * rb, src, rb);
    else
      quantize_activations(GgmlType::Q8_0, src, data.data() + size_t(n) * rb, K);  // same blocks
  }
  return data;
}

MatmulCase::MatmulCase(const BackendEntry& entry, const BackendParams& params, int K, int N, GgmlType source,
                       uint32_t seed)
    : K_(K), N_(N) {
  w_.name = fmt::format("benchmark {}x{}", N, K);
  w_.type = source;
  w_.n_in = K;
  w_.n_out = N;
  w_.row_bytes = row_size(source, K);
  data_ = benchmark_rows(source, K, N, seed);
  w_.data = data_.data();
  backend_ = entry.make(params);
  WeightSet ws;
  ws.matrices.push_back(&w_);
  backend_->load_weights(ws);  // first: a shape the mode cannot take fails here with the backend's reason
  // Exact values: the source's own (a Q8_0 row dequantized), then the conversion of the weights mode.
  exact_.resize(size_t(N) * K);
  std::vector<float> row(static_cast<size_t>(K));
  for (int n = 0; n < N; ++n) {
    dequantize_row(source, w_.row(n), row.data(), K);
    exact_row(params.weights, row.data(), K, exact_.data() + size_t(n) * K);
  }
}

double MatmulCase::check(const float* A, int M, const float* C) const {
  const std::vector<int> rows = sample(M, 3);
  // The input as the product of all M rows rounds it (a backend may round a prompt and not one token).
  std::vector<float> rounded(size_t(M) * size_t(K_));
  backend_->rounded_matmul_input(w_, A, M, rounded.data());
  double worst = 0.0;
  for (int m : rows) {
    const float* a = rounded.data() + size_t(m) * K_;
    for (int n : sample(N_, 64)) {
      double ref = 0.0, mag = 0.0;
      const float* wr = exact_.data() + size_t(n) * K_;
      for (int k = 0; k < K_; ++k) {
        const double p = double(a[k]) * wr[k];
        ref += p;
        mag += std::fabs(p);
      }
      const double err = std::fabs(double(C[size_t(m) * N_ + n]) - ref) / (mag + 1e-30);
      if (!(err <= 1.0)) return INFINITY;  // NaN or garbage
      worst = std::max(worst, err);
    }
  }
  return worst;
}

}  // namespace tilellm::cli
