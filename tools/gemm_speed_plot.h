// The GFLOPS-against-M plot of `tilellm gemm-speed --plot FILE`: one panel per (K, N), one line per mode,
// log2 M on x, as a self-contained SVG; a path ending in .html gets a page with the same SVG inline and the
// results as a table under it. Rows from a device backend add a dashed line per mode for the GFLOPS of the
// kernels' device time (the solid line is the round trip).
#pragma once

#include <string>
#include <vector>

#include "bench_env.h"
#include "mnn_gemm.h"

namespace tilellm::cli {

// One measured configuration: ms is the host's run, or on a device the full round trip (total); gpu the
// kernels' device time (device rows only).
struct GemmRow {
  gemm::Mode mode;
  int M, K, N;
  bench::Stats ms;
  double max_rel_err;
  bool has_gpu = false;
  bench::Stats gpu;
};

void write_gemm_plot(const std::string& path, const std::vector<GemmRow>& rows, const std::string& title);

}  // namespace tilellm::cli
