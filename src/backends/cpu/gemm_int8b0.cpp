// Int8-Block0 (MNN's "int8b0-gemm"): uint8 weight codes with one (scale, offset) per output channel over
// all of K, run as W8A8 with vpdpbusd. The kernel is the shared template in bench/gemm_qkernel.h.
#include "bench/gemm_qkernel.h"

namespace tilellm::gemm {

QuantMatrix quantize_int8(const float* W, int K, int N, int block) {
  return detail::quantize_weights<8>(W, K, N, block);
}

void gemm_q8_tiles(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1,
                   Isa isa) {
  detail::q_tiles<8>(w, a, C, m0, m1, t0, t1, isa);
}

}  // namespace tilellm::gemm
