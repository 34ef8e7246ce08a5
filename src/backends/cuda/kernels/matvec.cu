// Decode products (one token): y = W x.
//
// Float path (matvec_f32_kernel): a warp per row, each lane taking runs of 8 consecutive weights formed
// exactly (common.cuh row_eight) times the float activations; the CPU's float path, summed in another order.
// A lane loads four runs before using any, the first before waiting for the kernel before (as below). The
// F16 and F32 weights of the quantized path take this one too, except F16 rows of whole runs, which are
// streamed (matvec_f16_stream_kernel, below the streamed path).
//
// Quantized path (matvec_q8_kernel; KQ8, whose blocks have two (d, m) pairs): the activations as
// int8 blocks of 32 (kernels.h Q8), a block of weights times a block of activations as integer dot products
// (dp4a: four int8 products and their sum per instruction) and the block's sum scaled once: sum_j (d c_j + m)
// (dx q_j) = d dx sum_j c_j q_j + m dx sum_j q_j, the last factor s from the quantization. Lane l of a warp
// takes blocks l, l + 32, ... of every row of the warp (so a warp reads 512 contiguous code bytes of a row at
// once and each lane's activation block serves all its rows; the activations are copied into shared memory
// once a block of 4 warps); a few blocks a lane are loaded before any is used, so that enough bytes are in
// flight to cover the memory's latency — and the first of them before waiting for the kernel that writes the
// activations (common.cuh: programmatic dependent launch), so that in decode the weights stream while the
// norms, RoPE and attention before them run; the rows' sums are reduced across the warp at the end. In the
// 4-bit formats (the streamed path's) code word t of a block holds weights 4t .. 4t+3 in its low nibbles,
// which meet activation bytes 4t .. 4t+3, and 16 + 4t .. 16 + 4t + 3 in its high nibbles (common.cuh). A job
// of several matrices (q/k/v) is one launch: its blocks are numbered matrix after matrix. A GLU job (gate,
// up) gives each warp the same rows of both and writes act(gate) * up.
//
// Streamed path (matvec_stream_kernel; the 4-bit formats Q4_0, Q4_1, INT4B64, KQ4, Q4_K and the byte
// formats Q8_0, INT8B0, and Q6K): the register-round kernel above reads 4-bit rows at ~2.2-2.3 TB/s on an
// H200 (of ~4.4 a plain read reaches): each warp loads its rows' one round, waits, sums and leaves, so the
// memory idles between a block's end and the next one's loads, and at only 1 to 3 waves of blocks the whole
// grid does so in step. Here a grid of one wave of blocks (as many as fit the GPU at once) keeps its warps:
// warp w takes the groups of R rows w, w + warps, ... and walks them round by round (kRoundOf blocks of 32 a
// lane a round: 32 code bytes, Q6K's 24), each round's codes and raw scale bytes loaded into one of two
// register buffers before the other buffer is used — the scales converted only when used, so that nothing
// waits on the loads just issued; before the wait for the kernel before, the first round (single-row
// products: the first two, both buffers). Q4_K's 20-byte super-block headers are loaded one word a lane and
// handed out by shuffles (q4k_pair), one load a round where block_pair makes three a block. R is 2 when the
// job has a pair of rows for every warp slot of the GPU, else 1 (the activations then read through L1 rather
// than copied into shared memory first). A round costs few instructions: the group's row pointers are found
// when the group changes, not every round; the high nibbles are dotted in place, masked but not shifted
// (block_dot16: sixteen times their sum, the 1/16 folded into the activations' scale); a block's activation
// scale and sum come as one float2 from shared memory; the weights are streaming (evict-first) global loads.
// On an H100 that gave 7B Q4_0 decode +1-2% (docs/PERF.md 2026-12-05 16:27-16:50): the warps wait mostly on
// their loads (ncu: long scoreboard ~62% of the cycles between instructions). Deeper rings of rounds copied
// into shared memory (cp.async, 3-6 stages a warp) lost 10-20% there. Measured on an H200, Llama-7B-shaped
// layers as a decode step launches them (docs/PERF.md 2026-12-04 05:59-06:33): Q4_0 2.65 TB/s against 2.34,
// Q4_K 2.53 against 2.17; pairs against single rows: q/k/v 3.4 against 2.9 TB/s, the 4096-row o and down 2.1
// and 2.5 against 2.3 and 2.9. The byte formats (8 bytes of codes per dp4a pair) reached 3.3 TB/s there in
// the register-round kernel and stayed in it until measured here on an H100 (docs/PERF.md 2026-12-06 09:13):
// back to back INT8B0 +6-17% (the 4096 x 11008 down product 67 -> 79% of the copy), Q8_0 -3 to +11%, 7B Q8_0
// decode 313.8 -> 326.0 t/s; Q6K there (its codes centred in integers, q6k_centered_dot) took the output
// matrix from 59-60 to 65-68% (docs/PERF.md 09:22). The register-round kernel keeps KQ8.
//
// The residual add and RMSNorm between products (MatvecJob::residual and ::norm, --cuda-fuse-norm): a
// single-row product adds each row into the residual as it writes it, and a pair product forms the norm of
// that residual itself, every block into its shared memory in the row kernel's order (norm_activations),
// instead of copying activations that an add_rmsnorm launch rounded.
#include <algorithm>
#include <atomic>

#include "block_dot.cuh"
#include "common.cuh"

