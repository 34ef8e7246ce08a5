// 3- and 2-bit weights with one (scale, offset) per block along K (gemv-bw's q3b64 and q2b64 rows), run as
// W3A8 / W2A8: each group of codes becomes four zmm of 16 channels x 4 k (two bits per code from one byte
// plane, plus for 3 bits the third from a 64-bit mask) fed to vpdpbusd. The kernel is the shared template in
// bench/gemm_qkernel.h.
#include "bench/gemm_qkernel.h"

namespace tilellm::gemm {

QuantMatrix quantize_int3(const float* W, int K, int N, int block) {
  return detail::quantize_weights<3>(W, K, N, block);
}

QuantMatrix quantize_int2(const float* W, int K, int N, int block) {
  return detail::quantize_weights<2>(W, K, N, block);
}

void gemm_q3_tiles(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1,
                   Isa isa) {
  detail::q_tiles<3>(w, a, C, m0, m1, t0, t1, isa);
}

void gemm_q2_tiles(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1,
                   Isa isa) {
  detail::q_tiles<2>(w, a, C, m0, m1, t0, t1, isa);
}

}  // namespace tilellm::gemm
