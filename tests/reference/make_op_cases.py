#!/usr/bin/env python3
"""Reference cases for the CPU backend ops (src/backends/backend.h), computed in float64 with NumPy.

The oracle shares no code or formulation with the C++ ops: attention is a plain (whole-row) softmax in float64,
not a block-wise online softmax; RoPE angles, RMSNorm, SiLU and GELU are evaluated in float64 from their
textbook definitions; quantized weights are dequantized by the Python gguf package (gguf.quants.dequantize) and
multiplied in float64. Run from anywhere:

    python3 tests/reference/make_op_cases.py            # writes tests/data/ops/*.bin

Output is deterministic (fixed seed per case, derived from the case name), so a re-run reproduces the committed
fixtures byte for byte. Sizes are odd on purpose (37, 129, 589 = 576 + 13; 5 and 33 tokens; 9 query heads over
3 KV heads; positions starting at a non-zero n_past; sliding windows shorter than the sequence) so that remainder
loops, thread splits and block edges are exercised. Inputs are random and never zero.

Quantized weights: Q8_0 and Q4_0 come from gguf.quants.quantize of random floats. The gguf package (0.19) has
no quantizer for Q4_K and Q6_K, so this script packs those blocks itself from random floats (a plain
min/max quantizer, enough to give realistic weights); the reference still only trusts gguf.quants.dequantize of
the packed bytes, so a packing mistake here could only change which weights are tested, not the expected values.

File format (one case per file, tests/data/ops/<case>.bin), little-endian, a list of named arrays:
    char[4]  magic "TLOP"
    u32      version = 1
    u32      number of arrays
  then per array:
    u32      name length, then the name (ASCII, no terminator)
    u32      dtype: 0 = f32, 1 = f64, 2 = i32, 3 = u8
    u32      ndim, then u64[ndim] dims (row-major, last dim fastest; ndim 0 is a scalar of one element)
    payload  prod(dims) elements of dtype

Arrays per op (the name of the case file starts with the op):
  rmsnorm_*:   x f32[rows][n], w f32[n], eps f32, y f64[rows][n]
  rope_*:      x f32[n_tok][n_heads][head_dim], pos i32[n_tok], rope_dim i32, mode i32 (0 Norm, 1 Neox),
               base f32, freq_scale f32, n_pos i32 (RoPE table size), y f64[n_tok][n_heads][head_dim],
               cos_sin f64[n_tok][rope_dim/2][2] (cos and sin of every angle at pos[t])
  glu_*:       gate f32[n], up f32[n], act i32 (0 SiLU, 1 GELU tanh form), y f64[n]
  add_*:       acc f32[n], x f32[n], y f64[n]
  matmul_*:    type i32 (GGUF type id), n_in i32, n_out i32, w u8[n_out][row_bytes] (GGUF row layout),
               x f32[n_tok][n_in], y f64[n_tok][n_out], y_abs f32[n_tok][n_out] = sum_i |w_i x_i|
               (the scale of the float32 rounding error)
  embed_*:     type i32, n_in i32, n_out i32 (vocabulary), table u8[n_out][row_bytes], ids i32[n_tok],
               scale f32, y f64[n_tok][n_in]
  attention_*: n_head, n_head_kv, head_dim, window, n_past, n_ctx i32; scale f32;
               q f32[n_tok][n_head][head_dim]; k, v f32[n_past + n_tok][n_head_kv * head_dim] (the full
               history: row p holds the key/value at position p; the query tokens sit at n_past ..);
               y f64[n_tok][n_head][head_dim] with K/V as given; y_f16 f64[...] with K/V rounded to float16
               (what an F16 KV cache holds); y_abs f32[...] = sum_j p_j |v_j| (the output's error scale);
               score_abs f64 = max over queries and keys of scale * sum_i |q_i k_i| (the score's error scale)
"""

import math
import os
import struct
import zlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES
from gguf import quants

SEED = 20240911
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "ops")

# dtype codes of the file format (see above).
CODE = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int32): 2, np.dtype(np.uint8): 3}


def rng_for(name):
    # One generator per case: adding or reordering cases leaves the others' bytes unchanged.
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


def nonzero_normal(rng, shape, scale=1.0):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    x[x == 0] = np.float32(scale)
    return x