namespace tilellm::cuda {
namespace {

constexpr int kWarps = 4;  // warps of a block
constexpr int kRows = 2;   // rows of each matrix a warp takes

template <int F>
__global__ void __launch_bounds__(128) matvec_f32_kernel(Matrix w, const float* x, float* y) {
  // Runs of 8 a lane loads before using any: 64 bytes of F16 weights in flight a lane (a third of the
  // memory's bandwidth with one run at a time).
  constexpr int kU = 4;
  griddep_launch_dependents();
  const int lane = threadIdx.x & 31;
  const int r = int(blockIdx.x) * kWarps + int(threadIdx.x >> 5);
  if (r >= w.n_out) return;  // writes nothing, so it need not wait for the kernel before
  const uint8_t* row = w.data + size_t(r) * w.row_bytes;
  const int n = w.n_in, runs = (n + 7) / 8;
  float v[kU][8];
  auto load_round = [&](int c0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int c = c0 + 32 * u;
      if (c < runs) row_eight<F>(row, n, c / 4, c % 4, v[u]);
    }
  };
  load_round(lane);  // weights: written by no kernel, so loaded before the wait
  griddep_wait();
  const bool x_vec = n % 8 == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  float acc = 0.0f;
  for (int c0 = lane; c0 < runs; c0 += 32 * kU) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int c = c0 + 32 * u;
      if (c >= runs) break;
      if (x_vec) {
        const float4 a = reinterpret_cast<const float4*>(x)[2 * c],
                     b = reinterpret_cast<const float4*>(x)[2 * c + 1];
        acc += v[u][0] * a.x + v[u][1] * a.y + v[u][2] * a.z + v[u][3] * a.w + v[u][4] * b.x + v[u][5] * b.y +
               v[u][6] * b.z + v[u][7] * b.w;
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const int i = 8 * c + k;
          if (fmt_block(F) || i < n) acc += v[u][k] * x[i];
        }
      }
    }
    if (c0 + 32 * kU < runs) load_round(c0 + 32 * kU);
  }
  acc = warp_sum(acc);
  if (lane == 0) y[r] = acc;
}

// The activations (one token of n_in, Q8) into shared memory by the block's threads: q [n_in], then
// Pairs false: d [n_in / 32] and s [n_in / 16] as floats; Pairs true: (d, s0 + s1) [n_in / 32] as float2,
// one load a block where only the sum of its halves is used (the streamed 4-bit products).
template <bool Pairs>
__device__ __forceinline__ void copy_activations(const Q8& x, int n_in, unsigned char* xs) {
  const int nb = n_in / 32;
  const uint4* src = reinterpret_cast<const uint4*>(x.q);
  uint4* dst = reinterpret_cast<uint4*>(xs);
  for (int i = threadIdx.x; i < n_in / 16; i += blockDim.x) dst[i] = src[i];
  if constexpr (Pairs) {
    float2* ds = reinterpret_cast<float2*>(xs + n_in);
    for (int i = threadIdx.x; i < nb; i += blockDim.x)
      ds[i] = make_float2(x.d[i], x.s[2 * i] + x.s[2 * i + 1]);
  } else {
    float* d = reinterpret_cast<float*>(xs + n_in);
    for (int i = threadIdx.x; i < 3 * nb; i += blockDim.x) d[i] = i < nb ? x.d[i] : x.s[i - nb];
  }
}

// A GLU job's rounding of its output (MatvecJob::out_q8): once this block's rows are written, its count of
// the block of 32 rows they lie in goes up (a block's 8 rows lie in one such block); the block whose count
// completes it reads the 32 values (written by other blocks: made visible by their fences, read past L1)
// and rounds them, then sets the counter back to zero for the next launch.
__device__ __forceinline__ void quantize_rows_when_complete(const MatvecJob& job, const float* y, int r0,
                                                            int n_out) {
  __shared__ int last;
  __threadfence();  // each writer's rows before the count
  __syncthreads();
  const int block0 = int(blockIdx.x) * 8;  // the block's first row (4 warps x 2 rows)
  const int b32 = block0 / 32;
  if (threadIdx.x == 0) {
    const int writers = (min(32, n_out - 32 * b32) + 7) / 8;  // blocks of 8 rows in this block of 32
    last = atomicAdd(&job.counters[b32], 1) == writers - 1;
    if (last) job.counters[b32] = 0;
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  __threadfence();
  const int r = 32 * b32 + int(threadIdx.x);
  quantize_block(__ldcg(y + r), r, b32, job.out_q8);
  (void)r0;
}

template <int F, int Glu>
__global__ void __launch_bounds__(128, Glu >= 0 ? 3 : 4)
    matvec_q8_kernel(MatvecJob job, JobLayout lay, Q8 x) {
  constexpr int kMats = Glu >= 0 ? 2 : 1;  // matrices a warp reads (gate and up for a GLU)
  constexpr int kN = kRows * kMats;        // rows a warp reads
  // Blocks of 32 a lane loads in one round: at most 4 (a row of 4096 inputs is one round) and 64 registers
  // of codes (256 bytes in flight a lane); more would cost occupancy for nothing on rows up to 4096.
  constexpr int kUnroll = 16 / (kN * (fmt_nibbles(F) ? 1 : 2)) < 4 ? 16 / (kN * (fmt_nibbles(F) ? 1 : 2)) : 4;
  extern __shared__ __align__(16) unsigned char xs[];  // the activations: q [n_in], d [nb], s [2 nb]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  griddep_launch_dependents();
  int mi = 0;
  if constexpr (Glu < 0) {
    while (mi + 1 < job.n && int(blockIdx.x) >= lay.first[mi + 1]) ++mi;
  }
  const int r0 = (int(blockIdx.x) - lay.first[mi]) * kWarps * kRows + warp * kRows;
  // The matrix by a select, not an index into the parameters (which would copy them to local memory).
  const Matrix w0 = mi == 0 ? job.w[0] : mi == 1 ? job.w[1] : job.w[2];
  float* const y = mi == 0 ? job.y[0] : mi == 1 ? job.y[1] : job.y[2];
  const bool active = r0 < w0.n_out;  // a warp past the rows still takes part in the block's copy of x
  const int n_in = w0.n_in, nb = n_in / 32;
  const uint8_t* rows[kN];
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    const Matrix& w = Glu >= 0 && k >= kRows ? job.w[1] : w0;
    rows[k] = w.data + size_t(min(r0 + k % kRows, w.n_out - 1)) * w.row_bytes;
  }
  Codes<F> c[kUnroll][kN];
  float dw[kUnroll][kN], mw[kUnroll][kN], dw2[kUnroll][kN], mw2[kUnroll][kN];
  auto load_round = [&](int b0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int b = b0 + 32 * u;
      if (active && b < nb) {
#pragma unroll
        for (int k = 0; k < kN; ++k) {
          load_codes<F>(rows[k], nb, b, c[u][k]);
          block_pair<F>(rows[k], nb, b, dw[u][k], mw[u][k]);
          if constexpr (fmt_two_pairs(F)) block_pair2<F>(rows[k], nb, b, dw2[u][k], mw2[u][k]);
        }
      }
    }
  };
  // The weights of the first round before waiting for the kernel that writes the activations: no kernel
  // writes weights, so their loads overlap that kernel's end.
  load_round(lane);
  griddep_wait();
  copy_activations<false>(x, n_in, xs);
  __syncthreads();
  const float* xd = reinterpret_cast<const float*>(xs + n_in);
  const float* xsum = xd + nb;
  float acc[kN];
