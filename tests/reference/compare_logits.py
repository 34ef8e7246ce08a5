#!/usr/bin/env python3
"""Compare a candidate's logits with the float64 NumPy reference (forward.py), position by position.

    python3 compare_logits.py MODEL --tokens 1,2,3 --candidate FILE.npy [--threshold 1e-3] [--kv-f16]
    python3 compare_logits.py MODEL --text "Some prompt" --llama-cpp [--per-layer] [--per-op BLOCK]

The candidate is a float32 (or float64) .npy of shape [n_tokens, n_vocab] holding the logits of every position, as
written by `tilellm dump-logits -m MODEL --tokens 1,2,3 --out FILE.npy`. --kv-f16 rounds the reference's K and V to
float16, for a candidate that keeps an fp16 KV cache (that rounding alone moves these models' logits by ~1e-3).

--llama-cpp takes llama.cpp's logits as the candidate instead (llama-cpp-python, logits_all=True; needs
`source tests/reference/llama_cpp_env.sh`); that is how the reference itself is validated. llama.cpp quantizes
activations to 8 bits inside its quantized matmuls, so expect 1e-2..1e-1, not 1e-3, end to end. Two finer checks
localize a disagreement:
  --per-layer   each transformer block is fed llama.cpp's own input of that block (teacher forcing) and its
                residual increment compared with llama.cpp's;
  --per-op IL   each op of block IL is fed llama.cpp's own inputs of that op; with --emulate-ggml-q8 the
                reference rounds matmul activations the way ggml's x86 CPU backend does (Q8_0/Q8_1/Q8_K blocks),
                which brings every matmul and norm to ~1e-7 and leaves only attention and GELU at ~3e-4
                (llama.cpp's f16 KQ/softmax path and its f16 GELU table). A wrong formula shows up as a large error
                on one op.

Per position it prints the relative L2 error ||cand - ref|| / ||ref||, the max absolute difference, and both
argmaxes. Exit status: 0 when every relative error is <= threshold, 1 when one is above it, 2 on bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import forward  # noqa: E402


def rel_l2(cand: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Per row ||cand - ref||_2 / ||ref||_2 (float64)."""
    c = cand.astype(np.float64)
    return np.linalg.norm(c - ref, axis=1) / np.maximum(np.linalg.norm(ref, axis=1), 1e-30)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """Relative L2 error of a against b, over the whole array."""
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def compare(ref: np.ndarray, cand: np.ndarray, threshold: float, out=sys.stdout) -> bool:
    err = rel_l2(cand, ref)
    maxabs = np.abs(cand.astype(np.float64) - ref).max(axis=1)
    ok = True
    print(f"{'pos':>4} {'rel_l2':>10} {'max_abs':>10} {'ref_argmax':>10} {'cand_argmax':>11}", file=out)
    for i in range(ref.shape[0]):
        a_ref, a_c = int(ref[i].argmax()), int(cand[i].argmax())
        bad = err[i] > threshold
        ok &= not bad
        print(f"{i:>4} {err[i]:>10.3e} {maxabs[i]:>10.3e} {a_ref:>10} {a_c:>11}"
              + ("  > threshold" if bad else "") + ("  argmax differs" if a_ref != a_c else ""), file=out)
    print(f"max rel_l2 {err.max():.3e}  mean {err.mean():.3e}  threshold {threshold:g}  "
          f"argmax agreement {np.mean(ref.argmax(1) == cand.argmax(1)) * 100:.1f}%  -> {'OK' if ok else 'FAIL'}",
          file=out)
    return ok


# ---- emulation of ggml's activation quantization (diagnostics only) ----------------------------------------
_K_QUANTS = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}


