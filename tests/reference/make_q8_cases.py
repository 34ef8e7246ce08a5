#!/usr/bin/env python3
"""Reference cases for the quantized-activation kernels (src/format/quants_q8.*): ggml's activation quantizers
re-implemented in NumPy, and float64 dot products of weight rows with the quantized activations.

    python3 tests/reference/make_q8_cases.py                    # writes tests/data/q8/*.bin
    python3 tests/reference/make_q8_cases.py --check-llama-cpp  # checks the fixtures against libggml-cpu

Output is deterministic (fixed seed): a re-run reproduces the committed fixtures byte for byte.

--check-llama-cpp loads the llama.cpp build of tests/reference/llama_cpp_env.sh ($LLAMA_CPP_BIN, else the
default cache path) and verifies, for every fixture case, that ggml's own from_float functions
(quantize_row_q8_0/q8_1/q8_K, ggml_cpu_fp32_to_fp16/bf16, as llama.cpp's matmul calls them on this CPU)
produce the expected activation bytes, and that ggml's vec_dot of the row with them lies within the C++
test's error bound of the expected dot product. It writes nothing.

Activation quantizers, written from the format definitions in float32 arithmetic wherever ggml uses float, so
that every rounding happens where ggml's does (numpy float32 operations round once, to nearest even):
    Q8_0, Q8_1  amax = max |x|; d = amax / 127; id = 127 / amax (0 if amax == 0); q = rint(x * id) (ties to
                even, as the x86 cvtps2dq that llama.cpp's AVX2 quantize_row_q8_0/q8_1 use); d stored as a half;
                Q8_1 also s = half(float32(d * sum(q))).
    Q8_K        max = the first x of largest |x|; iscale = -127 / max; q = min(127, rint(iscale * x));
                d = 1 / iscale (float32); bsums = sums of 16 consecutive q (quantize_row_q8_K_ref).
    F16         numpy astype(float16) (round to nearest even); BF16 gguf.quants.quantize(BF16); F32 as is.

Weight rows: for the 32-element types, one row quantized from Gaussian weights with gguf.quants.quantize and
one of random bytes; for the K-quants (the gguf package cannot quantize them) two rows of random bytes. In
random rows the fp16 scale fields are random finite halves (magnitudes 2^-14 .. 2^1, random sign) and every
other bit is random (all quants, packed 6-bit scales, int8 Q6_K scales, including -128).

Activations: Gaussian with a per-block scale spread over 2^-8 .. 2^8, plus blocks that pin down the
quantizer's corner cases when the row is long enough: all zeros; a block whose amax is 127 (so id = 1 and d = 1)
filled with k + 0.5 values (exact ties, rounded to even); a block whose largest magnitude appears first as a
negative and later as a positive number (Q8_K takes the first one's sign).

Expected dot products. Each weight is decoded here, independently of the C++ code, as w = A * q + B with q an
integer quant and A, B its (sub-)block scale and offset; float32(A * q + B) is checked equal to
gguf.quants.dequantize (as values: gguf's (q - 8) * d can be -0 where A * q + B is +0). Then, in float64 (exact up to 2^-53, negligible):
    dot      the value of ggml's formula before any float rounding: sum_i A_i q_i a_i plus the offset terms
             sum_b m_b s_b (Q4_1, Q5_1, with the Q8_1 block's stored s) or sum_i B_i a_i (Q4_K, Q5_K, where
             ggml's bsums make this exact). a_i = dequantized activation (d * q).
    abs_sum  sum_i |A_i q_i a_i| + (sum_b |m_b s_b| or sum_i |B_i a_i|): the scale of the float rounding error.
    dot_deq  float64 sum of gguf-dequantized weights times dequantized activations. It differs from dot only
             by the float32 rounding of the weights and, for Q8_1, by s being a rounded half of d * sum(q);
             this script asserts that bound.

File format, little-endian, one file per weight type named <WEIGHT TYPE>.bin (e.g. Q4_K.bin):
    char[4]  magic "TLQ8"
    u32      version = 1
    u32      weight ggml type id, u32 activation ggml type id
    u32      number of cases
  then per case:
    u32      n          elements per row (a multiple of the block size)
    u32      n_vec      activation rows
    u32      row_bytes  bytes of the weight row
    u32      act_bytes  bytes of one quantized activation row
    u8[row_bytes]             the weight row as stored in a GGUF file
    f32[n_vec][n]             activations x
    u8[n_vec][act_bytes]      expected quantized activations
    f64[n_vec]  dot   f64[n_vec]  abs_sum   f64[n_vec]  dot_deq
"""

import ctypes
import glob
import os
import struct
import sys