#pragma unroll
  for (int k = 0; k < kN; ++k) acc[k] = 0.0f;
  for (int b0 = lane; active;) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int b = b0 + 32 * u;
      if (b < nb) {
        const uint4* xq = reinterpret_cast<const uint4*>(xs + 32 * b);
        const uint4 xa = xq[0], xb = xq[1];
        const float dx = xd[b], s0 = xsum[2 * b], s1 = xsum[2 * b + 1];
#pragma unroll
        for (int k = 0; k < kN; ++k) {
          int lo, hi;
          block_dot<F>(c[u][k], xa, xb, lo, hi);
          if constexpr (fmt_two_pairs(F)) {
            acc[k] += dw[u][k] * dx * float(lo) + mw[u][k] * s0 + dw2[u][k] * dx * float(hi) + mw2[u][k] * s1;
          } else {
            acc[k] += dw[u][k] * dx * float(lo + hi) + mw[u][k] * (s0 + s1);
          }
        }
      }
    }
    b0 += 32 * kUnroll;
    if (b0 >= nb) break;
    load_round(b0);
  }
#pragma unroll
  for (int k = 0; k < kN; ++k) acc[k] = warp_sum(acc[k]);
  if (active && lane == 0) {
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const int r = r0 + k;
      if (r >= w0.n_out) break;
      if constexpr (Glu >= 0)
        y[r] = glu_act(acc[k], Glu) * acc[kRows + k];
      else
        y[r] = acc[k];
    }
  }
  if constexpr (Glu >= 0) {
    if (job.out_q8.q) quantize_rows_when_complete(job, y, r0, w0.n_out);
  }
}

// ---- streamed path

constexpr bool streamed(int f) {
  return fmt_nibbles(f) || f == kQ8_0 || f == kInt8B0 || f == kQ6K;
}

// Blocks of 32 a lane loads a round, per row: 2 of the 4-bit formats, 1 of the others, so that a round is 32
// code bytes a lane (Q6K's 24) and no kernel spills registers (Q6K with 2 did, 64-212 bytes a thread).
template <int F>
constexpr int kRoundOf = fmt_nibbles(F) ? 2 : 1;
constexpr int kStreamWarps = 8;  // warps of a block

// Q4_K's pairs of the 32 blocks of a round (4 super-blocks, whose 20-byte headers lanes 0..19 loaded as
// five words each: word w of super-block s in lane 5 s + w): lane l gets block l's, D sc[l % 8] and
// -Dmin mn[l % 8] as block_pair forms them. Every lane of the warp takes part (shuffles).
__device__ __forceinline__ void q4k_pair(uint32_t words, float& d, float& m) {
  const int lane = threadIdx.x & 31, sb = lane >> 3, j = lane & 7, sh = 8 * (j & 3);
  const uint32_t h = __shfl_sync(0xffffffffu, words, 5 * sb);
  const uint32_t sc = __shfl_sync(0xffffffffu, words, 5 * sb + 1 + (j >> 2));
  const uint32_t mn = __shfl_sync(0xffffffffu, words, 5 * sb + 3 + (j >> 2));
  d = __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xffffu))) *
      small_int_to_float(int((sc >> sh) & 255u));
  m = -(__half2float(__ushort_as_half(static_cast<unsigned short>(h >> 16))) *
        small_int_to_float(int((mn >> sh) & 255u)));
}

template <int F>
__device__ __forceinline__ void pair_of(uint2 r, float& d, float& m) {
  if constexpr (F == kKq4) {
    d = __uint_as_float(r.x);
    m = __uint_as_float(r.y);
  } else {
    d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.x & 0xffffu)));
    m = F == kQ4_0   ? -8.0f * d
        : F == kQ8_0 ? 0.0f
                     : __half2float(__ushort_as_half(static_cast<unsigned short>(r.x >> 16)));
  }
}

