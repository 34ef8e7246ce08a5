// Matrix products y[t] = W x[t] for Q4_0 weights (blocks of 32, split per row at upload: quants.cl): the
// tiled GEMM of gemm.cl (TL_MATMUL_BLOCK32, where its work split is described) with the Q4_0 reader.
TL_MATMUL_BLOCK32(matmul_q4_0, q4_0)

// Decode (one token): the block-format matrix-vector product of quants.cl (TL_MATVEC_BLOCK32), and the
// gate and up products with their GLU in one kernel (TL_MATVEC_GLU_BLOCK32).
TL_MATVEC_BLOCK32(matvec_q4_0, 8, 16, q4_0)
TL_MATVEC_GLU_BLOCK32(matvec_glu_q4_0, 8, 16, q4_0)
