// The prompt's matrix products in integers (--activations q8; gemm_q8.cl describes them): the input's
// rounding, and the kernel of every block format whose codes fit 8 bits with one (d, m) per 32 weights or
// more (Q4_0, Q4_1, Q8_0, INT4B64, INT8B0, KQ4). Built only with TL_Q8_GEMM (opencl_backend.cpp).
#if TL_GEMM && TL_Q8_GEMM

// x: [n_tok][n_in] floats (n_in a multiple of 32) -> q: [n_tok][TL_Q8_ROW(nb)] words as gemm_q8.cl lays
// them out. One item per block of one token: global size (nb, n_tok) rounded up; items past either return.
__kernel void quantize_q8(__global const float* x, int n_in, int n_tok, __global uint* q) {
  const int b = get_global_id(0), t = get_global_id(1), nb = n_in / 32;
  if (b >= nb || t >= n_tok) return;
  __global const float* v = x + (ulong)t * n_in + 32 * b;
  float f[32];
  for (int k = 0; k < 8; ++k) vstore4(vload4(k, v), k, f);
  tl_q8_round_block(f, q + (ulong)t * TL_Q8_ROW(nb), b, nb);
}

TL_GEMM_Q8_KERNEL(matmul_q8_q4_0, q4_0)
TL_GEMM_Q8_KERNEL(matmul_q8_q4_1, q4_1)
TL_GEMM_Q8_KERNEL(matmul_q8_q8_0, q8_0)
TL_GEMM_Q8_KERNEL(matmul_q8_int4b64, int4b64)
TL_GEMM_Q8_KERNEL(matmul_q8_int8b0, int8b0)
TL_GEMM_Q8_KERNEL(matmul_q8_kq4, kq4)

TL_MATVEC_Q8(matvec_q8_q4_0, q4_0)
TL_MATVEC_Q8(matvec_q8_q4_1, q4_1)
TL_MATVEC_Q8(matvec_q8_q8_0, q8_0)
TL_MATVEC_Q8(matvec_q8_int4b64, int4b64)
TL_MATVEC_Q8(matvec_q8_int8b0, int8b0)
TL_MATVEC_Q8(matvec_q8_kq4, kq4)
TL_MATVEC_GLU_Q8(matvec_glu_q8_q4_0, q4_0)
TL_MATVEC_GLU_Q8(matvec_glu_q8_q4_1, q4_1)
TL_MATVEC_GLU_Q8(matvec_glu_q8_q8_0, q8_0)
TL_MATVEC_GLU_Q8(matvec_glu_q8_int4b64, int4b64)
TL_MATVEC_GLU_Q8(matvec_glu_q8_int8b0, int8b0)
TL_MATVEC_GLU_Q8(matvec_glu_q8_kq4, kq4)

#endif