// Q6K's block dot product: a code word t's bytes c - 32 as signed bytes (c < 64: (c | 128) - 32 borrows from
// no other byte, and flipping bit 7 makes c + 96 the two's complement c - 32), so the weight's offset needs
// no activation sum: lo, hi = sum (c_j - 32) q_j over each half of 16, whose scales then multiply them in
// integers (|sc lo| + |sc hi| <= 2 * 128 * 16 * 32 * 127 < 2^24: exact as a float).
__device__ __forceinline__ int q6k_centered_dot(const Codes<kQ6K>& c, const uint4& xa, const uint4& xb,
                                                uint32_t scales) {
  int lo = 0, hi = 0;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const uint32_t w = word(c.v[0], t);
    const uint32_t a = ((q6k_word(w, c.v[1].x, t, 0) | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
    const uint32_t b = ((q6k_word(w, c.v[1].y, t, 1) | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
    lo = __dp4a(int(a), int(word(xa, t)), lo);
    hi = __dp4a(int(b), int(word(xb, t)), hi);
  }
  return int(int8_t(scales & 255u)) * lo + int(int8_t(scales >> 8)) * hi;
}

// Block b's (d, m) pair as loaded (converted by pair_of when used), through the streaming cache path:
// the weights are read once a step, so their lines are the first L2 gives up (the activations, the KV
// cache and the next kernels' inputs stay).
template <int F>
__device__ __forceinline__ uint2 raw_pair(const uint8_t* row, int nb, int b) {
  if constexpr (F == kQ4_0)
    return {__ldcs(reinterpret_cast<const unsigned short*>(row + 16 * nb + 2 * b)), 0u};
  else if constexpr (F == kQ4_1)
    return {__ldcs(reinterpret_cast<const unsigned int*>(row + 16 * nb + 4 * b)), 0u};
  else if constexpr (F == kInt4B64)
    return {__ldcs(reinterpret_cast<const unsigned int*>(row + 16 * nb + 4 * (b / 2))), 0u};
  else if constexpr (F == kQ8_0)
    return {__ldcs(reinterpret_cast<const unsigned short*>(row + 32 * nb + 2 * b)), 0u};
  else if constexpr (F == kInt8B0)  // one pair a row: the warp's lanes read one word, kept in L1
    return {__ldg(reinterpret_cast<const unsigned int*>(row + 32 * nb)), 0u};
  else if constexpr (F == kQ6K) {  // the super-block's d, and the block's two scales
    const uint8_t* p = row + 24 * nb + 20 * (b / 8);
    return {__ldcs(reinterpret_cast<const unsigned short*>(p)),
            __ldcs(reinterpret_cast<const unsigned short*>(p + 2 + 2 * (b % 8)))};
  } else  // kKq4
    return __ldcs(reinterpret_cast<const uint2*>(row + 16 * nb + 8 * b));
}

// acc + d dx sum + m s, every rounding explicit: a plain expression is contracted into fused multiply-adds
// as the compiler sees fit in each kernel's shape, so a GLU job's sums could differ from the same rows'
// products one by one in the last bit (tests/cuda/test_cuda_ops.cpp compares them).
__device__ __forceinline__ float add_block(float acc, float d, float dx, int sum, float m, float s) {
  return __fadd_rn(acc, __fmaf_rn(__fmul_rn(d, dx), float(sum), __fmul_rn(m, s)));
}

// A GLU job's rounding of its output (MatvecJob::out_q8), after the warp has written the rows of all its
// groups (first, first + stride, ... below groups; R rows each, from its lane 0; R divides 32): its count
// of each block of 32 rows it wrote into goes up (a lane a group), and the warp whose count completes a
// block rounds it, reading the other warps' rows past L1 (made visible by their fences). Counted once at
// the end of the walk, not after each group: a fence waits for every load of the warp in flight, which
// mid-walk are the next rounds' weights (H200, docs/PERF.md 2026-12-07 13:26: decode +1.7-3.8%).
template <int R>
__device__ __forceinline__ void round_blocks_when_complete(const MatvecJob& job, const float* y, int n_out,
                                                           int first, int stride, int groups) {
  const int lane = threadIdx.x & 31;
  __syncwarp();
  __threadfence();  // lane 0's rows before any lane's count
  for (int g0 = first; g0 < groups; g0 += 32 * stride) {
    const int gg = g0 + lane * stride;
    int last = 0, b32 = 0;
    if (gg < groups) {
      const int r0 = gg * R;
      const int rows = min(R, n_out - r0);
      b32 = r0 / 32;
      last = atomicAdd(&job.counters[b32], rows) + rows == min(32, n_out - 32 * b32);
      if (last) job.counters[b32] = 0;  // for the next launch
    }
    unsigned done = __ballot_sync(0xffffffffu, last);
    if (done) {
      __threadfence();  // the counts seen before the other warps' rows are read
      __syncwarp();
    }
    while (done) {
      const int b = __shfl_sync(0xffffffffu, b32, __ffs(done) - 1);
      done &= done - 1;
      const int r = 32 * b + lane;
      quantize_block(__ldcg(y + r), r, b, job.out_q8);
    }
  }
}

// A job's input norm (MatvecJob::norm) in its own launch. Its weights follow the activations in shared
// memory, at norm_weights_at(n_in) bytes, copied there before the wait (no kernel writes them).
__host__ __device__ constexpr int norm_weights_at(int n_in) {
  return (n_in + 12 * (n_in / 32) + 15) / 16 * 16;
}
__device__ __forceinline__ void stage_norm_weights(const MatvecNorm& nm, int n_in, unsigned char* xs) {
  float* wsh = reinterpret_cast<float*>(xs + norm_weights_at(n_in));
  for (int i = threadIdx.x; i < n_in / 4; i += blockDim.x) cp_async16(wsh + 4 * i, nm.w + 4 * i);
  cp_async_commit();
}

// The norm of nm.acc as copy_activations<true> would find it in x after rmsnorm.cu's kernel had rounded it:
// codes and (d, s0 + s1) pairs into xs, the same bits. rmsnorm4_kernel runs T = rmsnorm4_threads(n)
// threads, thread vt summing the squares of float4s vt, vt + T, ... in turn, each warp's sums reduced by
// warp_sum and the warps' in lane order; this block of 256 plays its threads four at a time (thread t as
// vt = t, t + 256, ...: the same warps), then forms and rounds the output as that kernel does, eight
// consecutive lanes a block of 32. Block 0 also writes the norm (nm.y) and its rounding (nm.q8).
__device__ void norm_activations(const MatvecNorm& nm, int n, unsigned char* xs) {
  constexpr int kPlay = 4;  // threads of the row kernel each thread plays
  static_assert(32 * kStreamWarps * kPlay >= 1024, "the block plays every thread of the row kernel");
  __shared__ float red[32];
  const int n4 = n / 4, T = rmsnorm4_threads(n), lane = threadIdx.x & 31, B = blockDim.x;
  const float4* a4 = reinterpret_cast<const float4*>(nm.acc);
  float4 f[kPlay];
#pragma unroll
  for (int k = 0; k < kPlay; ++k) {  // every first float4 at once: one trip to memory
    const int vt = threadIdx.x + k * B;
    f[k] = vt < T && vt < n4 ? a4[vt] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
#pragma unroll
  for (int k = 0; k < kPlay; ++k) {
    const int vt = threadIdx.x + k * B;
    float ss = 0.0f;
    if (vt < T && vt < n4) {
      ss += sq4(f[k]);
      for (int i = vt + T; i < n4; i += T) ss += sq4(a4[i]);
    }
    ss = warp_sum(ss);  // uniform: B and T are whole warps
    if (lane == 0 && vt < T) red[vt >> 5] = ss;
  }
  cp_async_wait<0>();  // the norm weights (stage_norm_weights)
  __syncthreads();
  const float ss = warp_sum(lane < T / 32 ? red[lane] : 0.0f);
  const float inv = 1.0f / sqrtf(ss / float(n) + nm.eps);
  const float4* w4 = reinterpret_cast<const float4*>(xs + norm_weights_at(n));
  float2* xds = reinterpret_cast<float2*>(xs + n);
  const bool writer = blockIdx.x == 0;
  for (int i0 = 0; i0 < n4; i0 += B) {  // uniform over the block: round_four's shuffles
    const int i = i0 + int(threadIdx.x);
    const bool in = i < n4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (in) {
      const float4 a = a4[i], g = w4[i];
      v = make_float4(a.x * inv * g.x, a.y * inv * g.y, a.z * inv * g.z, a.w * inv * g.w);
    }
    const RoundedFour r = round_four(v);
    const float half = r.d * float(r.qs);                         // this lane's half of 16, as q8.s holds it
    const float second = __shfl_down_sync(0xffffffffu, half, 4);  // lane + 4: the block's second half
    if (!in) continue;
    *reinterpret_cast<uint32_t*>(xs + 4 * i) = r.q;
    if ((lane & 7) == 0) xds[i / 8] = make_float2(r.d, half + second);
    if (writer) {
      reinterpret_cast<float4*>(nm.y)[i] = v;
      *reinterpret_cast<uint32_t*>(nm.q8.q + 4 * i) = r.q;
      if ((lane & 7) == 0) nm.q8.d[i / 8] = r.d;
      if ((lane & 3) == 0) nm.q8.s[i / 4] = half;
    }
  }
}

// R: rows of each matrix a warp takes at once (2; 1 for products too small to give every warp of the GPU a
// pair of rows, whose activations are then read through L1 instead of copied into shared memory first).
// Rope: a q/k/v job with its RoPE and KV write (job.rope set; R 2, no GLU). An instantiation of its own, so
// that the products without it keep their registers (80 for Q4_0 with it, 76 without: ptxas -v).
// Norm: a job forming its input norm (job.norm set; R 2), likewise an instantiation of its own (76 for the
// Q4_0 q/k/v job with it, as without).
template <int F, int Glu, int R, bool Rope = false, bool Norm = false>
__global__ void __launch_bounds__(32 * kStreamWarps, Glu >= 0 ? 2
                                                     : R == 1 ? 4
                                                              : 3)
    matvec_stream_kernel(MatvecJob job, JobLayout lay, int groups, Q8 x) {
  constexpr bool kShared = R > 1;  // the activations copied into shared memory
  constexpr int kMats = Glu >= 0 ? 2 : 1;
  constexpr int kN = R * kMats;  // rows a warp reads at once
  constexpr int kRound = kRoundOf<F>;
  extern __shared__ __align__(16) unsigned char xs[];  // the activations: q [n_in], then (d, s0 + s1) [nb]
  // The job's matrices, read from shared memory when a warp moves to another group rather than held in
  // registers for the whole kernel.
  __shared__ const uint8_t* s_data[3];
  __shared__ float* s_y[3];
  __shared__ size_t s_rb[3];
  __shared__ int s_n_out[3], s_first[3];
  const int lane = threadIdx.x & 31;
  griddep_launch_dependents();
  // A q/k/v job's RoPE and KV write (QkvRope): the token's position in shared memory (only host copies
  // write positions: read before the wait), and lane 0 copying the table pair of each group it loads into
  // its warp's two slots (the group being summed and the next, by the parity of their place in the walk)
  // asynchronously, so that neither holds registers through the walk nor makes the turn wait.
  static_assert(!Rope || (Glu < 0 && R == 2), "RoPE takes a pair of q or k rows in one lane");
  __shared__ int s_pos;
  __shared__ float2 s_cs[Rope ? kStreamWarps : 1][2];
  if (Rope && threadIdx.x == 3) s_pos = *job.rope.pos;
  if (threadIdx.x < 3) {
    const int i = int(threadIdx.x);
    const Matrix& w = i == 0 ? job.w[0] : i == 1 ? job.w[1] : job.w[2];
    s_data[i] = w.data;
    s_rb[i] = w.row_bytes;
    s_n_out[i] = w.n_out;
    s_y[i] = i == 0 ? job.y[0] : i == 1 ? job.y[1] : job.y[2];
    s_first[i] = i == 0 ? 0 : i < job.n && Glu < 0 ? (i == 1 ? lay.first[1] : lay.first[2]) : 1 << 30;
  }
  __syncthreads();
  const int n_in = job.w[0].n_in, nb = n_in / 32;
  const int rounds = (nb + 32 * kRound - 1) / (32 * kRound);
  const int stride = int(gridDim.x) * kStreamWarps;
  const int first = int(blockIdx.x) * kStreamWarps + int(threadIdx.x >> 5);  // the warp's first group
  int g = first, rd = 0;                                                     // the group and round now

  auto group_at = [&](int gg, int& mi, int& r0) {
    mi = Glu < 0 ? int(gg >= s_first[1]) + int(gg >= s_first[2]) : 0;
    r0 = (gg - s_first[mi]) * R;
  };
  // The group `load` reads: its first row (of the gate for a GLU, p1 the up's) and the bytes to its second
  // row (0 when the first is its matrix's last: the pair's second row reads it again, unused).
  int lg = -1, lstep = 0;
  const uint8_t *p0 = nullptr, *p1 = nullptr;
  Codes<F> c[2][kRound][kN];
  uint2 raw[2][kRound][kN];
  auto load = [&](auto slot, int gg, int rr) {
    constexpr int S = decltype(slot)::value;
    if (gg != lg) {
      int mi, r0;
      group_at(gg, mi, r0);
      const size_t rb = s_rb[mi];
      p0 = s_data[mi] + size_t(r0) * rb;
      if constexpr (Glu >= 0) p1 = s_data[1] + size_t(r0) * rb;
      lstep = R > 1 && r0 + 1 < s_n_out[mi] ? int(rb) : 0;
      lg = gg;
      if constexpr (Rope) {
        if (lane == 0) {
          const int d = r0 % job.rope.head_dim;
          // Rows past the rotated dims (and v's) copy any pair: their turn is skipped.
          const int i = mi < 2 && d < job.rope.rope_dim ? d / 2 : 0;
          const float2* cs =
              reinterpret_cast<const float2*>(job.rope.table) + size_t(s_pos) * job.rope.n_half;
          cp_async8(&s_cs[threadIdx.x >> 5][((gg - first) / stride) & 1], cs + i);
          cp_async_commit();
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      const int b0 = rr * 32 * kRound + 32 * u, b = b0 + lane;
      if constexpr (F == kQ4K) {
        // Lane l < 20: word l % 5 of the header of super-block b0 / 8 + l / 5 (q4k_pair).
        const int sb = b0 / 8 + lane / 5;
        if (lane < 20 && 8 * sb < nb) {
#pragma unroll
          for (int k = 0; k < kN; ++k) {
            const uint8_t* row = (k < R ? p0 : p1) + (k % R) * lstep;
            raw[S][u][k].x =
                __ldcs(reinterpret_cast<const unsigned int*>(row + 16 * nb + 20 * sb + 4 * (lane % 5)));
          }
        }
      }
      if (b < nb) {
#pragma unroll
        for (int k = 0; k < kN; ++k) {
          const uint8_t* row = (k < R ? p0 : p1) + (k % R) * lstep;
          const uint4* p = reinterpret_cast<const uint4*>(row + size_t(fmt_code_bytes(F)) * b);
          c[S][u][k].v[0] = __ldcs(p);
          if constexpr (F == kQ6K) {
            const uint2 h = __ldcs(reinterpret_cast<const uint2*>(row + 16 * size_t(nb) + 8 * size_t(b)));
            c[S][u][k].v[1] = make_uint4(h.x, h.y, 0u, 0u);
          } else if constexpr (!fmt_nibbles(F)) {
            c[S][u][k].v[1] = __ldcs(p + 1);
          }
          if constexpr (F != kQ4K) raw[S][u][k] = raw_pair<F>(row, nb, b);
        }
      }
    }
  };
  // The first round's weights before waiting for the kernel that writes the activations (no kernel writes
  // weights), so that their loads overlap that kernel's end. Single-row products (R = 1: the 7B's o and
  // down) load the round after it too, into the second buffer: their warps then hold all or a third of
  // their 4-bit rows when the wait ends. Measured on an H100 (docs/PERF.md 2026-12-06 13:42–13:56): 7B Q4_0
  // tg128 +0.9%, Q4_K +1.2%, TinyLlama Q4_0 +0.2%; two rounds for every product gave TinyLlama +2.4% but
  // 7B Q4_K -1.6%.
  bool loaded = false;  // the next round is in the other buffer already
  static_assert(!Norm || kShared, "a job's input norm is formed in shared memory");
  if constexpr (Norm) stage_norm_weights(job.norm, n_in, xs);
  if (g < groups) {
    load(std::integral_constant<int, 0>{}, g, 0);
    if constexpr (R == 1) {
      const int ng = rounds > 1 ? g : g + stride, nr = rounds > 1 ? 1 : 0;
      if (ng < groups) load(std::integral_constant<int, 1>{}, ng, nr);
      loaded = true;
    }
  }
  griddep_wait();
  if constexpr (kShared) {
    if constexpr (Norm)
      norm_activations(job.norm, n_in, xs);
    else
      copy_activations<true>(x, n_in, xs);
    __syncthreads();
  }
  if (g >= groups) return;
  const unsigned char* xq8 = kShared ? xs : reinterpret_cast<const unsigned char*>(x.q);
  const float2* xds = reinterpret_cast<const float2*>(xs + n_in);
  float acc[kN];
#pragma unroll
  for (int k = 0; k < kN; ++k) acc[k] = 0.0f;

  // One round: the next one's loads into the other buffer, then this one's sums; at a group's last round
  // its rows are written. False when the warp has no groups left.
  auto step = [&](auto slot) -> bool {
    constexpr int S = decltype(slot)::value;
    int ng = g, nr = rd + 1;
    if (nr == rounds) ng = g + stride, nr = 0;
    if (ng < groups && !loaded) load(std::integral_constant<int, 1 - S>{}, ng, nr);
    loaded = false;
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      const int b = rd * 32 * kRound + lane + 32 * u;
      float dk[kN], mk[kN];  // the rows' (d, m) pairs (Q6K forms its scales in the sum instead)
      if constexpr (F == kQ6K) {
        (void)dk;
        (void)mk;
      } else if constexpr (F == kQ4K) {
#pragma unroll
        for (int k = 0; k < kN; ++k) q4k_pair(raw[S][u][k].x, dk[k], mk[k]);  // the whole warp
      }
      if (b < nb) {
        const uint4* xq = reinterpret_cast<const uint4*>(xq8 + 32 * b);
        const uint4 xa = xq[0], xb = xq[1];
        float dx, s01;  // the block's scale, the sum of its values
        if constexpr (kShared) {
          const float2 ds = xds[b];
          dx = ds.x;
          s01 = ds.y;
        } else {
          dx = x.d[b];
          s01 = x.s[2 * b] + x.s[2 * b + 1];
        }
#pragma unroll
        for (int k = 0; k < kN; ++k) {
          if constexpr (F != kQ4K && F != kQ6K) pair_of<F>(raw[S][u][k], dk[k], mk[k]);
          if constexpr (fmt_nibbles(F)) {
            // block_dot16 sums 16 times the codes: the scale / 16 (exact while dx / 16 is a normal float)
            acc[k] = add_block(acc[k], dk[k], dx * 0.0625f, block_dot16<F>(c[S][u][k], xa, xb), mk[k], s01);
          } else if constexpr (F == kQ6K) {
            const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(raw[S][u][k].x)));
            acc[k] =
                add_block(acc[k], d, dx, q6k_centered_dot(c[S][u][k], xa, xb, raw[S][u][k].y), 0.0f, 0.0f);
          } else {
            int lo, hi;
            block_dot<F>(c[S][u][k], xa, xb, lo, hi);
            acc[k] = add_block(acc[k], dk[k], dx, lo + hi, mk[k], s01);
          }
        }
      }
    }
    if (rd == rounds - 1) {
#pragma unroll
      for (int k = 0; k < kN; ++k) acc[k] = warp_sum(acc[k]);
      int mi, r0;
      group_at(g, mi, r0);
      float* const y = s_y[mi];
      if constexpr (Rope) {
        if (lane == 0) {
          // rope_kv_store's turn of the pair (common.cuh: rope_turn), then the cache row. The next
          // group's pair (copied when its first round was loaded, in this step) may stay in flight.
          if (g + stride < groups)
            cp_async_wait<1>();
          else
            cp_async_wait<0>();
          const float2 cs = s_cs[threadIdx.x >> 5][((g - first) / stride) & 1];
          const int rpos = s_pos;
          float a = acc[0], b = acc[1];
          if (mi < 2 && r0 % job.rope.head_dim < job.rope.rope_dim) rope_turn(a, b, cs.x, cs.y);
          y[r0] = a;
          y[r0 + 1] = b;
          if (mi > 0) {
            const size_t at = size_t(rpos) * job.rope.kv_dim + r0;  // r0 even: 4- and 8-byte aligned
            void* plane = mi == 1 ? job.rope.k_plane : job.rope.v_plane;
            if (job.rope.f16)
              *reinterpret_cast<__half2*>(static_cast<__half*>(plane) + at) = __floats2half2_rn(a, b);
            else
              *reinterpret_cast<float2*>(static_cast<float*>(plane) + at) = make_float2(a, b);
          }
        }
      } else if (lane == 0) {
        const int n_out = s_n_out[mi];
#pragma unroll
        for (int k = 0; k < R; ++k) {
          if (r0 + k >= n_out) break;
          if constexpr (Glu >= 0) {
            y[r0 + k] = glu_act(acc[k], Glu) * acc[R + k];
          } else {
            y[r0 + k] = acc[k];
            // add_rmsnorm's acc + x, the same sum (single-row products only: matvec_residual_fits)
            if constexpr (R == 1) {
              if (job.residual) job.residual[r0 + k] += acc[k];
            }
          }
        }
      }
#pragma unroll
      for (int k = 0; k < kN; ++k) acc[k] = 0.0f;
    }
    g = ng;
    rd = nr;
    return g < groups;
  };
#pragma unroll 1
  while (step(std::integral_constant<int, 0>{}) && step(std::integral_constant<int, 1>{})) {
  }
  if constexpr (Glu >= 0) {
    if (job.out_q8.q) round_blocks_when_complete<R>(job, s_y[0], s_n_out[0], first, stride, groups);
  }
}

// F16 rows streamed (the float path's F16 weights, whose n_in is a multiple of 8 and whose rows, buffer and
// input are 16-byte aligned): as the streamed kernel above, a grid of one wave whose warps stay, warp w
// taking rows w, w + warps, ... one at a time, round by round: 32 bytes of the row a lane a round (two runs
// of 8 halves, runs lane and 32 + lane of the round's 64), the next round's loaded into a second register
// buffer before this one is summed; the inputs read as float4s (plain loads, cached in L1). The sums are
// those of the float path in another order (a lane's runs, then the warp's lanes). matvec_f32_kernel, which
// loads four runs a lane, waits and sums them, read F16 rows at 62-67% of the copy back to back on an H200
// (docs/PERF.md 2026-12-04 10:03).
__global__ void __launch_bounds__(32 * kStreamWarps)
    matvec_f16_stream_kernel(Matrix w, const float* x, float* y) {
  griddep_launch_dependents();
  const int lane = threadIdx.x & 31;
  const int stride = int(gridDim.x) * kStreamWarps;
  const int runs = w.n_in / 8, rounds = (runs + 63) / 64;
  int r = int(blockIdx.x) * kStreamWarps + int(threadIdx.x >> 5), rd = 0;  // the row and round now
  uint4 c[2][2];                                                           // [buffer][run of the round]
  auto load = [&](auto slot, int rr, int rdd) {
    constexpr int S = decltype(slot)::value;
    const uint4* row = reinterpret_cast<const uint4*>(w.data + size_t(rr) * w.row_bytes);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int k = 64 * rdd + 32 * u + lane;
      if (k < runs) c[S][u] = __ldcs(row + k);
    }
  };
  if (r >= w.n_out) return;                      // writes nothing, so it need not wait for the kernel before
  load(std::integral_constant<int, 0>{}, r, 0);  // weights: written by no kernel, so loaded before the wait
  griddep_wait();
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float acc = 0.0f;
  auto step = [&](auto slot) -> bool {
    constexpr int S = decltype(slot)::value;
    int nr = r, nrd = rd + 1;
    if (nrd == rounds) nr = r + stride, nrd = 0;
    if (nr < w.n_out) load(std::integral_constant<int, 1 - S>{}, nr, nrd);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int k = 64 * rd + 32 * u + lane;
      if (k < runs) {
        const float4 a = x4[2 * k], b = x4[2 * k + 1];  // plain loads: x is the kernel before's output
        const __half2* h = reinterpret_cast<const __half2*>(&c[S][u]);
        const float2 w0 = __half22float2(h[0]), w1 = __half22float2(h[1]), w2 = __half22float2(h[2]),
                     w3 = __half22float2(h[3]);
        acc += w0.x * a.x + w0.y * a.y + w1.x * a.z + w1.y * a.w + w2.x * b.x + w2.y * b.y + w3.x * b.z +
               w3.y * b.w;
      }
    }
    if (rd == rounds - 1) {
      acc = warp_sum(acc);
      if (lane == 0) y[r] = acc;
      acc = 0.0f;
    }
    r = nr;
    rd = nrd;
    return r < w.n_out;
  };
#pragma unroll 1
  while (step(std::integral_constant<int, 0>{}) && step(std::integral_constant<int, 1>{})) {
  }
}

// Blocks of the kernel the current GPU holds at once (its registers, and up to 48 KiB of activations: the
// most a decode step's rows ask; kSharedAsked 0 for a kernel without them), found once per kernel and device
// (a process may drive GPUs of different sizes; the attribute below is the device's too). The kernel's
// shared-memory limit is raised first: at the default (48 KiB with its static arrays) the query answers 0.
template <auto Kernel, int kSharedAsked = 48 * 1024>
int resident_blocks() {
  constexpr int kDevices = 64;  // devices past this are asked every time
  static std::atomic<int> known[kDevices] = {};
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev >= 0 && dev < kDevices) {
    if (const int n = known[dev].load(std::memory_order_relaxed); n > 0) return n;
  }
  if (kSharedAsked > 0) cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024);
  int sms = 0, per_sm = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, 32 * kStreamWarps, kSharedAsked);
  const int n = std::max(1, sms * per_sm);
  if (dev >= 0 && dev < kDevices) known[dev].store(n, std::memory_order_relaxed);
  return n;
}

