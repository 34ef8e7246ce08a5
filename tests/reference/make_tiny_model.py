#!/usr/bin/env python3
"""Writes a tiny random GGUF model (architecture `llama`, `gemma3`, `qwen2`, `qwen3`, `phi3`, `qwen2moe` or `qwen3moe`,
and `llama` with experts, Mixtral's layout) for whole-model tests.

Small, odd sizes where the architecture allows, random weights (never zero), stored as F32 or quantized with the
`gguf` package (Q8_0, Q4_0, Q5_0, F16 — the types it can write). The tokenizer is a minimal byte-level `gpt2` one (one
token per printable ASCII character and a few merges), enough for the engine to load the file; the tests feed token ids.

    python3 make_tiny_model.py OUT.gguf --arch gemma3 --type q8_0 --window 5 --seed 3
    python3 make_tiny_model.py OUT.gguf --arch llama --moe 8x2       # Mixtral-style: 8 experts, 2 a token
    python3 make_tiny_model.py OUT.gguf --arch phi3 --longrope       # Phi-3 128k-style LongRoPE factors

Experts (llama.cpp's names and metadata): ffn_gate_inp [n_embd, n_expert] (kept F32, as llama-quantize keeps it),
ffn_gate_exps / ffn_up_exps [n_embd, n_ff_exp, n_expert], ffn_down_exps [n_ff_exp, n_embd, n_expert] in the
matrices' type; qwen2moe adds the shared expert (ffn_{gate,up,down}_shexp) and its gate ffn_gate_inp_shexp [n_embd].
The router's weights are large enough that the routing differs from token to token and layer to layer.
LongRoPE (phi3 --longrope): rope_factors_short / rope_factors_long [rope_dim/2], original context 256 of 512, and
rope.scaling.attn_factor as Phi-3's converter computes it, sqrt(1 + ln(512/256) / ln(256)). (256: llama.cpp rounds
its context up to a multiple of 256 before comparing it with the original one, so a smaller original context would
always give it the long factors.)
"""

from __future__ import annotations

import argparse

import numpy as np
import gguf
from gguf.quants import quantize

