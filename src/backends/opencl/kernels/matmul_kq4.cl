// Matrix products y[t] = W x[t] for KQ4 weights (Q4_K, held at upload as Q4_1's split rows with a float
// (scale, offset) per 32 weights, exact: quants.cl): the tiled GEMM of gemm.cl (TL_MATMUL_BLOCK32) with the
// KQ4 block reader.
TL_MATMUL_BLOCK32(matmul_kq4, kq4)

// Decode (one token): the block-format matrix-vector product of quants.cl (TL_MATVEC_BLOCK32), and the
// gate and up products with their GLU in one kernel (TL_MATVEC_GLU_BLOCK32); half blocks as Q4_1's.
TL_MATVEC_BLOCK32(matvec_kq4, 8, 16, kq4)
TL_MATVEC_GLU_BLOCK32(matvec_glu_kq4, 8, 16, kq4)