// One wave: as many blocks as the GPU holds at once (fewer when the job has fewer groups).
template <int F, int Glu, int R, bool Rope = false, bool Norm = false>
void launch_stream_rows(const MatvecJob& job, const Q8& x, size_t shared, cudaStream_t s) {
  JobLayout lay{};
  const int mats = job.glu >= 0 ? 1 : job.n;
  for (int i = 0; i < mats; ++i) lay.first[i + 1] = lay.first[i] + int(ceil_div(job.w[i].n_out, R));
  const int groups = lay.first[mats];
  constexpr auto kernel = matvec_stream_kernel<F, Glu, R, Rope, Norm>;
  if (R == 1) shared = 0;
  if (shared > 96 * 1024)
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  const int blocks = std::min(int(ceil_div(groups, kStreamWarps)), resident_blocks<kernel>());
  launch_pdl(kernel, blocks, 32 * kStreamWarps, shared, s, job, lay, groups, x);
}

// Whether a non-GLU job of `rows` rows in all takes its rows two at a time (launch_stream).
template <int F>
bool stream_pairs(int rows) {
  return (rows + 1) / 2 >= resident_blocks<matvec_stream_kernel<F, -1, 2>>() * kStreamWarps;
}

template <int F, int Glu>
void launch_stream(const MatvecJob& job, const Q8& x, size_t shared, cudaStream_t s) {
  int rows = 0;
  for (int i = 0; i < (job.glu >= 0 ? 1 : job.n); ++i) rows += job.w[i].n_out;
  if (rows == 0) return;
  // Pairs of rows when there are enough to give every warp slot of the GPU one (measured on the H200:
  // Llama-7B-shaped Q4_0 q/k/v 3.4 TB/s with pairs, 2.9 with single rows); else single rows (its o and
  // down products, 4096 rows: 2.1 -> 2.3 and 2.5 -> 2.9 TB/s). A job with its RoPE always takes pairs (the
  // backend asks matvec_rope_fits first): a pair's turn needs both rows in one lane.
  // A job forming its input norm takes pairs too (it needs the activations in shared memory; the backend
  // asks matvec_norm_fits, so only jobs that would take them anyway), in a kernel instantiation of its
  // own, so that the others keep their registers.
  const bool norm = job.norm.acc != nullptr;
  if constexpr (Glu < 0) {
    if (job.rope.table) {
      if (norm) return launch_stream_rows<F, Glu, 2, true, true>(job, x, shared, s);
      return launch_stream_rows<F, Glu, 2, true>(job, x, shared, s);
    }
    if (!norm && !stream_pairs<F>(rows)) return launch_stream_rows<F, Glu, 1>(job, x, shared, s);
  }
  if (norm) return launch_stream_rows<F, Glu, 2, false, true>(job, x, shared, s);
  launch_stream_rows<F, Glu, 2>(job, x, shared, s);
}
}  // namespace

