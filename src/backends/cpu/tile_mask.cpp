// The lossy row-tile mask of --degrade tile-mask=F (cpu_backend.h): per matrix, the F weakest 16-row tiles
// by the sum of their squared weights (exact values, dequantized from the GGUF rows), ties to the lower
// index. Applied by the tiled matmuls (matmul.cpp, masked_tiles) only while masking is on.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "format/quants.h"

namespace tilellm {

std::vector<uint8_t> CpuBackend::select_tile_mask(const Weight& w, int64_t n_tiles, double fraction) {
  std::vector<double> energy(size_t(n_tiles), 0.0);
  pool_.parallel_for(n_tiles, 1, [&](int64_t b, int64_t e, int) {
    std::vector<float> row(size_t(w.n_in));
    for (int64_t t = b; t < e; ++t) {
      double sum = 0;
      for (int64_t r = t * kTileRows; r < std::min((t + 1) * kTileRows, w.n_out); ++r) {
        dequantize_row(w.type, w.row(r), row.data(), w.n_in);
        for (float x : row) sum += double(x) * double(x);
      }
      energy[size_t(t)] = sum;
    }
  });
  std::vector<int64_t> order(static_cast<size_t>(n_tiles));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return energy[size_t(a)] < energy[size_t(b)]; });
  std::vector<uint8_t> mask(size_t(n_tiles), 0);
  const int64_t k = int64_t(std::floor(fraction * double(n_tiles)));
  for (int64_t i = 0; i < k; ++i) mask[size_t(order[size_t(i)])] = 1;
  return mask;
}

bool CpuBackend::has_tile_mask() const {
  for (const auto& [w, p] : prepared_) {
    if (!p.mask.empty()) return true;
  }
  return false;
}

}  // namespace tilellm
