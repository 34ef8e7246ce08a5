// Matrix products y[t] = W x[t] for INT8B0 weights (--weights int8b0: 8-bit asymmetric, one (d, m) per
// output row over all of K, converted at upload; device row in quants.cl): the block-format matmul of
// quants.cl (TL_MATMUL_BLOCK32) with the INT8B0 block reader.
TL_MATMUL_BLOCK32(matmul_int8b0, int8b0)

// Decode (one token): the block-format matrix-vector product of quants.cl (TL_MATVEC_BLOCK32); the codes
// are one byte per weight in order, so the halves are Q8_0's (runs at 16h and 16h + 8).
TL_MATVEC_BLOCK32(matvec_int8b0, 16, 8, int8b0)
TL_MATVEC_GLU_BLOCK32(matvec_glu_int8b0, 16, 8, int8b0)
