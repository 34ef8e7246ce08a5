// Int4-Block64 (MNN's "int4b64-gemm"): uint4 weight codes with one (scale, offset) per 64 weights along K,
// run as W4A8: each 64-byte group of codes is split into two zmm of 16 channels x 4 k (low and high
// nibbles) and fed to vpdpbusd. The kernel is the shared template in bench/gemm_qkernel.h.
#include "bench/gemm_qkernel.h"

namespace tilellm::gemm {

QuantMatrix quantize_int4(const float* W, int K, int N, int block) {
  return detail::quantize_weights<4>(W, K, N, block);
}

void gemm_q4_tiles(const QuantMatrix& w, const QuantActs& a, float* C, int m0, int m1, int t0, int t1,
                   Isa isa) {
  detail::q_tiles<4>(w, a, C, m0, m1, t0, t1, isa);
}

}  // namespace tilellm::gemm