def write_case(name, arrays):
    """arrays: list of (name, numpy array); scalars are passed as 0-d arrays."""
    os.makedirs(OUT, exist_ok=True)
    out = bytearray(b"TLOP")
    out += struct.pack("<II", 1, len(arrays))
    for key, a in arrays:
        a = np.ascontiguousarray(a)
        code = CODE[a.dtype]
        kb = key.encode("ascii")
        out += struct.pack("<I", len(kb)) + kb
        out += struct.pack("<II", code, a.ndim)
        for d in a.shape:
            out += struct.pack("<Q", d)
        out += a.astype(a.dtype.newbyteorder("<")).tobytes()
    with open(os.path.join(OUT, name + ".bin"), "wb") as f:
        f.write(out)
    return len(out)


def scalar(v, dtype):
    return np.array(v, dtype=dtype)


# ---- Quantized weights ----

def to_f16_bytes(v):
    return np.asarray(v, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def pack_q4_k(x):
    """x: f32[n_blocks][256] -> u8[n_blocks][144]. w = d*sc*q - dmin*mn per 32-element sub-block."""
    nb = x.shape[0]
    sub = x.reshape(nb, 8, 32).astype(np.float64)
    lo = np.minimum(sub.min(axis=-1), 0.0)  # the offset only ever shifts up (mn >= 0)
    hi = sub.max(axis=-1)
    scale_f = (hi - lo) / 15.0
    min_f = -lo
    d = (scale_f.max(axis=-1) / 63.0).astype(np.float16)
    dmin = (min_f.max(axis=-1) / 63.0).astype(np.float16)
    df = d.astype(np.float64)[:, None]
    dminf = dmin.astype(np.float64)[:, None]
    sc = np.clip(np.rint(np.divide(scale_f, df, out=np.zeros_like(scale_f), where=df != 0)), 0, 63)
    mn = np.clip(np.rint(np.divide(min_f, dminf, out=np.zeros_like(min_f), where=dminf != 0)), 0, 63)
    step = (df * sc)[:, :, None]
    off = (dminf * mn)[:, :, None]
    q = np.clip(np.rint(np.divide(sub + off, step, out=np.zeros_like(sub), where=step != 0)), 0, 15)
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    q = q.astype(np.uint8)
    scales = np.zeros((nb, 12), dtype=np.uint8)
    for s in range(4):
        scales[:, s] = (sc[:, s] & 63) | ((sc[:, s + 4] >> 4) << 6)
        scales[:, s + 4] = (mn[:, s] & 63) | ((mn[:, s + 4] >> 4) << 6)
        scales[:, s + 8] = (sc[:, s + 4] & 15) | ((mn[:, s + 4] & 15) << 4)
    qs = np.zeros((nb, 128), dtype=np.uint8)
    for g in range(4):
        qs[:, 32 * g:32 * g + 32] = q[:, 2 * g, :] | (q[:, 2 * g + 1, :] << 4)
    return np.concatenate([to_f16_bytes(d), to_f16_bytes(dmin), scales, qs], axis=1)


def pack_q6_k(x):
    """x: f32[n_blocks][256] -> u8[n_blocks][210]. w = d*sc*(q - 32) per 16-element sub-block."""
    nb = x.shape[0]
    sub = x.reshape(nb, 16, 16).astype(np.float64)
    scale_f = np.abs(sub).max(axis=-1) / 31.0
    d = (scale_f.max(axis=-1) / 127.0).astype(np.float16)
    df = d.astype(np.float64)[:, None]
    sc = np.clip(np.rint(np.divide(scale_f, df, out=np.zeros_like(scale_f), where=df != 0)), -128, 127)
    step = (df * sc)[:, :, None]
    q = np.clip(np.rint(np.divide(sub, step, out=np.zeros_like(sub), where=step != 0)), -32, 31) + 32
    q = q.astype(np.uint8).reshape(nb, 256)
    ql = np.zeros((nb, 128), dtype=np.uint8)
    qh = np.zeros((nb, 64), dtype=np.uint8)
    for h in range(2):
        e = q[:, 128 * h:128 * h + 128]
        q0, q1, q2, q3 = e[:, 0:32], e[:, 32:64], e[:, 64:96], e[:, 96:128]
        ql[:, 64 * h:64 * h + 32] = (q0 & 15) | ((q2 & 15) << 4)
        ql[:, 64 * h + 32:64 * h + 64] = (q1 & 15) | ((q3 & 15) << 4)
        qh[:, 32 * h:32 * h + 32] = (q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6)
    return np.concatenate([ql, qh, sc.astype(np.int8).view(np.uint8), to_f16_bytes(d)], axis=1)


def quantize(w, qtype):
    """w: f32[n_out][n_in] -> (u8[n_out][row_bytes], exact dequantized f32[n_out][n_in])."""
    n_out, n_in = w.shape
    if qtype == T.F32:
        raw = w.view(np.uint8).reshape(n_out, -1)
    elif qtype in (T.F16, T.Q8_0, T.Q4_0):
        raw = quants.quantize(w, qtype)
        raw = np.ascontiguousarray(raw).view(np.uint8).reshape(n_out, -1)
    elif qtype in (T.Q4_K, T.Q6_K):
        blocks = w.reshape(-1, 256)
        packed = pack_q4_k(blocks) if qtype == T.Q4_K else pack_q6_k(blocks)
        raw = packed.reshape(n_out, -1)
    else:
        raise ValueError(qtype)
    block, type_size = GGML_QUANT_SIZES[qtype]
    assert raw.shape == (n_out, n_in // block * type_size), (qtype, raw.shape)
    deq = quants.dequantize(raw, qtype).astype(np.float32).reshape(n_out, n_in)
    # Sanity: the packed weights approximate the floats they came from (a broken packer would not).
    err = np.abs(deq.astype(np.float64) - w).max() / np.abs(w).max()
    assert err < 0.2, (qtype.name, err)
    assert np.all(np.isfinite(deq)) and np.count_nonzero(deq) > deq.size // 2
    return np.ascontiguousarray(raw), deq


# ---- Cases ----

def rmsnorm_case(name, rows, n, eps, x_scale=1.0):
    rng = rng_for(name)
    x = nonzero_normal(rng, (rows, n), x_scale)
    w = nonzero_normal(rng, (n,))
    eps32 = np.float32(eps)
    x64 = x.astype(np.float64)
    y = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + float(eps32)) * w.astype(np.float64)
    return write_case(name, [("x", x), ("w", w), ("eps", scalar(eps32, np.float32)), ("y", y)])


def rope_angles(pos, rope_dim, base, freq_scale):
    i = np.arange(rope_dim // 2, dtype=np.float64)
    inv_freq = float(np.float32(base)) ** (-2.0 * i / rope_dim)
    return pos.astype(np.float64)[:, None] * float(np.float32(freq_scale)) * inv_freq[None, :]


def rope_case(name, n_tok, n_heads, head_dim, rope_dim, mode, n_past, base, freq_scale, n_pos):
    rng = rng_for(name)
    x = nonzero_normal(rng, (n_tok, n_heads, head_dim))
    pos = (n_past + np.arange(n_tok)).astype(np.int32)
    assert pos[-1] < n_pos
    theta = rope_angles(pos, rope_dim, base, freq_scale)  # [n_tok][rope_dim/2]
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    y = x.astype(np.float64)
    half = rope_dim // 2
    if mode == 0:  # Norm: pairs (2i, 2i+1)
        a, b = y[..., 0:rope_dim:2].copy(), y[..., 1:rope_dim:2].copy()
        y[..., 0:rope_dim:2] = a * c - b * s
        y[..., 1:rope_dim:2] = a * s + b * c
    else:  # Neox: pairs (i, i + rope_dim/2)
        a, b = y[..., :half].copy(), y[..., half:rope_dim].copy()
        y[..., :half] = a * c - b * s
        y[..., half:rope_dim] = a * s + b * c
    cos_sin = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    return write_case(name, [
        ("x", x), ("pos", pos), ("rope_dim", scalar(rope_dim, np.int32)), ("mode", scalar(mode, np.int32)),
        ("base", scalar(base, np.float32)), ("freq_scale", scalar(freq_scale, np.float32)),
        ("n_pos", scalar(n_pos, np.int32)), ("y", y), ("cos_sin", cos_sin)])


def glu_case(name, n, act):
    rng = rng_for(name)
    gate = nonzero_normal(rng, (n,), 2.5)
    # A few large magnitudes: the saturated tails of SiLU and GELU (exp of large arguments, tanh near +-1).
    idx = rng.choice(n, size=16, replace=False)
    gate[idx] = (rng.uniform(8.0, 40.0, 16) * rng.choice([-1.0, 1.0], 16)).astype(np.float32)
    up = nonzero_normal(rng, (n,))
    g = gate.astype(np.float64)
    if act == 0:
        a = g / (1.0 + np.exp(-g))
    else:
        a = 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))
    y = a * up.astype(np.float64)
    return write_case(name, [("gate", gate), ("up", up), ("act", scalar(act, np.int32)), ("y", y)])


