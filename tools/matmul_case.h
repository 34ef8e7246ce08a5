// One matrix of random weights held by a backend exactly as a model's would be, for the benchmarks that time
// the engine's own matmul op (gemm-speed, gemv-bw): the backend comes from the registry with the asked
// weights and activation modes and the kernels timed, the matrix goes in through Backend::load_weights (so
// it is repacked, converted or uploaded by the engine's own load path), and every product is
// Backend::matmul. The reference check multiplies the weights' exact values (the conversion every backend
// shares: format/asym_quant.h, or the rounding to F16) by the activations as the backend rounds them
// (Backend::rounded_matmul_input), in double.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"

namespace tilellm::cli {

class MatmulCase {
 public:
  // Weights W [N][K] from `seed` (benchmark_rows), held in `source` and loaded into a backend made from
  // `params` (whose weights and activation modes say how it holds and multiplies them). Throws
  // tilellm::Error when the backend cannot be made or refuses the matrix (a mode it has no kernel for, a
  // shape its format cannot take).
  MatmulCase(const BackendEntry& entry, const BackendParams& params, int K, int N, GgmlType source,
             uint32_t seed);

  // C[M][N] = A[M][K] W^T through the backend's matmul: for a device backend a full round trip (A up, the
  // kernels, C down).
  void run(const float* A, int M, float* C) { backend_->matmul(w_, A, M, C); }
  // Largest |C - ref| / sum |a w| over sampled entries (3 rows, 64 columns); infinite for NaN or garbage.
  double check(const float* A, int M, const float* C) const;
  Backend& backend() { return *backend_; }
  int K() const { return K_; }
  int N() const { return N_; }

 private:
  int K_, N_;
  std::vector<uint8_t> data_;  // W in the source type: [N] rows
  std::vector<float> exact_;   // [N][K] the weights as the backend multiplies by them
  Weight w_;
  std::unique_ptr<Backend> backend_;
};

// Uniform [-1, 1] floats from `seed`, never zero (a zero hides a dropped term).
std::vector<float> random_floats(size_t n, uint32_t seed);

// N rows of K benchmark weights in `source`: F32 rows of random_floats, Q8_0 the same floats quantized,
// any other GGUF type random blocks with finite scales (backends/check_cases.h random_rows). K must be a
// multiple of the type's block.
std::vector<uint8_t> benchmark_rows(GgmlType source, int K, int N, uint32_t seed);

// Sum of the backend's kernel times since the last reset, in milliseconds (0 when it times none).
double kernel_ms(const Backend& be);

}  // namespace tilellm::cli
