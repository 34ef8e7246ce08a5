// Products of a prompt (several tokens): y [n_tok][n_out] = x [n_tok][n_in] W^T.
//
// Float path (gemm_f32_kernel): tiles of 64 rows x 32 tokens, the weights of one block of 32 inputs formed
// exactly into shared memory (common.cuh row_eight) beside the activations, each thread accumulating 4 rows
// x 2 tokens in float32 on the CUDA cores: the CPU's float path, summed in another order.
//
// Quantized path (gemm_q8_kernel): int8 tensor-core products (mma.sync m16n8k32: a 16 x 32 block of weight
// codes times a 32 x 8 block of activation codes, 32-bit integer sums), one per block of 32 inputs, each
// sum then scaled: y += d dx sum(c q) + m s (kernels.h Q8; matvec.cu says why that is exact). The weights'
// 4-bit codes are nibbles 0..15 (their offsets are in m), INT8B0's bytes unsigned (the u8 x s8 form), the
// rest signed; KQ8's and Q6K's halves of 16 have their own scales (two m16n8k16 products; Q6K's 6-bit
// codes put together from their low and high bits as the fragments are read). A block of 256 threads
// computes 128 rows x 64 tokens (8 warps of 32 x 32); two blocks of 32 inputs a stage, codes and
// activations copied into shared memory asynchronously (cp.async) one stage ahead of the products, the
// (d, m) pairs dequantized into shared memory as floats. Shared rows are padded so that the fragments'
// reads fall into 32 different banks.
#include "common.cuh"

namespace tilellm::cuda {
namespace {

// ---- float path
constexpr int kFRows = 64, kFToks = 32;

template <int F>
__global__ void __launch_bounds__(256) gemm_f32_kernel(Matrix w, const float* x, int n_tok, float* y) {
  __shared__ float ws[kFRows][33];  // [row][k] of one block of 32 inputs (+1: no bank conflicts)
  __shared__ float xs[kFToks][33];  // [token][k]
  griddep_wait();
  griddep_launch_dependents();
  const int tid = threadIdx.x, rg = tid % 16, tg = tid / 16;
  const int row0 = blockIdx.x * kFRows, tok0 = blockIdx.y * kFToks;
  const int n = w.n_in, blocks = (n + 31) / 32;
  float acc[4][2] = {};
  for (int b = 0; b < blocks; ++b) {
    {  // 64 rows x 4 runs of 8 weights: one run a thread
      const int r = tid / 4, p = tid % 4, row = min(row0 + r, w.n_out - 1);
      float v[8];
      row_eight<F>(w.data + size_t(row) * w.row_bytes, n, b, p, v);
#pragma unroll
      for (int k = 0; k < 8; ++k) ws[r][8 * p + k] = v[k];
    }
    for (int e = tid; e < kFToks * 32; e += 256) {
      const int t = e / 32, k = e % 32, i = 32 * b + k;
      xs[t][k] = i < n ? x[size_t(min(tok0 + t, n_tok - 1)) * n + i] : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < 32; ++k) {
      float a[4], c[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = ws[rg + 16 * i][k];
#pragma unroll
      for (int j = 0; j < 2; ++j) c[j] = xs[tg + 16 * j][k];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) acc[i][j] += a[i] * c[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = row0 + rg + 16 * i, t = tok0 + tg + 16 * j;
      if (r < w.n_out && t < n_tok) y[size_t(t) * w.n_out + r] = acc[i][j];
    }
  }
}

// ---- quantized path
constexpr int kRowsQ = 128, kToksQ = 64, kStageBlocks = 2, kThreadsQ = 256;
// Shared strides in 32-bit words: a row of a stage's codes (2 blocks of 16 or 32 bytes; Q6K's 2 blocks of 16
// bytes of low bits, then their 16 bytes of high bits) and a token's activation codes (2 blocks of 32
// bytes), padded (12 = 8 + 4, 20 = 16 + 4 or 12 + 8): the 8 rows a fragment reads then start in 8
// different groups of 4 banks.
template <int F>
constexpr int code_stride() {
  return fmt_nibbles(F) ? 12 : 20;
}
constexpr int kXStride = 20;
// Scale pairs a row has per block: KQ8 and Q6K two (one per half), the others one.
template <int F>
constexpr int pairs_per_block() {
  return fmt_two_pairs(F) ? 2 : 1;
}

template <int F>
struct Stage {
  uint32_t codes[kRowsQ * code_stride<F>()];
  uint32_t xq[kToksQ * kXStride];
  float wd[kRowsQ][kStageBlocks * pairs_per_block<F>()];
  float wm[kRowsQ][kStageBlocks * pairs_per_block<F>()];
  float xd[kToksQ][kStageBlocks];
  float xs[kToksQ][2 * kStageBlocks];  // per half-block
};

// C (16 x 8, int32) = A (16 x 32) B (32 x 8); A's codes unsigned (u8) or signed (s8), B's signed.
template <bool UnsignedA>
__device__ __forceinline__ void mma_k32(const uint32_t a[4], const uint32_t b[2], int c[4]) {
  if constexpr (UnsignedA) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0), "r"(0), "r"(0), "r"(0));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0), "r"(0), "r"(0), "r"(0));
  }
}
// C (16 x 8) = A (16 x 16) B (16 x 8), signed bytes (KQ8's halves).
__device__ __forceinline__ void mma_k16(uint32_t a0, uint32_t a1, uint32_t b, int c[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(b), "r"(0), "r"(0), "r"(0), "r"(0));
}

