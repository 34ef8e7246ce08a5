// Matrix products y[t] = W x[t] for Q4_0 weights (blocks of 32 weights, 18 bytes): the block-format matmul of
// quants.cl (TL_MATMUL_BLOCK32, where its layout and work split are described) with the Q4_0 block reader.
TL_MATMUL_BLOCK32(matmul_q4_0, 18, tl_block_q4_0)

// Decode (one token): the block-format matrix-vector product of quants.cl (TL_MATVEC_BLOCK32).
TL_MATVEC_BLOCK32(matvec_q4_0, 18, tl_block4_q4_0)