def add_case(name, n):
    rng = rng_for(name)
    acc = nonzero_normal(rng, (n,))
    x = nonzero_normal(rng, (n,), 1e-3)
    y = acc.astype(np.float64) + x.astype(np.float64)
    return write_case(name, [("acc", acc), ("x", x), ("y", y)])


def matmul_case(name, qtype, n_in, n_out, n_tok):
    rng = rng_for(name)
    w = nonzero_normal(rng, (n_out, n_in), 0.05)
    raw, deq = quantize(w, qtype)
    x = nonzero_normal(rng, (n_tok, n_in))
    prod = x.astype(np.float64)[:, None, :] * deq.astype(np.float64)[None, :, :]  # [n_tok][n_out][n_in]
    y = prod.sum(axis=-1)
    y_abs = np.abs(prod).sum(axis=-1)
    return write_case(name, [
        ("type", scalar(int(qtype), np.int32)), ("n_in", scalar(n_in, np.int32)),
        ("n_out", scalar(n_out, np.int32)), ("w", raw), ("x", x), ("y", y), ("y_abs", y_abs.astype(np.float32))])


def embed_case(name, qtype, n_in, n_vocab, ids, scale):
    rng = rng_for(name)
    table = nonzero_normal(rng, (n_vocab, n_in), 0.05)
    raw, deq = quantize(table, qtype)
    ids = np.asarray(ids, dtype=np.int32)
    scale32 = np.float32(scale)
    y = deq.astype(np.float64)[ids] * float(scale32)
    return write_case(name, [
        ("type", scalar(int(qtype), np.int32)), ("n_in", scalar(n_in, np.int32)),
        ("n_out", scalar(n_vocab, np.int32)), ("table", raw), ("ids", ids),
        ("scale", scalar(scale32, np.float32)), ("y", y)])