void matvec_f32(const Matrix& w, const float* x, float* y, cudaStream_t s) {
  if (w.n_out <= 0) return;
  const auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (w.fmt == kF16 && w.n_in % 8 == 0 && w.row_bytes % 16 == 0 && aligned(w.data) && aligned(x)) {
    constexpr auto kernel = matvec_f16_stream_kernel;
    const int blocks = std::min(int(ceil_div(w.n_out, kStreamWarps)), resident_blocks<kernel, 0>());
    return launch_pdl(kernel, blocks, 32 * kStreamWarps, 0, s, w, x, y);
  }
  with_format(w.fmt, [&]<int F>() {
    launch_pdl(matvec_f32_kernel<F>, ceil_div(w.n_out, kWarps), 32 * kWarps, 0, s, w, x, y);
  });
}

bool matvec_rope_fits(const MatvecJob& job) {
  if (job.n != 3 || job.glu >= 0 || job.n_tok != 1) return false;
  int rows = 0;
  for (int i = 0; i < 3; ++i) {
    if (job.w[i].fmt != job.w[0].fmt || job.w[i].n_out % 2 != 0) return false;
    rows += job.w[i].n_out;
  }
  bool fits = false;
  with_format(job.w[0].fmt, [&]<int F>() {
    if constexpr (streamed(F)) fits = stream_pairs<F>(rows);
  });
  return fits;
}

