// Decode products of a few tokens (2 .. kMatvecTokens): y_t = W x_t for every token t, each weight read
// once for all of them — a batch decode step (one token for each of several sequences, serve's slots) or
// a short prompt chunk. The prompt GEMM (matmul.cu) would read the weights once too, but its tiles of 64
// tokens spend most of their work on absent tokens here and its launch sizes are a prompt's.
//
// The arithmetic is the one-token quantized path's (matvec.cu): the activations as int8 blocks of 32
// (kernels.h Q8), a weight block times an activation block as dp4a integer dot products, the block's sum
// scaled once. A warp takes 2 rows of a matrix (4 above 4 tokens); lane l takes blocks l, l + 32, ... of
// each, a few blocks a round loaded before any is used (the first round before waiting for the kernel that
// writes the activations: common.cuh, programmatic dependent launch), and each loaded block meets the same
// block of every token. The activations are read from global memory (through L1, which the block's 4 warps
// share): n_tok rows of n_in bytes may not fit in shared memory for the widest products. A job of several
// matrices of one format sharing the input (q/k/v; gate and up) is one launch, its blocks numbered matrix
// after matrix.
#include "block_dot.cuh"
#include "common.cuh"

namespace tilellm::cuda {
namespace {

constexpr int kWarps = 4;  // warps of a block

// Rows of a matrix a warp takes: 4 above 4 tokens, so that each activation block read (from L1, the limit
// at 8 tokens) meets 4 rows' blocks.
constexpr int rows_for(int tokens) {
  return tokens > 4 ? 4 : 2;
}

// T: the most tokens the launch takes (n_tok <= T; the accumulators are T x kRows registers).
template <int F, int T>
__global__ void __launch_bounds__(128) matvec_tokens_kernel(MatvecJob job, JobLayout lay, Q8 x) {
  constexpr int kRows = rows_for(T);
  // Blocks of 32 a lane loads in one round: 128 bytes of 4-bit codes in flight a lane, or as many byte
  // codes.
  constexpr int kUnroll = (fmt_nibbles(F) ? 8 : 4) / kRows;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  griddep_launch_dependents();
  int mi = 0;
  while (mi + 1 < job.n && int(blockIdx.x) >= lay.first[mi + 1]) ++mi;
  const int r0 = (int(blockIdx.x) - lay.first[mi]) * kWarps * kRows + warp * kRows;
  // The matrix by a select, not an index into the parameters (which would copy them to local memory).
  const Matrix w = mi == 0 ? job.w[0] : mi == 1 ? job.w[1] : job.w[2];
  float* const y = mi == 0 ? job.y[0] : mi == 1 ? job.y[1] : job.y[2];
  if (r0 >= w.n_out) return;  // writes nothing, so it need not wait for the kernel before
  const int n_in = w.n_in, nb = n_in / 32, n_tok = job.n_tok;
  const uint8_t* rows[kRows];
#pragma unroll
  for (int k = 0; k < kRows; ++k) rows[k] = w.data + size_t(min(r0 + k, w.n_out - 1)) * w.row_bytes;
  Codes<F> c[kUnroll][kRows];
  float dw[kUnroll][kRows], mw[kUnroll][kRows], dw2[kUnroll][kRows], mw2[kUnroll][kRows];
  auto load_round = [&](int b0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int b = b0 + 32 * u;
      if (b < nb) {
#pragma unroll
        for (int k = 0; k < kRows; ++k) {
          load_codes<F>(rows[k], nb, b, c[u][k]);
          block_pair<F>(rows[k], nb, b, dw[u][k], mw[u][k]);
          if constexpr (fmt_two_pairs(F)) block_pair2<F>(rows[k], nb, b, dw2[u][k], mw2[u][k]);
        }
      }
    }
  };
  load_round(lane);  // weights: written by no kernel
  griddep_wait();
  float acc[T][kRows];
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int k = 0; k < kRows; ++k) acc[t][k] = 0.0f;
  for (int b0 = lane;;) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int b = b0 + 32 * u;
      if (b >= nb) break;
#pragma unroll
      for (int t = 0; t < T; ++t) {
        if (t >= n_tok) break;
        const uint4* xq = reinterpret_cast<const uint4*>(x.q + size_t(t) * n_in + 32 * b);
        const uint4 xa = xq[0], xb = xq[1];
        const float dx = x.d[t * nb + b], s0 = x.s[2 * (t * nb + b)], s1 = x.s[2 * (t * nb + b) + 1];
#pragma unroll
        for (int k = 0; k < kRows; ++k) {
          int lo, hi;
          block_dot<F>(c[u][k], xa, xb, lo, hi);
          if constexpr (fmt_two_pairs(F))
            acc[t][k] += dw[u][k] * dx * small_int_to_float(lo) + mw[u][k] * s0 +
                         dw2[u][k] * dx * small_int_to_float(hi) + mw2[u][k] * s1;
          else
            acc[t][k] += dw[u][k] * dx * small_int_to_float(lo + hi) + mw[u][k] * (s0 + s1);
        }
      }
    }
    b0 += 32 * kUnroll;
    if (b0 >= nb) break;
    load_round(b0);
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
    if (t >= n_tok) break;
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const float v = warp_sum(acc[t][k]);
      if (lane == 0 && r0 + k < w.n_out) y[size_t(t) * w.n_out + r0 + k] = v;
    }
  }
}

}  // namespace

void matvec_tokens_q8(const MatvecJob& job, const Q8& x, cudaStream_t s) {
  if (job.n_tok <= 0) return;
  auto go = [&](auto kernel, int rows) {
    JobLayout lay{};
    for (int i = 0; i < job.n; ++i)
      lay.first[i + 1] = lay.first[i] + int(ceil_div(job.w[i].n_out, kWarps * rows));
    const unsigned blocks = unsigned(lay.first[job.n]);
    if (blocks > 0) launch_pdl(kernel, blocks, 32 * kWarps, 0, s, job, lay, x);
  };
  with_format(job.w[0].fmt, [&]<int F>() {
    if constexpr (fmt_block(F)) {
      if (job.n_tok <= 4)
        go(matvec_tokens_kernel<F, 4>, rows_for(4));
      else
        go(matvec_tokens_kernel<F, kMatvecTokens>, rows_for(kMatvecTokens));
    }
  });
}

}  // namespace tilellm::cuda