def attention_ref(q, k, v, n_past, n_head, n_head_kv, head_dim, window, scale):
    """Plain float64 softmax over each query's visible keys. q: [n_tok][n_head][hd]; k, v: [n_pos][kv_dim]."""
    n_tok = q.shape[0]
    group = n_head // n_head_kv
    q64, k64, v64 = q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)
    y = np.zeros((n_tok, n_head, head_dim))
    y_abs = np.zeros((n_tok, n_head, head_dim))
    score_abs = 0.0
    for t in range(n_tok):
        p = n_past + t
        first = max(0, p - window + 1) if window > 0 else 0
        for h in range(n_head):
            kvh = h // group
            ks = k64[first:p + 1, kvh * head_dim:(kvh + 1) * head_dim]
            vs = v64[first:p + 1, kvh * head_dim:(kvh + 1) * head_dim]
            s = scale * (ks @ q64[t, h])
            score_abs = max(score_abs, float((scale * (np.abs(ks) @ np.abs(q64[t, h]))).max()))
            e = np.exp(s - s.max())
            prob = e / e.sum()
            y[t, h] = prob @ vs
            y_abs[t, h] = prob @ np.abs(vs)
    return y, y_abs, score_abs


def attention_case(name, n_head, n_head_kv, head_dim, n_past, n_tok, window, scale, q_scale=1.0, n_ctx=None):
    rng = rng_for(name)
    kv_dim = n_head_kv * head_dim
    n_pos = n_past + n_tok
    q = nonzero_normal(rng, (n_tok, n_head, head_dim), q_scale)
    k = nonzero_normal(rng, (n_pos, kv_dim))
    v = nonzero_normal(rng, (n_pos, kv_dim))
    scale32 = np.float32(scale)
    y, y_abs, score_abs = attention_ref(q, k, v, n_past, n_head, n_head_kv, head_dim, window, float(scale32))
    k16 = k.astype(np.float16).astype(np.float32)
    v16 = v.astype(np.float16).astype(np.float32)
    y16, _, _ = attention_ref(q, k16, v16, n_past, n_head, n_head_kv, head_dim, window, float(scale32))
    n_ctx = n_ctx or n_pos + 7
    ints = [("n_head", n_head), ("n_head_kv", n_head_kv), ("head_dim", head_dim), ("window", window),
            ("n_past", n_past), ("n_ctx", n_ctx)]
    return write_case(name, [(key, scalar(val, np.int32)) for key, val in ints] + [
        ("scale", scalar(scale32, np.float32)), ("q", q), ("k", k), ("v", v), ("y", y), ("y_f16", y16),
        ("y_abs", y_abs.astype(np.float32)), ("score_abs", scalar(score_abs, np.float64))])