// Copies stage kb0 / 2 (blocks kb0, kb0 + 1) of the codes and activation codes into `st` (asynchronously),
// and loads its scale pairs into registers (a thread's share: row tid / 2, block tid % 2).
template <int F>
struct StageLoader {
  const Matrix& w;
  const Q8& x;
  int n_tok, row0, tok0, nb;

  __device__ void copy_codes(Stage<F>& st, int kb0) const {
    const int tid = threadIdx.x;
    constexpr int kb = fmt_code_bytes(F);                    // 16 or 32
    constexpr int chunks = kRowsQ * kStageBlocks * kb / 16;  // 16-byte copies
#pragma unroll
    for (int c = tid; c < chunks; c += kThreadsQ) {
      const int per_row = kStageBlocks * kb / 16;
      const int r = c / per_row, part = c % per_row;
      const int blk = part / (kb / 16), half = part % (kb / 16);
      const int b = min(kb0 + blk, nb - 1);  // past the row: any codes (their pairs are zero)
      const uint8_t* src =
          w.data + size_t(min(row0 + r, w.n_out - 1)) * w.row_bytes + size_t(kb) * b + 16 * half;
      cp_async16(&st.codes[r * code_stride<F>() + blk * (kb / 4) + half * 4], src);
    }
    if constexpr (F == kQ6K) {  // the stage's two blocks' high bits: 16 bytes a row, after their low bits
      for (int r = tid; r < kRowsQ; r += kThreadsQ) {
        const uint8_t* src = w.data + size_t(min(row0 + r, w.n_out - 1)) * w.row_bytes + 16 * size_t(nb) +
                             8 * size_t(min(kb0, nb - 2));
        cp_async16(&st.codes[r * code_stride<F>() + 2 * (kb / 4)], src);
      }
    }
    {  // 64 tokens x 2 blocks x 2 halves: one copy a thread
      const int t = tid / 4, blk = (tid / 2) % 2, half = tid % 2;
      const int b = min(kb0 + blk, nb - 1);
      const int8_t* src = x.q + size_t(min(tok0 + t, n_tok - 1)) * (32 * size_t(nb)) + 32 * b + 16 * half;
      cp_async16(&st.xq[t * kXStride + blk * 8 + half * 4], src);
    }
  }

  struct Pairs {
    float d[2], m[2];  // KQ8: both halves; the others: d[0], m[0]
    float xd, xs[2];
  };

  __device__ void load_pairs(int kb0, Pairs& p) const {
    const int tid = threadIdx.x;
    {
      const int r = tid / 2, blk = tid % 2, b = kb0 + blk;
      const uint8_t* row = w.data + size_t(min(row0 + r, w.n_out - 1)) * w.row_bytes;
      if (b < nb) {
        block_pair<F>(row, nb, b, p.d[0], p.m[0]);
        if constexpr (fmt_two_pairs(F)) block_pair2<F>(row, nb, b, p.d[1], p.m[1]);
      } else {
        p.d[0] = p.m[0] = p.d[1] = p.m[1] = 0.0f;  // past the row: contributes nothing
      }
    }
    {  // activation scales: tid < 128 one d; every thread one s (64 tokens x 4 halves)
      const int t = tid / 4, j = tid % 4, b = kb0 + j / 2;
      const size_t tok = size_t(min(tok0 + t, n_tok - 1));
      p.xs[0] = b < nb ? x.s[tok * 2 * nb + 2 * b + j % 2] : 0.0f;
      const int t2 = tid / 2, b2 = kb0 + tid % 2;
      p.xd = b2 < nb ? x.d[size_t(min(tok0 + t2, n_tok - 1)) * nb + b2] : 0.0f;
    }
  }