int matvec_rope_min_rows(int fmt) {
  int rows = 0;
  with_format(fmt, [&]<int F>() {
    if constexpr (streamed(F)) rows = 2 * resident_blocks<matvec_stream_kernel<F, -1, 2>>() * kStreamWarps;
  });
  return rows;
}

bool matvec_norm_fits(const MatvecJob& job) {
  const int n_in = job.w[0].n_in;
  // The activations and the norm's weights inside the 48 KiB resident_blocks sized the grid for.
  if (job.n_tok != 1 || n_in % 32 != 0 || norm_weights_at(n_in) + 4 * n_in > 48 * 1024) return false;
  int rows = 0;
  for (int i = 0; i < (job.glu >= 0 ? 1 : job.n); ++i) rows += job.w[i].n_out;
  bool fits = false;
  with_format(job.w[0].fmt, [&]<int F>() {
    if constexpr (streamed(F)) fits = job.glu >= 0 || job.rope.table || stream_pairs<F>(rows);
  });
  return fits;
}

bool matvec_residual_fits(const MatvecJob& job) {
  if (job.n_tok != 1 || job.n != 1 || job.glu >= 0 || job.rope.table) return false;
  bool fits = false;
  with_format(job.w[0].fmt, [&]<int F>() {
    if constexpr (streamed(F)) fits = !stream_pairs<F>(job.w[0].n_out);
  });
  return fits;
}

