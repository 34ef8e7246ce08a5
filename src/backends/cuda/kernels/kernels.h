// The CUDA backend's kernels as the host code launches them: one function per kernel family, one .cu file
// per op (the names of cpu/, opencl/ and vulkan/). Plain types only, so the host files need no CUDA device
// code and the .cu files none of the engine's headers; every function enqueues its kernel on `s` and
// returns (errors are read by the caller after the launch: runtime.h).
//
// Layouts (row-major; "[a][b]" means a rows of b contiguous elements):
//   activations  float [n_tok][n]
//   weights      a Matrix: n_out device rows of row_bytes bytes in one of the device formats of
//                backends/device_rows.h (Fmt below); every format's weight is d * c + m for an integer code
//                c and a (d, m) pair per group of weights
//   Q8 activations (the quantized path): per token row of n (n % 32 == 0): q int8 [n_tok][n]; d float
//                [n_tok][n / 32], the scale of each block of 32 (q = round(x / d), d = max|x| / 127);
//                s float [n_tok][n / 16], d times the sum of q over each half-block of 16. The value a
//                quantized activation stands for is d * q exactly.
//   KV cache     [layer][K|V][pos < n_ctx][kv_dim] in f16 or f32 (backends/kv_cache.h); the kernels take the
//                layer's K plane and V plane pointers
//   RoPE table   float [n_pos][n_half][cos, sin] (backends/op_params.h)
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace tilellm::cuda {

// DeviceFormat's numbering (backends/device_rows.h; cuda_backend.cpp checks that the two agree), then this
// backend's own: kQ4K and kQ6K, Q4_K and Q6_K at their own sizes (device_rows.h "Q4K", "Q6K").
enum Fmt : int { kF32 = 0, kF16, kQ4_0, kQ4_1, kQ8_0, kInt4B64, kInt8B0, kKq8, kKq4, kQ4K, kQ6K, kFormats };

struct Matrix {
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
  int n_in = 0, n_out = 0;
  int fmt = kF32;
};

struct Q8 {
  int8_t* q = nullptr;
  float* d = nullptr;
  float* s = nullptr;
};

// --- embedding.cu: out[t][:] = scale * row ids[t] of `table`, dequantized. out: [n_tok][table.n_in]
void embed(const Matrix& table, const int32_t* ids, int n_tok, float scale, float* out, cudaStream_t s);

// --- rmsnorm.cu: per row of n floats, y = x / sqrt(mean(x^2) + eps) * w. With acc: acc += x first and the
// norm is taken of acc (the residual add fused with the next norm; y must then alias neither). With q8.q:
// y is also written quantized (n % 32 == 0).
void rmsnorm(const float* x, const float* w, float* y, int rows, int n, float eps, float* acc, const Q8& q8,
             cudaStream_t s);

// --- quantize.cu: x [n_tok][n] -> Q8 (n % 32 == 0).
void quantize_q8(const float* x, int n_tok, int n, const Q8& q8, cudaStream_t s);

// --- matvec.cu: one token. Float path: y [w.n_out] = W x, x float [w.n_in], exact weights (every format).
// Quantized path: up to 3 matrices of one block format sharing the input (q/k/v), y_i = W_i x with x as
// Q8; with glu (2 matrices: gate and up) y_0 = act(W_0 x) * (W_1 x), act 0 SiLU, 1 GELU (tanh).
void matvec_f32(const Matrix& w, const float* x, float* y, cudaStream_t s);
// A q/k/v job's RoPE and KV write, done where its rows are written (one token; matvec_rope_fits): rows 2i
// and 2i + 1 of q (w[0]) and k (w[1]) with d = 2i % head_dim < rope_dim turned by pair d / 2 of the table
// row at *pos (norm pairs), exactly as rope_kv_store turns them, and k's and v's rows also written
// into cache row *pos of the K and V planes ([pos][kv_dim], f16 or f32) — what rope_kv_store leaves, in
// the product's launch. Off while table is null.
struct QkvRope {
  const float* table = nullptr;  // [n_pos][n_half][cos, sin]
  const int32_t* pos = nullptr;  // the token's position, on the device
  void* k_plane = nullptr;
  void* v_plane = nullptr;
  int n_half = 0, head_dim = 0, rope_dim = 0, kv_dim = 0;
  bool f16 = true;
};
struct MatvecNorm {  // MatvecJob::norm; acc null: none
  const float* acc = nullptr;
  const float* w = nullptr;
  float* y = nullptr;
  Q8 q8;
  float eps = 0.0f;
};
struct MatvecJob {
  Matrix w[3];
  float* y[3] = {nullptr, nullptr, nullptr};
  int n = 1;
  int glu = -1;  // -1: plain products; 0 / 1: gate and up combined by SiLU / GELU into y[0]
  // A GLU's output also written rounded (Q8) for the product after it (n_out % 32 == 0): the block that
  // finishes the last rows of a block of 32 rounds it. `counters` [n_out / 32] ints, zero before the launch
  // and left zero after it.
  Q8 out_q8;
  int* counters = nullptr;
  int n_tok = 1;  // matvec_tokens_q8: x holds n_tok token rows, y_i [n_tok][w_i.n_out]
  QkvRope rope;   // matvec_q8 only, where matvec_rope_fits
  // Decode's residual add and the RMSNorm after it carried by the products around them (matvec_q8 only;
  // the backend's matmul_add_rmsnorm). residual [w[0].n_out]: each row's sum is also added into it
  // (acc += W x; a plain one-matrix job, matvec_residual_fits). norm: the job's input is not x but the
  // RMSNorm of norm.acc [n_in] (the residual, its add done) times norm.w [n_in], rounded to Q8 — formed by
  // every block in its shared memory with rmsnorm()'s arithmetic in rmsnorm()'s order, so the same bits
  // (where matvec_norm_fits); block 0 also writes the norm as floats into norm.y and rounded into norm.q8
  // for any later reader. acc, w and y 16-byte aligned.
  float* residual = nullptr;
  MatvecNorm norm;
};
void matvec_q8(const MatvecJob& job, const Q8& x, cudaStream_t s);
// Whether matvec_q8 takes the job's RoPE and KV write (job.rope) in the product's launch: q, k and v (n 3,
// no glu) in a format whose rows are streamed two at a time on this GPU (enough rows for it).
bool matvec_rope_fits(const MatvecJob& job);
// The fewest rows (q, k and v together) a job of format fmt needs for that on this GPU; 0 where the format
// never takes it.
int matvec_rope_min_rows(int fmt);
// Whether matvec_q8 takes the job's input norm (job.norm) in its launch: one token, a format streamed with
// its activations in shared memory (rows two at a time: a GLU job, a job with its RoPE, or enough rows), an
// input of whole blocks of 32 that fits the shared memory beside its norm weights.
bool matvec_norm_fits(const MatvecJob& job);
// Whether matvec_q8 adds the job's rows into job.residual: one token, one matrix of a streamed format whose
// rows it takes one at a time (too few for pairs: a 7B's output and down products on an H100 or H200), no
// GLU or RoPE.
bool matvec_residual_fits(const MatvecJob& job);

// --- matvec_tokens.cu: the quantized path's products of 2 .. kMatvecTokens tokens, each weight read once
// for all of them: y_i [job.n_tok][w_i.n_out] = x [n_tok][n_in] times W_i^T for the job's up to 3
// matrices (no glu, no out_q8).
constexpr int kMatvecTokens = 8;
void matvec_tokens_q8(const MatvecJob& job, const Q8& x, cudaStream_t s);

// --- matmul.cu: y [n_tok][w.n_out] = x [n_tok][w.n_in] times W^T. Float path: float tiles on the CUDA
// cores (every format; the exact weights). Quantized path: int8 tensor-core products per block of 32 (the
// block formats), each block's int32 sum scaled by the weight's and the activation's scales.
void matmul_f32(const Matrix& w, const float* x, int n_tok, float* y, cudaStream_t s);
void matmul_q8(const Matrix& w, const Q8& x, int n_tok, float* y, cudaStream_t s);

// --- matmul_half.cu: the operands of the prompts' fp16 GEMM (cuBLAS, ../blas.h). Rows r0 .. r0 + rows - 1
// of w dequantized exactly, then rounded to fp16: out [rows][w.n_in] (w.n_in % 8 == 0, the block formats'
// % 32; out 16-byte aligned). x [n] (n % 8 == 0) times 2^e, e from max |x| as backends/f16_round.h
// defines it, rounded to fp16 into out; scale [2] = {2^-e, 0} (the GEMM's alpha and beta); work: one
// unsigned of scratch.
void weight_rows_f16(const Matrix& w, int r0, int rows, void* out, cudaStream_t s);
void to_f16_scaled(const float* x, int64_t n, void* out, float* scale, unsigned* work, cudaStream_t s);

// --- rope.cu. Rotation of the first rope_dim dims of every head, pairs (2i, 2i+1) (mode 0, "norm") or
// (i, i + rope_dim / 2) (mode 1, neox), by the table row of each token's position.
struct RopeArgs {
  const float* table = nullptr;  // [n_pos][n_half][cos, sin]
  int n_pos = 0, n_half = 0;
  int head_dim = 0, rope_dim = 0, mode = 0;
};
// x [n_tok][n_heads][head_dim], in place.
void rope(float* x, int n_tok, int n_heads, const int32_t* pos, const RopeArgs& r, cudaStream_t s);
// A batch decode step's tokens, each of its own sequence (one cache per sequence in one allocation): token
// t's K and V planes lie seq[t] * stride elements after the planes handed to the kernel. Passed by value
// (kernel parameters): no upload, and a recorded step keeps it. The default value puts every token in the
// planes given.
constexpr int kMaxSeqs = 64;
struct SeqPlanes {
  int64_t stride = 0;
  int32_t seq[kMaxSeqs] = {};
};
// rope(q), rope(k), then k and v written into the cache rows at pos (kv_dim = n_head_kv * head_dim, the
// rotated dims the whole table width: RopeShape::fusable). q [n_tok][n_head][head_dim]; k, v
// [n_tok][n_head_kv][head_dim]; k is left rotated. Token t's rows go to the planes sp places it in.
void rope_kv_store(float* q, float* k, const float* v, int n_tok, int n_head, int n_head_kv,
                   const int32_t* pos, const RopeArgs& r, void* k_plane, void* v_plane, bool f16,
                   const SeqPlanes& sp, cudaStream_t s);

// --- kv_store.cu: k, v [n_tok][kv_dim] into the planes' rows pos[t] (f16: rounded to nearest even).
void kv_store(const float* k, const float* v, int n_tok, int kv_dim, const int32_t* pos, void* k_plane,
              void* v_plane, bool f16, cudaStream_t s);

// --- attention.cu: causal attention of n_tok queries over the keys 0 .. pos[t] (or the last `window` of
// them), the online softmax over chunks of keys. q, out [n_tok][n_head][head_dim]. With splits > 1 (one
// token), the keys are split among `splits` blocks per head whose partial results, in `work` (splits *
// n_head * (head_dim + 2) floats), the last of them to finish combines; `counters` [n_head] ints, zero
// before the launch and left zero after it. With q8.q set (head_dim % 32 == 0), out is also written
// rounded (Q8) for the next product.
struct AttnArgs {
  int n_head = 0, n_head_kv = 0, head_dim = 0, kv_dim = 0;
  float scale = 1.0f;
  int window = 0;
  bool f16 = true;
};
// The most splits a head's keys take (--cuda-attn-splits): the merging block holds every split's (max, sum)
// in its shared memory.
constexpr int kMaxAttnSplits = 64;
// With seqs (a batch decode step): each of the n_tok tokens is one sequence's decode token, its keys in
// the planes seqs places it in; splits apply, work and counters then holding n_tok times the room above.
void attention(const float* q, const void* k_plane, const void* v_plane, const int32_t* pos, int n_tok,
               const AttnArgs& a, int splits, float* work, int* counters, float* out, const Q8& q8,
               const SeqPlanes* seqs, cudaStream_t s);
// Whether a prompt of n_tok takes the tiled kernel (16 queries a block; splits do not apply).
bool attention_tiled(const AttnArgs& a, int n_tok);

// --- glu.cu: out = act(gate) * up over n floats (act 0 SiLU, 1 GELU tanh).
void glu(const float* gate, const float* up, float* out, int64_t n, int act, cudaStream_t s);

// --- add.cu: acc += x over n floats; x_rows [rows][n] += v [n]. `broken` (tests of the self-check only):
// acc = x instead.
void add(float* acc, const float* x, int64_t n, bool broken, cudaStream_t s);
void add_rows(float* x, const float* v, int rows, int n, cudaStream_t s);

// --- bandwidth.cu: the memory probes (gemv-bw): reads `bytes` (a multiple of 16) once; `sink` receives
// a value no one reads, so the reads are not optimised away.
void read_probe(const void* p, size_t bytes, uint32_t* sink, int sms, cudaStream_t s);

}  // namespace tilellm::cuda