import numpy as np
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T
from gguf import quants

SEED = 20250211
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "q8")
N_VEC = 3

ACT_TYPE = {
    T.F32: T.F32, T.F16: T.F16, T.BF16: T.BF16,
    T.Q4_0: T.Q8_0, T.Q5_0: T.Q8_0, T.Q8_0: T.Q8_0, T.Q4_1: T.Q8_1, T.Q5_1: T.Q8_1,
    T.Q4_K: T.Q8_K, T.Q5_K: T.Q8_K, T.Q6_K: T.Q8_K,
}
# Byte offsets of the fp16 scale fields inside one weight block.
SCALE_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
# Block counts per row: a single block and odd counts ("7 x 32", "3 x 256").
BLOCK_COUNTS = {32: [1, 7, 19], 256: [1, 3, 5]}
PLAIN_COUNTS = [1, 7, 227, 613]
F32 = np.float32


# ---- Activation quantizers (float32 arithmetic where ggml uses float) ----

def quantize_q8_01(x, with_sum):
    xb = x.reshape(-1, 32).astype(F32)
    amax = np.abs(xb).max(axis=1)
    d = (amax / F32(127)).astype(F32)
    with np.errstate(divide="ignore"):
        idv = np.where(amax != 0, F32(127) / amax, F32(0)).astype(F32)
    q = np.rint(xb * idv[:, None]).astype(np.int32)  # float32 product, then ties-to-even
    assert np.all(np.abs(q) <= 127)
    out = bytearray()
    for b in range(xb.shape[0]):
        out += d[b].astype(np.float16).tobytes()
        if with_sum:
            s = F32(d[b] * F32(q[b].sum()))
            out += s.astype(np.float16).tobytes()
        out += q[b].astype(np.int8).tobytes()
    return bytes(out)


def quantize_q8_k(x):
    xb = x.reshape(-1, 256).astype(F32)
    out = bytearray()
    for row in xb:
        idx = int(np.argmax(np.abs(row)))  # first index of the largest magnitude
        mx = row[idx]
        if mx == 0:
            out += struct.pack("<f", 0.0) + bytes(256) + bytes(32)
            continue
        iscale = F32(F32(-127) / mx)
        q = np.minimum(127, np.rint(iscale * row).astype(np.int32))
        assert np.all(q >= -128)
        d = F32(F32(1) / iscale)
        out += d.tobytes() + q.astype(np.int8).tobytes()
        out += q.reshape(16, 16).sum(axis=1).astype("<i2").tobytes()
    return bytes(out)


def quantize_act(act, x):
    if act == T.Q8_0:
        return quantize_q8_01(x, False)
    if act == T.Q8_1:
        return quantize_q8_01(x, True)
    if act == T.Q8_K:
        return quantize_q8_k(x)
    if act == T.F16:
        return x.astype(np.float16).tobytes()
    if act == T.BF16:
        return quants.quantize(x, T.BF16).tobytes()
    return x.astype("<f4").tobytes()


