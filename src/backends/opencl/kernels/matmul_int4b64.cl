// Matrix products y[t] = W x[t] for INT4B64 weights (--weights int4b64: 4-bit asymmetric, one (d, m) per 64
// weights, converted at upload; device row in quants.cl): the block-format matmul of quants.cl
// (TL_MATMUL_BLOCK32) with the INT4B64 block reader, whose 32-blocks 2g and 2g + 1 share group g's pair.
TL_MATMUL_BLOCK32(matmul_int4b64, int4b64)

// Decode (one token): the block-format matrix-vector product of quants.cl (TL_MATVEC_BLOCK32); the
// nibble layout is Q4_0's, so the halves are too.
TL_MATVEC_BLOCK32(matvec_int4b64, 8, 16, int4b64)
TL_MATVEC_GLU_BLOCK32(matvec_glu_int4b64, 8, 16, int4b64)
