#!/usr/bin/env python3
"""Reference cases for the GGML block-format kernels (src/format/quants.*), computed with the Python gguf package.

The oracle is independent of our C++ code: weights come from gguf.quants.dequantize (F32 and F16 through numpy),
and dot products are float64 sums of those weights times random float32 vectors. Run from anywhere:

    python3 tests/reference/make_quant_cases.py            # writes tests/data/quants/*.bin

Output is deterministic (fixed seed), so a re-run reproduces the committed fixtures byte for byte.

Row payloads are random bytes (every bit pattern of the quants, the packed 6-bit K-quant scales and the int8 Q6_K
scales is reachable), except the fp16 scale fields (d, m, dmin), which are random finite non-zero halves of random
sign with magnitudes 2^-16 .. 2^2 (the low end reaches half subnormals, which must also convert exactly). F16 and
BF16 rows hold normal values plus some subnormals and signed zeros; F32 rows are normal floats.

File format, little-endian, one file per type named <TYPE>.bin (e.g. Q4_K.bin):
    char[4]  magic "TLQC"
    u32      version = 1
    u32      ggml type id (GGUF numbering)
    u32      number of cases
  then per case:
    u32      n        elements in the row (a multiple of the block size)
    u32      n_vec    number of x vectors
    u32      nbytes   bytes of the row (= n / block_size * type_size)
    u8[nbytes]        the row as stored in a GGUF file
    f32[n]            dequantized row (gguf.quants.dequantize)
    f32[n_vec][n]     x vectors
    f64[n_vec]        dot(w, x_j) in float64
    f64[n_vec]        sum_i |w_i * x_ji| in float64 (the scale for the relative error bound)

fp16.bin checks our float -> half / bfloat16 rounding against numpy and gguf:
    char[4]  magic "TLQH"
    u32      version = 1
    u32      count
    f32[count]        inputs (specials, ties, overflow and subnormal boundaries, then random bit patterns)
    u16[count]        numpy float32 -> float16 (round to nearest even)
    u16[count]        gguf.quants.quantize(x, BF16) (round to nearest even, NaN kept quiet)
"""

import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES
from gguf import quants

SEED = 20240617
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "quants")
N_VEC = 3

# Byte offsets of the fp16 scale fields inside one block (ggml block layouts).
SCALE_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
# Block counts per case: odd, a single block, and (for the 32-element types) one row longer than the 1024-element
# chunk that dot_row_multi decodes at a time.
BLOCK_COUNTS = {32: [1, 3, 7, 41], 256: [1, 3, 7]}
# Element counts for the plain float types: odd, below and across the 32-element vector step and the chunk.
PLAIN_COUNTS = [1, 7, 227, 1101]


def random_halves(rng, count):
    mag = np.exp2(rng.uniform(-16.0, 2.0, count))
    sign = np.where(rng.integers(0, 2, count) == 1, -1.0, 1.0)
    h = (sign * mag).astype(np.float16)
    assert np.all(np.isfinite(h)) and np.all(h != 0)
    return h


def plain_row(rng, qtype, n):
    if qtype == T.F32:
        return rng.standard_normal(n).astype(np.float32).view(np.uint8)
    vals = rng.standard_normal(n).astype(np.float32)
    # Sprinkle subnormals and signed zeros of the target format.
    k = max(1, n // 8)
    idx = rng.choice(n, size=min(n, k), replace=False)
    tiny = np.float32(2.0 ** -20) if qtype == T.F16 else np.float32(2.0 ** -130)
    vals[idx] = rng.uniform(-1.0, 1.0, len(idx)).astype(np.float32) * tiny
    if n > 2:
        vals[idx[:1]] = -0.0
    if qtype == T.F16:
        return vals.astype(np.float16).view(np.uint8)
    return quants.quantize(vals, T.BF16).view(np.uint8).reshape(-1)


def block_row(rng, qtype, n_blocks):
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in SCALE_FIELDS[qtype]:
        blocks[:, off:off + 2] = random_halves(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(-1)


def dequantize(row, qtype):
    if qtype == T.BF16:
        return quants.dequantize(row, qtype).astype(np.float32).reshape(-1)
    return np.asarray(quants.dequantize(row, qtype), dtype=np.float32).reshape(-1)


def write_type(rng, qtype):
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    if block_size == 1:
        rows = [(n, plain_row(rng, qtype, n)) for n in PLAIN_COUNTS]
    else:
        rows = [(nb * block_size, block_row(rng, qtype, nb)) for nb in BLOCK_COUNTS[block_size]]
    out = bytearray(b"TLQC" + struct.pack("<III", 1, int(qtype), len(rows)))
    for n, row in rows:
        row = np.ascontiguousarray(row, dtype=np.uint8)
        assert row.size == n // block_size * type_size
        w = dequantize(row, qtype)
        assert w.size == n and np.all(np.isfinite(w))
        x = rng.standard_normal((N_VEC, n)).astype(np.float32)
        prod = x.astype(np.float64) * w.astype(np.float64)[None, :]
        out += struct.pack("<III", n, N_VEC, row.size)
        out += row.tobytes() + w.astype("<f4").tobytes() + x.astype("<f4").tobytes()
        out += prod.sum(axis=1).astype("<f8").tobytes() + np.abs(prod).sum(axis=1).astype("<f8").tobytes()
    with open(os.path.join(OUT, f"{qtype.name}.bin"), "wb") as f:
        f.write(out)
    return len(out)


def write_fp16(rng):
    special = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 65504.0, 65519.99, 65520.0, 65536.0, 1e38, -1e38,
               2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 2.0 ** -26, 3 * 2.0 ** -25, 1e-45,
               2.0 ** -149, 3.4028235e38, 1.00048828125, 1.00146484375, 1.0009765625 + 2.0 ** -23]
    bits = [np.array(special, dtype=np.float32).view(np.uint32)]
    # Bit patterns that land exactly on half/bf16 rounding ties: an odd or even kept part plus exactly half an ulp.
    kept = rng.integers(0, 2 ** 31, 512, dtype=np.uint32)
    bits.append((kept & np.uint32(0xFFFFE000)) | np.uint32(0x1000))
    bits.append((kept & np.uint32(0xFFFF0000)) | np.uint32(0x8000))
    # NaNs with payloads, then uniformly random bit patterns and random values around the half range.
    bits.append(np.uint32(0x7F800000) | rng.integers(1, 2 ** 23, 16, dtype=np.uint32))
    bits.append(rng.integers(0, 2 ** 32, 4096, dtype=np.uint64).astype(np.uint32))
    bits.append((rng.standard_normal(2048) * np.exp2(rng.uniform(-28, 17, 2048))).astype(np.float32).view(np.uint32))
    x = np.concatenate(bits).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = x.astype(np.float16).view(np.uint16)
    b = quants.quantize(x, T.BF16).view(np.uint16).reshape(-1)
    out = b"TLQH" + struct.pack("<II", 1, x.size) + x.astype("<f4").tobytes() + h.astype("<u2").tobytes()
    out += b.astype("<u2").tobytes()
    with open(os.path.join(OUT, "fp16.bin"), "wb") as f:
        f.write(out)
    return len(out)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(SEED)
    total = 0
    for qtype in [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K]:
        total += write_type(rng, qtype)
    total += write_fp16(rng)
    print(f"wrote {total} bytes to {os.path.normpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