void matvec_q8(const MatvecJob& job, const Q8& x, cudaStream_t s) {
  JobLayout lay{};
  const int rows_per_block = kWarps * kRows;
  const int mats = job.glu >= 0 ? 1 : job.n;  // a GLU's blocks cover the gate's rows (the up rows alike)
  for (int i = 0; i < mats; ++i)
    lay.first[i + 1] = lay.first[i] + int(ceil_div(job.w[i].n_out, rows_per_block));
  const unsigned blocks = unsigned(lay.first[mats]);
  if (blocks == 0) return;
  // The activations in shared memory: n codes, n / 32 scales, n / 16 sums (and an input norm's weights
  // after them).
  size_t shared = size_t(job.w[0].n_in) + size_t(job.w[0].n_in / 32) * 3 * sizeof(float);
  if (job.norm.acc) shared = size_t(norm_weights_at(job.w[0].n_in)) + 4 * size_t(job.w[0].n_in);
  with_format(job.w[0].fmt, [&]<int F>() {
    if constexpr (streamed(F)) {
      if (job.glu == 0)
        launch_stream<F, 0>(job, x, shared, s);
      else if (job.glu == 1)
        launch_stream<F, 1>(job, x, shared, s);
      else
        launch_stream<F, -1>(job, x, shared, s);
    } else if constexpr (fmt_block(F)) {
      auto go = [&](auto kernel) {
        if (shared > 48 * 1024)
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
        launch_pdl(kernel, blocks, 32 * kWarps, shared, s, job, lay, x);
      };
      if (job.glu == 0)
        go(matvec_q8_kernel<F, 0>);
      else if (job.glu == 1)
        go(matvec_q8_kernel<F, 1>);
      else
        go(matvec_q8_kernel<F, -1>);
    }
  });
}

}  // namespace tilellm::cuda