def ggml_q8_activations(x: np.ndarray, weight_type, block_sums: bool = False):
    """x rounded as ggml's CPU backend rounds a matmul's activations for a weight of weight_type: Q8_K (blocks of
    256, float32 scale -127/signed-max) for k-quants, Q8_0/Q8_1 (blocks of 32, scale amax/127 stored as f16) for
    the 32-blocks, f16 for F16 weights, unchanged for F32.
    With block_sums (Q8_1, for weights with a per-block minimum), also returns per block the difference between
    the f16-rounded block sum ggml multiplies the weight minimum with, f16(d * sum(q)), and f16(d) * sum(q)."""
    name = weight_type.name
    if name == "F32":
        return x
    if name in ("F16", "BF16"):
        return x.astype(np.float16).astype(np.float64)
    bs = 256 if name in _K_QUANTS else 32
    xb = x.astype(np.float32).reshape(*x.shape[:-1], x.shape[-1] // bs, bs)
    if bs == 32:  # ggml's x86 quantize_row_q8_0/q8_1: id = 127/amax, round half to even
        amax = np.abs(xb).max(-1, keepdims=True)
        inv = np.divide(np.float32(127), amax, out=np.zeros_like(amax), where=amax > 0)
        d = amax / np.float32(127)
        q = np.round(xb * inv)
        y = q * d.astype(np.float16).astype(np.float32)
        if block_sums:
            qs = q.sum(-1, keepdims=True)
            s16 = (d * qs).astype(np.float16).astype(np.float64)
            ds = s16 - d.astype(np.float16).astype(np.float64) * qs
            return y.reshape(x.shape).astype(np.float64), ds[..., 0]
    else:
        i = np.abs(xb).argmax(-1)[..., None]
        mx = np.take_along_axis(xb, i, -1)
        iscale = np.divide(np.float32(-127), mx, out=np.zeros_like(mx), where=mx != 0)
        q = np.minimum(127, np.round(iscale * xb))
        y = q * np.divide(np.float32(1), iscale, out=np.zeros_like(iscale), where=iscale != 0)
    return y.reshape(x.shape).astype(np.float64)


_WITH_MIN = {"Q4_1": 20, "Q5_1": 24}   # 32-blocks whose second f16 is the block minimum m: block bytes


def _block_minima(t) -> np.ndarray:
    """Per-block minima m [rows, blocks] (float64) of a Q4_1/Q5_1 tensor: bytes 2..3 of each block (after d)."""
    nbytes = _WITH_MIN[t.tensor_type.name]
    raw = np.ascontiguousarray(t.data).reshape(t.data.shape[0], -1, nbytes)
    return raw[:, :, 2:4].copy().view(np.float16)[..., 0].astype(np.float64)


@contextlib.contextmanager
def emulate_ggml_q8():
    """Within this block forward.linear and the output projection see ggml-rounded activations."""
    lin, outp = forward.linear, forward.Model.output_projection

    def linear(m, x, name):
        t = m.tensors[name + ".weight"]
        if t.tensor_type.name not in _WITH_MIN:
            return lin(m, ggml_q8_activations(x, t.tensor_type), name)
        xq, ds = ggml_q8_activations(x, t.tensor_type, block_sums=True)
        return lin(m, xq, name) + ds @ _block_minima(t).T


    def output_projection(self, h):
        t = self.tensors.get("output.weight")
        t = self.tensors["token_embd.weight"] if t is None else t
        return outp(self, ggml_q8_activations(h, t.tensor_type))

    forward.linear, forward.Model.output_projection = linear, output_projection
    try:
        yield
    finally:
        forward.linear, forward.Model.output_projection = lin, outp


# ---- teacher-forced checks against llama.cpp's graph tensors ------------------------------------------------
def per_layer(model_path: str, toks, mg, n_ctx: int = 512, out=sys.stdout) -> float:
    """Feed llama.cpp's input of each block into the reference's block and compare the residual increment
    (l_out - l_in) with llama.cpp's. Separates a wrong formula (one block far off) from the accumulation of
    llama.cpp's rounding over many blocks. Returns the largest relative error."""
    m = forward.load(model_path)
    names = {f"l_out-{il}" for il in range(m.hp.n_layer)} | {"result_norm"}
    tr = mg.llama_trace(model_path, toks, names, n_ctx=n_ctx)
    missing = sorted(names - set(tr))
    if missing:
        print(f"llama.cpp did not expose {missing[:4]}", file=out)
        return float("inf")
    worst = 0.0
    x_in = forward.embed(m, toks)
    print(f"{'block':>5} {'rel_l2(increment)':>18} {'rel_l2(output)':>15}", file=out)
    for il in range(m.hp.n_layer):
        y = forward.block(m, il, x_in)
        c = tr[f"l_out-{il}"].astype(np.float64)
        inc = _rel(y - x_in, c - x_in)
        worst = max(worst, inc)
        print(f"{il:>5} {inc:>18.3e} {_rel(y, c):>15.3e}", file=out)
        x_in = c
    h = forward.rms_norm(x_in, m.weight("output_norm.weight"), m.hp.eps)
    print(f"final norm rel_l2 {_rel(h, tr['result_norm']):.3e}", file=out)
    return worst


def per_op(model_path: str, toks, mg, il: int, n_ctx: int = 512, out=sys.stdout) -> dict:
    """Each op of block il, fed llama.cpp's own inputs of that op; prints and returns {op: relative L2 error}."""
    m = forward.load(model_path)
    hp = m.hp
    gemma = hp.arch == "gemma3"
    ops = ["attn_norm", "Qcur", "Kcur", "Vcur", "kqv_out", "ffn_norm", "ffn_gate", "ffn_up", "ffn_out", "l_out"]
    ops += ["attn_post_norm", "sa_out", "ffn_geglu", "ffn_post_norm"] if gemma else ["attn_out", "ffn_inp",
                                                                                       "ffn_swiglu"]
    names = {f"{o}-{il}" for o in ops} | ({f"l_out-{il - 1}"} if il > 0 else set())
    tr = mg.llama_trace(model_path, toks, names, n_ctx=n_ctx)
    missing = sorted(names - set(tr))
    if missing:
        print(f"llama.cpp did not expose {missing}", file=out)
        return {}

    def g(o):
        return tr[f"{o}-{il}"].astype(np.float64)

    n = len(toks)
    p = f"blk.{il}."
    x_in = tr[f"l_out-{il - 1}"].astype(np.float64) if il > 0 else forward.embed(m, toks)
    res = {}
    h = g("attn_norm")
    res["attn_norm"] = _rel(forward.rms_norm(x_in, m.weight(p + "attn_norm.weight"), hp.eps), h)
    res["Vcur"] = _rel(forward.linear(m, h, p + "attn_v"), g("Vcur"))
    base = hp.rope_base_swa if hp.is_swa[il] else hp.rope_base
    ff = m.opt("rope_freqs.weight") if hp.arch == "llama" else None
    for o, w, nh, nrm in (("Qcur", "attn_q", hp.n_head, "attn_q_norm"), ("Kcur", "attn_k", hp.n_head_kv,
                                                                           "attn_k_norm")):
        t = forward.linear(m, h, p + w).reshape(n, nh, -1)
        if gemma:
            t = forward.rms_norm(t, m.weight(p + nrm + ".weight"), hp.eps)
        t = forward.rope(t, np.arange(n), hp.n_rot, base, hp.rope_freq_scale, hp.rope_neox, ff)
        res[o + " (incl. RoPE)"] = _rel(t, g(o).reshape(n, nh, -1))
    f16 = lambda a: a.astype(np.float16).astype(np.float64)  # noqa: E731 - llama.cpp's KV cache is f16
    q, k, v = (g("Qcur").reshape(n, hp.n_head, -1), g("Kcur").reshape(n, hp.n_head_kv, -1),
               g("Vcur").reshape(n, hp.n_head_kv, -1))
    window = hp.sliding_window if hp.is_swa[il] else 0
    res["attention (K,V f16)"] = _rel(forward.attention(q, f16(k), f16(v), hp.attn_scale, window), g("kqv_out"))
    a = forward.linear(m, g("kqv_out"), p + "attn_output")
    if gemma:
        res["attn_output + post_attention_norm"] = _rel(
            forward.rms_norm(a, m.weight(p + "post_attention_norm.weight"), hp.eps), g("attn_post_norm"))
        res["residual add"] = _rel(g("attn_post_norm") + x_in, g("sa_out"))
        f_in = g("sa_out")
    else:
        res["attn_output"] = _rel(a, g("attn_out"))
        res["residual add"] = _rel(g("attn_out") + x_in, g("ffn_inp"))
        f_in = g("ffn_inp")
    res["ffn_norm"] = _rel(forward.rms_norm(f_in, m.weight(p + "ffn_norm.weight"), hp.eps), g("ffn_norm"))
    res["ffn_gate"] = _rel(forward.linear(m, g("ffn_norm"), p + "ffn_gate"), g("ffn_gate"))
    res["ffn_up"] = _rel(forward.linear(m, g("ffn_norm"), p + "ffn_up"), g("ffn_up"))
    act = "ffn_geglu" if gemma else "ffn_swiglu"
    fn = forward.gelu_tanh if gemma else forward.silu
    res[act] = _rel(fn(g("ffn_gate")) * g("ffn_up"), g(act))
    res["ffn_down"] = _rel(forward.linear(m, g(act), p + "ffn_down"), g("ffn_out"))
    if gemma:
        res["post_ffw_norm"] = _rel(forward.rms_norm(g("ffn_out"), m.weight(p + "post_ffw_norm.weight"), hp.eps),
                                    g("ffn_post_norm"))
    for o, e in res.items():
        print(f"  block {il} {o:<36} rel_l2 {e:.3e}", file=out)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="relative L2 error of candidate logits against the NumPy reference")
    ap.add_argument("model")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--tokens", help="comma-separated token ids")
    g.add_argument("--text", help="a prompt, tokenized by llama.cpp (needs llama_cpp)")
    g.add_argument("--text-file", help="like --text, the prompt read from a UTF-8 file")
    c = ap.add_mutually_exclusive_group(required=True)
    c.add_argument("--candidate", help=".npy [n_tokens, n_vocab] logits to check")
    c.add_argument("--llama-cpp", action="store_true", help="use llama.cpp's logits as the candidate")
    ap.add_argument("--threshold", type=float, default=1e-3)
    ap.add_argument("--kv-f16", action="store_true", help="round the reference's K and V to float16")
    ap.add_argument("--max-tokens", type=int, default=0, help="keep only the first N tokens")
    ap.add_argument("--n-ctx", type=int, default=512, help="llama.cpp context size (--llama-cpp)")
    ap.add_argument("--save-ref", help="also write the reference logits (float32 .npy) here")
    ap.add_argument("--per-layer", action="store_true", help="with --llama-cpp: teacher-forced block check")
    ap.add_argument("--per-op", type=int, action="append", default=[], metavar="BLOCK",
                    help="with --llama-cpp: teacher-forced op check of this block (repeatable)")
    ap.add_argument("--emulate-ggml-q8", action="store_true",
                    help="round the reference's matmul activations like ggml's CPU backend (diagnostics)")
    args = ap.parse_args(argv)

    mg = llm = None
    if args.text_file is not None:
        with open(args.text_file, encoding="utf-8") as f:
            args.text = f.read()
    if args.llama_cpp or args.text is not None:
        import make_model_goldens as mg
        llm = mg.open_llama(args.model, logits_all=True, n_ctx=args.n_ctx)
    toks = forward.parse_tokens(args.tokens) if args.tokens is not None else mg.tokenize(llm, args.text)
    if args.max_tokens:
        toks = toks[: args.max_tokens]
    if args.text is not None:
        print(f"tokens ({len(toks)}): {','.join(map(str, toks[:64]))}{',...' if len(toks) > 64 else ''}")

    emulate = emulate_ggml_q8() if args.emulate_ggml_q8 else contextlib.nullcontext()
    kv = np.float16 if args.kv_f16 else None
    with emulate:
        if args.llama_cpp:
            cand = mg.llama_logits(llm, toks)
            del llm
            if args.per_layer:
                per_layer(args.model, toks, mg, n_ctx=args.n_ctx)
            for il in args.per_op:
                per_op(args.model, toks, mg, il, n_ctx=args.n_ctx)
        else:
            try:
                cand = np.load(args.candidate)
            except (OSError, ValueError) as e:
                print(f"compare_logits.py: cannot read {args.candidate}: {e}", file=sys.stderr)
                return 2
        try:
            ref = forward.forward(args.model, toks, kv_dtype=kv)
        except (ValueError, KeyError, OSError) as e:
            print(f"compare_logits.py: {e}", file=sys.stderr)
            return 2
    if cand.ndim != 2 or cand.shape != ref.shape:
        print(f"compare_logits.py: candidate shape {cand.shape} != reference shape {ref.shape} "
              "([n_tokens, n_vocab])", file=sys.stderr)
        return 2
    if not np.all(np.isfinite(cand)):
        print("compare_logits.py: candidate has NaN or Inf", file=sys.stderr)
        return 1
    if args.save_ref:
        np.save(args.save_ref, ref.astype(np.float32))
    return 0 if compare(ref, cand, args.threshold) else 1


if __name__ == "__main__":
    sys.exit(main())
