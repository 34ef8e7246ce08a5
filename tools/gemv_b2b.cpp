// gemv-bw's back-to-back products (gemv_b2b.h). The copies are views of one host buffer of N + copies - 1
// rows (copy c: rows c .. c + N - 1), so each has its own address — backends know their weights by it — and
// its own device copy, without copies times the host memory. The input is one of the backend's resident
// arrays (it stays on the device between steps) and so is every output but the last product's, which goes
// to host memory: each step then ends with the backend's work done.
#include "gemv_b2b.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "bench_env.h"
#include "format/quants.h"
#include "matmul_case.h"

namespace tilellm::cli {

BackToBack gemv_back_to_back(const BackendEntry& entry, const BackendParams& base, int K, int N,
                             WeightsMode mode, ActivationMode act, GgmlType source, double bytes,
                             size_t cache) {
  BackToBack r;
  r.copies = int(std::clamp<double>(std::ceil(4.0 * double(cache) / bytes), 2.0, 64.0));
  const size_t src_row = row_size(source, K);
  const int rows = N + r.copies - 1;
  std::vector<uint8_t> data = benchmark_rows(source, K, rows, uint32_t(K + 3 * N));
  std::vector<Weight> ws(size_t(r.copies));
  for (int c = 0; c < r.copies; ++c) {
    Weight& wc = ws[size_t(c)];
    wc.name = fmt::format("back-to-back copy {} of {}x{}", c, N, K);
    wc.type = source;
    wc.data = data.data() + size_t(c) * src_row;
    wc.n_in = K;
    wc.n_out = N;
    wc.row_bytes = src_row;
  }
  std::vector<float> x = random_floats(size_t(K), uint32_t(N)), y(static_cast<size_t>(N)),
                     y_last(static_cast<size_t>(N));
  BackendParams p = base;
  p.weights = mode;
  p.activations = act;
  p.profiling = false;
  p.self_check = false;
  p.max_tokens = 1;
  p.max_in_elems = K;
  p.max_out_elems = N;
  p.max_width = 64;
  p.resident = {{x.data(), x.size() * sizeof(float)}, {y.data(), y.size() * sizeof(float)}};
  std::unique_ptr<Backend> be = entry.make(p);
  WeightSet set;
  for (const Weight& wc : ws) set.matrices.push_back(&wc);
  be->load_weights(set);

  constexpr int kWarm = 2, kSteps = 10;  // the first steps upload the input and make the recording
  const int32_t pos = 0;
  std::vector<double> us;
  for (int it = 0; it < kWarm + kSteps; ++it) {
    ForwardStep st;
    st.n_tok = 1;
    st.n_logits = 1;
    st.pos = &pos;
    st.decode = true;
    st.same_as_last = it > 0;
    const auto t0 = std::chrono::steady_clock::now();
    be->begin_forward(st);
    for (int c = 0; c < r.copies; ++c)
      be->matmul(ws[size_t(c)], x.data(), 1, c + 1 < r.copies ? y.data() : y_last.data());
    be->end_forward();
    const double t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (it >= kWarm) us.push_back(t / r.copies);
  }
  for (float v : y_last) {
    if (!std::isfinite(v)) fail("gemv-bw: the back-to-back products of {}x{} gave a non-finite value", N, K);
  }
  r.us = bench::stats_of(us).median;
  r.gbs = bytes / (r.us * 1e-6) / 1e9;
  return r;
}

}  // namespace tilellm::cli
