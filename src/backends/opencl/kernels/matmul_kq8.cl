// Matrix products y[t] = W x[t] for KQ8 weights (Q5_K, Q6_K and Q5_0 / Q5_1, held at upload as signed
// byte codes with a float (scale, offset) per 16 weights, exact: quants.cl): the tiled GEMM of gemm.cl
// (TL_MATMUL_BLOCK32) with the KQ8 block reader.
TL_MATMUL_BLOCK32(matmul_kq8, kq8)

// Decode (one token): the block-format matrix-vector product of quants.cl (TL_MATVEC_BLOCK32), and the
// gate and up products with their GLU in one kernel (TL_MATVEC_GLU_BLOCK32); units are the 16-weight
// groups, in Q8_0's byte order.
TL_MATVEC_BLOCK32(matvec_kq8, 16, 8, kq8)
TL_MATVEC_GLU_BLOCK32(matvec_glu_kq8, 16, 8, kq8)