def dequantize_act(act, data, n):
    """Activation values (float64) and, for Q8_1, the per-block s (float64)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    if act in (T.Q8_0, T.Q8_1):
        bs = 34 if act == T.Q8_0 else 36
        blocks = buf.reshape(-1, bs)
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float64).reshape(-1)
        q = blocks[:, bs - 32:].copy().view(np.int8).astype(np.float64)
        s = blocks[:, 2:4].copy().view(np.float16).astype(np.float64).reshape(-1) if act == T.Q8_1 else None
        return (d[:, None] * q).reshape(-1), s
    if act == T.Q8_K:
        blocks = buf.reshape(-1, 292)
        d = blocks[:, 0:4].copy().view("<f4").astype(np.float64).reshape(-1)
        q = blocks[:, 4:260].copy().view(np.int8).astype(np.float64)
        return (d[:, None] * q).reshape(-1), None
    if act == T.F16:
        return buf.copy().view(np.float16).astype(np.float64), None
    if act == T.BF16:
        return (buf.copy().view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64), None
    return buf.copy().view("<f4").astype(np.float64), None


# ---- Weight decoding to w = A * q + B (float64, exact) ----

def half(blocks, off):
    return blocks[:, off:off + 2].copy().view(np.float16).astype(np.float64).reshape(-1)


def nibbles(qs):
    """(nb, 16) packed bytes -> (nb, 32) quants: low nibbles are elements 0..15, high nibbles 16..31."""
    return np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int64)


def k_scale_min(scales):
    """(nb, 12) packed bytes -> 8 six-bit scales and 8 six-bit mins per block."""
    s = scales.astype(np.int64)
    sc = np.zeros((s.shape[0], 8), np.int64)
    mn = np.zeros((s.shape[0], 8), np.int64)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            mn[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
            mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, mn


def decode_weights(wtype, row, n):
    """Returns (A, q, B, M): per-element scale, integer quant and offset, and per-block offsets M for Q4_1/Q5_1
    (whose offset enters ggml's dot as M * s). Plain types: A = value, q = 1, B = 0."""
    if wtype == T.F32:
        return row.copy().view("<f4").astype(np.float64), np.ones(n, np.int64), np.zeros(n), None
    if wtype == T.F16:
        return row.copy().view(np.float16).astype(np.float64), np.ones(n, np.int64), np.zeros(n), None
    if wtype == T.BF16:
        v = (row.copy().view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return v, np.ones(n, np.int64), np.zeros(n), None
    block, size = GGML_QUANT_SIZES[wtype]
    b = row.reshape(-1, size)
    nb = b.shape[0]
    zeros = np.zeros(n)
    if wtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        has_m = wtype in (T.Q4_1, T.Q5_1)
        qs_off = (4 if has_m else 2) + (4 if wtype in (T.Q5_0, T.Q5_1) else 0)
        q = nibbles(b[:, qs_off:qs_off + 16])
        if wtype in (T.Q5_0, T.Q5_1):
            qh_off = 4 if has_m else 2
            qh = b[:, qh_off:qh_off + 4].copy().view("<u4").astype(np.int64).reshape(-1)
            q |= ((qh[:, None] >> np.arange(32)) & 1) << 4
        if not has_m:
            q -= 8 if wtype == T.Q4_0 else 16
        A = np.repeat(half(b, 0), 32)
        M = half(b, 2) if has_m else None
        B = np.repeat(M, 32) if has_m else zeros
        return A, q.reshape(-1), B, M
    if wtype == T.Q8_0:
        return np.repeat(half(b, 0), 32), b[:, 2:].copy().view(np.int8).astype(np.int64).reshape(-1), zeros, None
    if wtype in (T.Q4_K, T.Q5_K):
        d, dmin = half(b, 0), half(b, 2)
        sc, mn = k_scale_min(b[:, 4:16])
        qs = b[:, 16:144] if wtype == T.Q4_K else b[:, 48:176]
        q = np.zeros((nb, 256), np.int64)
        for s in range(8):
            g = qs[:, 32 * (s // 2): 32 * (s // 2) + 32].astype(np.int64)
            q[:, 32 * s: 32 * s + 32] = (g >> (4 * (s % 2))) & 15
            if wtype == T.Q5_K:
                q[:, 32 * s: 32 * s + 32] |= ((b[:, 16:48].astype(np.int64) >> s) & 1) << 4
        A = np.repeat(d[:, None] * sc, 32, axis=1).reshape(-1)
        B = np.repeat(-(dmin[:, None] * mn), 32, axis=1).reshape(-1)
        return A, q.reshape(-1), B, None
    if wtype == T.Q6_K:
        ql, qh = b[:, 0:128].astype(np.int64), b[:, 128:192].astype(np.int64)
        scales = b[:, 192:208].copy().view(np.int8).astype(np.int64)
        d = half(b, 208)
        q = np.zeros((nb, 256), np.int64)
        for h in range(2):
            L0, L1, H = ql[:, 64 * h: 64 * h + 32], ql[:, 64 * h + 32: 64 * h + 64], qh[:, 32 * h: 32 * h + 32]
            base = 128 * h
            q[:, base + 0: base + 32] = (L0 & 15) | ((H & 3) << 4)
            q[:, base + 32: base + 64] = (L1 & 15) | (((H >> 2) & 3) << 4)
            q[:, base + 64: base + 96] = (L0 >> 4) | (((H >> 4) & 3) << 4)
            q[:, base + 96: base + 128] = (L1 >> 4) | ((H >> 6) << 4)
        A = np.repeat(d[:, None] * scales, 16, axis=1).reshape(-1)
        return A, (q - 32).reshape(-1), zeros, None
    raise ValueError(wtype)


def gguf_dequantize(wtype, row):
    return np.asarray(quants.dequantize(row, wtype), dtype=np.float32).reshape(-1)


# ---- Rows ----

def random_halves(rng, count):
    mag = np.exp2(rng.uniform(-14.0, 1.0, count))
    sign = np.where(rng.integers(0, 2, count) == 1, -1.0, 1.0)
    return (sign * mag).astype(np.float16)


def weight_rows(rng, wtype, n):
    block, size = GGML_QUANT_SIZES[wtype]
    if block == 1:
        vals = (rng.standard_normal(n) * 0.05).astype(np.float32)
        if wtype == T.F32:
            return [vals.view(np.uint8)]
        if wtype == T.F16:
            return [vals.astype(np.float16).view(np.uint8)]
        return [quants.quantize(vals, T.BF16).view(np.uint8).reshape(-1)]
    nb = n // block
    rows = []
    if wtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0):
        w = (rng.standard_normal(n) * 0.05 + rng.normal(0, 0.01)).astype(np.float32)
        rows.append(quants.quantize(w, wtype).view(np.uint8).reshape(-1))
    while len(rows) < 2:
        blocks = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
        for off in SCALE_FIELDS[wtype]:
            blocks[:, off:off + 2] = random_halves(rng, nb).view(np.uint8).reshape(nb, 2)
        rows.append(blocks.reshape(-1))
    return rows


def activations(rng, n, act):
    block = {T.Q8_0: 32, T.Q8_1: 32, T.Q8_K: 256}.get(act, 1)
    x = rng.standard_normal(n).astype(np.float32)
    if block == 1:
        return x
    nb = n // block
    x = (x.reshape(nb, block) * np.exp2(rng.uniform(-8, 8, (nb, 1)))).astype(np.float32)
    if nb >= 3:
        x[1] = 0.0
        # amax 127 -> id = 1 exactly: k + 0.5 are exact ties for the rounding.
        x[2] = (rng.integers(-126, 126, block) + 0.5).astype(np.float32)
        x[2, 3] = -127.0
        x[2, block - 2] = 127.0  # same magnitude, later: Q8_K keeps the first (negative) sign
    return x.reshape(-1)


# ---- Cases ----

def case_bytes(rng, wtype, act, n, row):
    x = np.stack([activations(rng, n, act) for _ in range(N_VEC)])
    A, q, B, M = decode_weights(wtype, row, n)
    w_gguf = gguf_dequantize(wtype, row)
    exact = A * q + B
    assert np.array_equal(exact.astype(F32), w_gguf), "decoder disagrees with gguf"  # values; zeros may differ in sign
    out = bytearray()
    acts, dots, abs_sums, deqs = [], [], [], []
    for j in range(N_VEC):
        data = quantize_act(act, x[j])
        a, s = dequantize_act(act, data, n)
        main = A * q * a
        if M is not None:  # Q4_1 / Q5_1: offset through the stored s
            off = M * s
            m_err = np.sum(np.abs(M) * np.abs(s - a.reshape(-1, 32).sum(axis=1)))
        else:
            off = B * a
            m_err = 0.0
        dot = main.sum() + off.sum()
        abs_sum = np.abs(main).sum() + np.abs(off).sum()
        deq = np.sum(w_gguf.astype(np.float64) * a)
        # dot_deq vs dot: float32 weight rounding (2^-24 relative per weight) plus the rounding of s.
        bound = 2.0 ** -24 * np.sum(np.abs(w_gguf.astype(np.float64) * a)) + m_err + 1e-30
        assert abs(deq - dot) <= bound * 1.01 + 1e-12 * abs_sum, (wtype.name, n, deq, dot, bound)
        acts.append(data)
        dots.append(dot)
        abs_sums.append(abs_sum)
        deqs.append(deq)
    act_bytes = len(acts[0])
    out += struct.pack("<IIII", n, N_VEC, row.size, act_bytes)
    out += row.tobytes() + x.astype("<f4").tobytes() + b"".join(acts)
    out += np.array(dots, "<f8").tobytes() + np.array(abs_sums, "<f8").tobytes() + np.array(deqs, "<f8").tobytes()
    return bytes(out)


def write_type(rng, wtype):
    act = ACT_TYPE[wtype]
    block, _ = GGML_QUANT_SIZES[wtype]
    counts = PLAIN_COUNTS if block == 1 else [c * block for c in BLOCK_COUNTS[block]]
    cases = []
    for n in counts:
        for row in weight_rows(rng, wtype, n):
            cases.append(case_bytes(rng, wtype, act, n, np.ascontiguousarray(row, dtype=np.uint8)))
    out = b"TLQ8" + struct.pack("<IIII", 1, int(wtype), int(act), len(cases)) + b"".join(cases)
    with open(os.path.join(OUT, f"{wtype.name}.bin"), "wb") as f:
        f.write(out)
    return len(out)


# ---- Cross-check against llama.cpp's own functions ----

GGML_FROM_FLOAT = {T.Q8_0: "quantize_row_q8_0", T.Q8_1: "quantize_row_q8_1", T.Q8_K: "quantize_row_q8_K",
                   T.F16: "ggml_cpu_fp32_to_fp16", T.BF16: "ggml_cpu_fp32_to_bf16"}
GGML_VEC_DOT = {T.F32: "ggml_vec_dot_f32", T.F16: "ggml_vec_dot_f16", T.BF16: "ggml_vec_dot_bf16",
                T.Q4_0: "ggml_vec_dot_q4_0_q8_0", T.Q4_1: "ggml_vec_dot_q4_1_q8_1", T.Q5_0: "ggml_vec_dot_q5_0_q8_0",
                T.Q5_1: "ggml_vec_dot_q5_1_q8_1", T.Q8_0: "ggml_vec_dot_q8_0_q8_0", T.Q4_K: "ggml_vec_dot_q4_K_q8_K",
                T.Q5_K: "ggml_vec_dot_q5_K_q8_K", T.Q6_K: "ggml_vec_dot_q6_K_q8_K"}


def read_fixture(path):
    data = open(path, "rb").read()
    assert data[:4] == b"TLQ8"
    _, wtype, act, count = struct.unpack_from("<IIII", data, 4)
    pos = 20
    cases = []
    for _ in range(count):
        n, n_vec, row_bytes, act_bytes = struct.unpack_from("<IIII", data, pos)
        pos += 16
        row = data[pos:pos + row_bytes]
        pos += row_bytes
        x = np.frombuffer(data, "<f4", n * n_vec, pos).reshape(n_vec, n)
        pos += 4 * n * n_vec
        acts = [data[pos + j * act_bytes: pos + (j + 1) * act_bytes] for j in range(n_vec)]
        pos += act_bytes * n_vec
        dot, abs_sum = (np.frombuffer(data, "<f8", n_vec, pos + 8 * n_vec * k) for k in range(2))
        pos += 24 * n_vec
        cases.append((n, row, x, acts, dot, abs_sum))
    assert pos == len(data)
    return T(wtype), T(act), cases


def check_llama_cpp():
    default = os.path.expanduser("~/.cache/tilellm/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin")
    lib = ctypes.CDLL(os.path.join(os.environ.get("LLAMA_CPP_BIN", default), "libggml-cpu.so"))
    lib.ggml_cpu_init()  # fills ggml's half -> float table, used by the vec_dot functions
    failures = 0
    for path in sorted(glob.glob(os.path.join(OUT, "*.bin"))):
        wtype, act, cases = read_fixture(path)
        block = GGML_QUANT_SIZES[wtype][0]
        worst = 0.0
        for n, row, x, acts, dot, abs_sum in cases:
            for j, want in enumerate(acts):
                if act == T.F32:
                    got = x[j].astype("<f4").tobytes()
                else:
                    out = ctypes.create_string_buffer(len(want))
                    xj = np.ascontiguousarray(x[j])
                    getattr(lib, GGML_FROM_FLOAT[act])(xj.ctypes.data_as(ctypes.c_void_p), out, ctypes.c_int64(n))
                    got = out.raw
                if got != want:
                    failures += 1
                    print(f"{wtype.name}: n={n} vec {j}: ggml's activation bytes differ", file=sys.stderr)
                s = ctypes.c_float()
                getattr(lib, GGML_VEC_DOT[wtype])(ctypes.c_int(n), ctypes.byref(s), ctypes.c_size_t(0),
                                                  ctypes.c_char_p(row), ctypes.c_size_t(0), ctypes.c_char_p(want),
                                                  ctypes.c_size_t(0), ctypes.c_int(1))
                # The C++ test's bound (test_quants_q8.cpp, dot_tolerance).
                L = n / 8 + 32 if block == 1 else 2 * (n // block) + 16
                err = abs(s.value - dot[j])
                worst = max(worst, err / abs_sum[j] if abs_sum[j] else 0.0)
                if err > L * 2.0 ** -24 * abs_sum[j] + 1e-35:
                    failures += 1
                    print(f"{wtype.name}: n={n} vec {j}: ggml's dot {s.value} vs {dot[j]}", file=sys.stderr)
        print(f"{wtype.name:5s} x {act.name:4s}: {len(cases)} cases; max |ggml - dot| / abs_sum = {worst:.2e}")
    if failures:
        sys.exit(f"{failures} mismatches against llama.cpp")
    print("activation bytes identical to ggml's; ggml's dot products within the test's bound")


def main():
    if "--check-llama-cpp" in sys.argv[1:]:
        check_llama_cpp()
        return
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(SEED)
    total = 0
    for wtype in [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K]:
        total += write_type(rng, wtype)
    print(f"wrote {total} bytes to {os.path.normpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