  __device__ void store_pairs(Stage<F>& st, const Pairs& p) const {
    const int tid = threadIdx.x;
    const int r = tid / 2, blk = tid % 2;
    constexpr int ppb = pairs_per_block<F>();
    st.wd[r][blk * ppb] = p.d[0];
    st.wm[r][blk * ppb] = p.m[0];
    if constexpr (ppb == 2) {
      st.wd[r][blk * ppb + 1] = p.d[1];
      st.wm[r][blk * ppb + 1] = p.m[1];
    }
    st.xs[tid / 4][tid % 4] = p.xs[0];
    if (tid < kToksQ * kStageBlocks) st.xd[tid / 2][tid % 2] = p.xd;
  }
};

template <int F>
__global__ void __launch_bounds__(kThreadsQ, fmt_two_pairs(F) ? 1 : 2)
    gemm_q8_kernel(Matrix w, Q8 x, int n_tok, float* y) {
  extern __shared__ __align__(16) unsigned char smem[];
  griddep_wait();
  griddep_launch_dependents();
  Stage<F>* stages = reinterpret_cast<Stage<F>*>(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp % 4, wn = warp / 4;  // the warp's 32 rows and 32 tokens within the block's tile
  // Token tiles vary fastest, so the blocks that read the same weights run together (L2 reuse).
  const int row0 = blockIdx.y * kRowsQ, tok0 = blockIdx.x * kToksQ;
  const int nb = w.n_in / 32, n_stages = (nb + kStageBlocks - 1) / kStageBlocks;
  const StageLoader<F> ld{w, x, n_tok, row0, tok0, nb};
  constexpr int S = code_stride<F>();

  float acc[2][4][4] = {};  // [m-tile][n-tile][c0..c3]
  typename StageLoader<F>::Pairs pairs;
  ld.copy_codes(stages[0], 0);
  cp_async_commit();
  ld.load_pairs(0, pairs);
  ld.store_pairs(stages[0], pairs);
  for (int s = 0; s < n_stages; ++s) {
    Stage<F>& st = stages[s & 1];
    const bool more = s + 1 < n_stages;
    if (more) {
      ld.copy_codes(stages[(s + 1) & 1], (s + 1) * kStageBlocks);
      cp_async_commit();
      ld.load_pairs((s + 1) * kStageBlocks, pairs);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
#pragma unroll
    for (int blk = 0; blk < kStageBlocks; ++blk) {
      uint32_t a[2][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int r = 32 * wm + 16 * mi + g;
        if constexpr (F == kQ6K) {
          // a[0], a[1]: the first halves' code bytes of rows r, r + 8; a[2], a[3]: the second halves'.
          const uint32_t w0 = st.codes[r * S + blk * 4 + t], w1 = st.codes[(r + 8) * S + blk * 4 + t];
          const uint32_t* h0 = &st.codes[r * S + 8 + 2 * blk];
          const uint32_t* h1 = &st.codes[(r + 8) * S + 8 + 2 * blk];
          a[mi][0] = q6k_word(w0, h0[0], t, 0);
          a[mi][1] = q6k_word(w1, h1[0], t, 0);
          a[mi][2] = q6k_word(w0, h0[1], t, 1);
          a[mi][3] = q6k_word(w1, h1[1], t, 1);
        } else if constexpr (fmt_nibbles(F)) {
          const uint32_t w0 = st.codes[r * S + blk * 4 + t], w1 = st.codes[(r + 8) * S + blk * 4 + t];
          a[mi][0] = w0 & 0x0F0F0F0Fu;
          a[mi][1] = w1 & 0x0F0F0F0Fu;
          a[mi][2] = (w0 >> 4) & 0x0F0F0F0Fu;
          a[mi][3] = (w1 >> 4) & 0x0F0F0F0Fu;
        } else {
          a[mi][0] = st.codes[r * S + blk * 8 + t];
          a[mi][1] = st.codes[(r + 8) * S + blk * 8 + t];
          a[mi][2] = st.codes[r * S + blk * 8 + 4 + t];
          a[mi][3] = st.codes[(r + 8) * S + blk * 8 + 4 + t];
        }
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int n = 32 * wn + 8 * ni + g;
        b[ni][0] = st.xq[n * kXStride + blk * 8 + t];
        b[ni][1] = st.xq[n * kXStride + blk * 8 + 4 + t];
      }
      // The scales of the thread's 4 rows (m-tile mi, row g + 8h) and 8 tokens (n-tile ni, token 2t + e).
      constexpr int ppb = pairs_per_block<F>();
      float wd[2][2][ppb], wmv[2][2][ppb], xd[4][2], xs[4][2][ppb];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = 32 * wm + 16 * mi + g + 8 * h;
#pragma unroll
          for (int k = 0; k < ppb; ++k) {
            wd[mi][h][k] = st.wd[r][blk * ppb + k];
            wmv[mi][h][k] = st.wm[r][blk * ppb + k];
          }
        }
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int tok = 32 * wn + 8 * ni + 2 * t + e;
          xd[ni][e] = st.xd[tok][blk];
          if constexpr (ppb == 2) {
            xs[ni][e][0] = st.xs[tok][2 * blk];
            xs[ni][e][1] = st.xs[tok][2 * blk + 1];
          } else {
            xs[ni][e][0] = st.xs[tok][2 * blk] + st.xs[tok][2 * blk + 1];
          }
        }
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          if constexpr (fmt_two_pairs(F)) {
            int c0[4], c1[4];
            mma_k16(a[mi][0], a[mi][1], b[ni][0], c0);
            mma_k16(a[mi][2], a[mi][3], b[ni][1], c1);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int h = e / 2, k = e & 1;
              acc[mi][ni][e] += wd[mi][h][0] * xd[ni][k] * small_int_to_float(c0[e]) +
                                wmv[mi][h][0] * xs[ni][k][0] +
                                wd[mi][h][ppb - 1] * xd[ni][k] * small_int_to_float(c1[e]) +
                                wmv[mi][h][ppb - 1] * xs[ni][k][ppb - 1];
            }
          } else {
            int c[4];
            mma_k32<!fmt_signed(F)>(a[mi], b[ni], c);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int h = e / 2, k = e & 1;
              acc[mi][ni][e] = fmaf(small_int_to_float(c[e]), wd[mi][h][0] * xd[ni][k],
                                    fmaf(wmv[mi][h][0], xs[ni][k][0], acc[mi][ni][e]));
            }
          }
        }
      }
    }
    __syncthreads();  // the stage is read; the next copies may overwrite it
    if (more) ld.store_pairs(stages[(s + 1) & 1], pairs);
  }
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + 32 * wm + 16 * mi + g + 8 * (e / 2),
                  tok = tok0 + 32 * wn + 8 * ni + 2 * t + (e & 1);
        if (r < w.n_out && tok < n_tok) y[size_t(tok) * w.n_out + r] = acc[mi][ni][e];
      }
    }
  }
}

}  // namespace

void matmul_f32(const Matrix& w, const float* x, int n_tok, float* y, cudaStream_t s) {
  if (w.n_out <= 0 || n_tok <= 0) return;
  const dim3 grid(ceil_div(w.n_out, kFRows), ceil_div(n_tok, kFToks));
  with_format(w.fmt, [&]<int F>() { launch_pdl(gemm_f32_kernel<F>, grid, 256, 0, s, w, x, n_tok, y); });
}

void matmul_q8(const Matrix& w, const Q8& x, int n_tok, float* y, cudaStream_t s) {
  if (w.n_out <= 0 || n_tok <= 0) return;
  const dim3 grid(ceil_div(n_tok, kToksQ), ceil_div(w.n_out, kRowsQ));
  with_format(w.fmt, [&]<int F>() {
    if constexpr (fmt_block(F)) {
      const size_t shared = 2 * sizeof(Stage<F>);
      launch_pdl(gemm_q8_kernel<F>, grid, kThreadsQ, shared, s, w, x, n_tok, y);
    }
  });
}

}  // namespace tilellm::cuda