def main():
    for f in os.listdir(OUT) if os.path.isdir(OUT) else []:
        if f.endswith(".bin"):
            os.remove(os.path.join(OUT, f))
    total = 0
    # RMSNorm: a hidden-state row size (576 + 13), a short odd row with a large mean square, rows whose mean
    # square is near eps (so a wrong or missing eps shows), and per-head rows (qk-norm: 5 tokens x 9 heads of
    # head_dim 80, or 9 heads of 256, normalized with one [head_dim] weight).
    total += rmsnorm_case("rmsnorm_5x589", 5, 589, 1e-6)
    total += rmsnorm_case("rmsnorm_1x37_large", 1, 37, 1e-5, x_scale=300.0)
    total += rmsnorm_case("rmsnorm_3x37_near_eps", 3, 37, 1e-5, x_scale=3e-3)
    total += rmsnorm_case("rmsnorm_heads_45x80", 45, 80, 1e-6)
    total += rmsnorm_case("rmsnorm_heads_9x256", 9, 256, 1e-6)
    # RoPE: both pairings, full and partial rotation (rope_dim < head_dim), positions from a non-zero n_past,
    # a linear frequency scale, and a late position in a long table.
    total += rope_case("rope_norm_64", 5, 9, 64, 64, 0, 17, 10000.0, 1.0, 64)
    total += rope_case("rope_norm_partial_80", 17, 3, 80, 32, 0, 100, 10000.0, 0.25, 200)
    total += rope_case("rope_neox_256", 1, 4, 256, 256, 1, 4095, 1000000.0, 1.0, 4096)
    total += rope_case("rope_neox_partial_80", 5, 9, 80, 48, 1, 3, 500000.0, 1.0, 16)
    # GLU: odd lengths, one longer than the 2048-element grain so two threads split it.
    total += glu_case("glu_silu_589", 589, 0)
    total += glu_case("glu_silu_4109", 4109, 0)
    total += glu_case("glu_gelu_589", 589, 1)
    total += glu_case("glu_gelu_4109", 4109, 1)
    total += add_case("add_4133", 4133)
    # Matmul: every weight type at odd row counts. The test runs the first token alone (the single-token path),
    # the first 5 (a partial token tile of the 16-token prefill path) and all of them: 21 = one full tile plus
    # a partial one, 33 (F32, whose rows are short) = two full tiles plus one.
    total += matmul_case("matmul_f32", T.F32, 37, 129, 33)
    total += matmul_case("matmul_f16", T.F16, 589, 37, 21)
    total += matmul_case("matmul_q8_0", T.Q8_0, 416, 65, 21)
    total += matmul_case("matmul_q4_0", T.Q4_0, 672, 37, 21)
    total += matmul_case("matmul_q4_k", T.Q4_K, 768, 37, 21)
    total += matmul_case("matmul_q6_k", T.Q6_K, 768, 65, 21)
    # Embedding: first, last and repeated ids; Gemma's sqrt(n_embd) scale and the plain scale of 1.
    total += embed_case("embed_f16", T.F16, 589, 37, [0, 36, 5, 5, 17], math.sqrt(589))
    total += embed_case("embed_q8_0", T.Q8_0, 416, 65, [64, 0, 31, 31, 1, 47, 3], 1.0)
    total += embed_case("embed_q4_k", T.Q4_K, 512, 33, [32, 0, 7], math.sqrt(512))
    total += embed_case("embed_q6_k", T.Q6_K, 256, 65, [64, 1, 1, 30, 0], 0.5)
    # Attention: GQA 9/3 after a 40-token history (keys span two 32-blocks); a 45-key sliding window, shorter
    # than the 65-position sequence, over a 17-token batch with head_dim 80 (the window start moves with each
    # query and is not block-aligned); multi-query decode with head_dim 256; a prefill from position 0 with a
    # 5-key window and a sharp softmax (scores of tens, which overflow exp() in float without the max shift).
    total += attention_case("attention_gqa_64", 9, 3, 64, 40, 5, 0, 1.0 / 8.0)
    total += attention_case("attention_window_80", 4, 2, 80, 48, 17, 45, 1.0 / math.sqrt(80))
    total += attention_case("attention_mqa_256", 4, 1, 256, 45, 1, 0, 1.0 / 16.0)
    total += attention_case("attention_sharp_64", 4, 4, 64, 0, 12, 5, 1.0, q_scale=0.6)
    print(f"wrote {total} bytes to {os.path.normpath(OUT)}")
    assert total < 2 * 1024 * 1024


if __name__ == "__main__":
    main()