TYPES = {
    "f32": gguf.GGMLQuantizationType.F32,
    "f16": gguf.GGMLQuantizationType.F16,
    "q8_0": gguf.GGMLQuantizationType.Q8_0,
    "q4_0": gguf.GGMLQuantizationType.Q4_0,
    "q5_0": gguf.GGMLQuantizationType.Q5_0,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--arch", choices=["llama", "gemma3", "qwen2", "qwen3", "phi3", "qwen2moe", "qwen3moe"],
                    default="llama")
    ap.add_argument("--type", choices=sorted(TYPES), default="f32", help="type of the 2-D weight matrices")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--window", type=int, default=5, help="gemma3 sliding window (phi3: with --phi3-window)")
    ap.add_argument("--phi3-window", action="store_true", help="phi3: set phi3.attention.sliding_window")
    ap.add_argument("--rope-freqs", action="store_true", help="add Llama 3.1-style rope_freqs.weight factors")
    ap.add_argument("--moe", metavar="NxK", default="",
                    help="experts: N of them, K a token (llama: Mixtral's layout; qwen2moe default 6x2, qwen3moe 16x8)")
    ap.add_argument("--longrope", action="store_true", help="phi3: LongRoPE short/long factors and attention factor")
    ap.add_argument("--gating", type=int, default=0, help="write <arch>.expert_gating_func (1..4)")
    ap.add_argument("--chat-template", metavar="FILE", help="write FILE's text as tokenizer.chat_template")
    a = ap.parse_args()
    moe = a.moe or {"qwen2moe": "6x2", "qwen3moe": "16x8"}.get(a.arch, "")
    n_expert, n_used = (int(v) for v in moe.split("x")) if moe else (0, 0)

    rng = np.random.default_rng(a.seed)
    # Quantized rows need a multiple of 32 elements; keep the other sizes odd where they may be.
    n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab = 64, 3, 4, 2, 96, 90
    # gemma3 and qwen3 have a head size of their own (key_length), not n_embd / n_head.
    own_head = a.arch in ("gemma3", "qwen3", "qwen3moe")
    head_dim = 32 if own_head else n_embd // n_head
    n_ff_exp, n_ff_shexp = 64, 96  # qwen experts' own widths (llama's experts are n_ff wide)
    if a.type == "f32":  # unquantized: sizes need not be multiples of 32
        n_embd, n_head, n_ff, n_vocab = 60, 6, 76, 89
        head_dim = 22 if own_head else n_embd // n_head
        n_ff_exp, n_ff_shexp = 36, 52

    w = gguf.GGUFWriter(a.out, a.arch)
    # llama.cpp marks Phi-3's chat tokens by name when the model's name says phi3; this vocabulary has none.
    w.add_name(f"tiny {a.arch if a.arch != 'phi3' else 'p3'} {a.type}")
    w.add_context_length(512)
    if a.longrope:
        w.add_rope_scaling_orig_ctx_len(256)
        w.add_rope_scaling_attn_factors(float(np.sqrt(1 + np.log(512 / 256) / np.log(256))))
    if n_expert:
        w.add_expert_count(n_expert)
        w.add_expert_used_count(n_used)
        if a.arch != "llama":
            w.add_expert_feed_forward_length(n_ff_exp)
        if a.arch == "qwen2moe":
            w.add_expert_shared_feed_forward_length(n_ff_shexp)
        if a.gating:
            w.add_expert_gating_func(gguf.ExpertGatingFuncType(a.gating))
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    if own_head:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if a.arch == "gemma3" or (a.arch == "phi3" and a.phi3_window):
        w.add_sliding_window(a.window)
    if a.arch == "gemma3":
        w.add_uint32("gemma3.attention.sliding_window_pattern", 2)  # layers 0 and 2 local, 1 global
        w.add_float32("gemma3.rope.freq_base_swa", 500.0)
    # Single characters, then a few merged pairs with their merge rules (a real BPE vocabulary in miniature).
    n_merges = 6
    toks = [chr(33 + i) for i in range(n_vocab - n_merges)]
    merges = [f"{toks[2 * i]} {toks[2 * i + 1]}" for i in range(n_merges)]
    toks += [toks[2 * i] + toks[2 * i + 1] for i in range(n_merges)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_types([1] * n_vocab)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    if a.chat_template:
        with open(a.chat_template, encoding="utf-8") as f:
            w.add_chat_template(f.read())

    def mat(name: str, n_in: int, n_out: int, scale: float, n_exp: int = 0, f32: bool = False) -> None:
        shape = (n_exp, n_out, n_in) if n_exp else (n_out, n_in)
        x = (rng.standard_normal(shape) * scale).astype(np.float32)
        t = gguf.GGMLQuantizationType.F32 if f32 else TYPES[a.type]
        if t == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, quantize(x, t), raw_dtype=t)

    def vec(name: str, n: int) -> None:
        w.add_tensor(name, (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32))

    if a.rope_freqs:  # per-pair frequency divisors, as Llama 3.1 files carry them
        w.add_tensor("rope_freqs.weight", (1.0 + 7.0 * rng.random(head_dim // 2)).astype(np.float32))
    if a.longrope:  # LongRoPE's two sets of divisors (Phi-3 128k: short near 1, long up to tens)
        w.add_tensor("rope_factors_short.weight", (1.0 + 0.5 * rng.random(head_dim // 2)).astype(np.float32))
        w.add_tensor("rope_factors_long.weight", (1.0 + 7.0 * rng.random(head_dim // 2)).astype(np.float32))
    mat("token_embd.weight", n_embd, n_vocab, 1.0)
    vec("output_norm.weight", n_embd)
    if a.arch != "gemma3":
        mat("output.weight", n_embd, n_vocab, 0.3)
    for il in range(n_layer):
        p = f"blk.{il}."
        vec(p + "attn_norm.weight", n_embd)
        if a.arch == "phi3":  # q, k and v in one matrix
            mat(p + "attn_qkv.weight", n_embd, (n_head + 2 * n_head_kv) * head_dim, 0.3)
        else:
            mat(p + "attn_q.weight", n_embd, n_head * head_dim, 0.3)
            mat(p + "attn_k.weight", n_embd, n_head_kv * head_dim, 0.3)
            mat(p + "attn_v.weight", n_embd, n_head_kv * head_dim, 0.3)
        mat(p + "attn_output.weight", n_head * head_dim, n_embd, 0.3)
        vec(p + "ffn_norm.weight", n_embd)
        if n_expert:
            ne = n_ff if a.arch == "llama" else n_ff_exp
            mat(p + "ffn_gate_inp.weight", n_embd, n_expert, 1.0, f32=True)
            mat(p + "ffn_gate_exps.weight", n_embd, ne, 0.3, n_exp=n_expert)
            mat(p + "ffn_up_exps.weight", n_embd, ne, 0.3, n_exp=n_expert)
            mat(p + "ffn_down_exps.weight", ne, n_embd, 0.3, n_exp=n_expert)
            if a.arch == "qwen2moe":
                w.add_tensor(p + "ffn_gate_inp_shexp.weight", rng.standard_normal(n_embd).astype(np.float32))
                mat(p + "ffn_gate_shexp.weight", n_embd, n_ff_shexp, 0.3)
                mat(p + "ffn_up_shexp.weight", n_embd, n_ff_shexp, 0.3)
                mat(p + "ffn_down_shexp.weight", n_ff_shexp, n_embd, 0.3)
        elif a.arch == "phi3":  # gate and up in one matrix, the gate's rows first
            mat(p + "ffn_up.weight", n_embd, 2 * n_ff, 0.3)
        else:
            mat(p + "ffn_gate.weight", n_embd, n_ff, 0.3)
            mat(p + "ffn_up.weight", n_embd, n_ff, 0.3)
        if not n_expert:
            mat(p + "ffn_down.weight", n_ff, n_embd, 0.3)
        if a.arch in ("qwen2", "qwen2moe"):  # biases of the q, k and v products
            for name, n in (("attn_q", n_head * head_dim), ("attn_k", n_head_kv * head_dim),
                            ("attn_v", n_head_kv * head_dim)):
                w.add_tensor(p + name + ".bias", (0.5 * rng.standard_normal(n)).astype(np.float32))
        if a.arch in ("gemma3", "qwen3", "qwen3moe"):
            vec(p + "attn_q_norm.weight", head_dim)
            vec(p + "attn_k_norm.weight", head_dim)
        if a.arch == "gemma3":
            vec(p + "post_attention_norm.weight", n_embd)
            vec(p + "post_ffw_norm.weight", n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
