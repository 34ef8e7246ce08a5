#!/usr/bin/env python3
"""Writes a tiny random GGUF model (architecture `llama`, `gemma3`, `qwen2`, `qwen3` or `phi3`) for whole-model tests.

Small, odd sizes where the architecture allows, random weights (never zero), stored as F32 or quantized with the
`gguf` package (Q8_0, Q4_0, Q5_0, F16 — the types it can write). The tokenizer is a minimal byte-level `gpt2` one (one
token per printable ASCII character and a few merges), enough for the engine to load the file; the tests feed token ids.

    python3 make_tiny_model.py OUT.gguf --arch gemma3 --type q8_0 --window 5 --seed 3
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
    ap.add_argument("--arch", choices=["llama", "gemma3", "qwen2", "qwen3", "phi3"], default="llama")
    ap.add_argument("--type", choices=sorted(TYPES), default="f32", help="type of the 2-D weight matrices")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--window", type=int, default=5, help="gemma3 sliding window (phi3: with --phi3-window)")
    ap.add_argument("--phi3-window", action="store_true", help="phi3: set phi3.attention.sliding_window")
    ap.add_argument("--rope-freqs", action="store_true", help="add Llama 3.1-style rope_freqs.weight factors")
    a = ap.parse_args()

    rng = np.random.default_rng(a.seed)
    # Quantized rows need a multiple of 32 elements; keep the other sizes odd where they may be.
    n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab = 64, 3, 4, 2, 96, 90
    # gemma3 and qwen3 have a head size of their own (key_length), not n_embd / n_head.
    own_head = a.arch in ("gemma3", "qwen3")
    head_dim = 32 if own_head else n_embd // n_head
    if a.type == "f32":  # unquantized: sizes need not be multiples of 32
        n_embd, n_head, n_ff, n_vocab = 60, 6, 76, 89
        head_dim = 22 if own_head else n_embd // n_head

    w = gguf.GGUFWriter(a.out, a.arch)
    # llama.cpp marks Phi-3's chat tokens by name when the model's name says phi3; this vocabulary has none.
    w.add_name(f"tiny {a.arch if a.arch != 'phi3' else 'p3'} {a.type}")
    w.add_context_length(512)
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

    def mat(name: str, n_in: int, n_out: int, scale: float) -> None:
        x = (rng.standard_normal((n_out, n_in)) * scale).astype(np.float32)
        t = TYPES[a.type]
        if t == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, quantize(x, t), raw_dtype=t)

    def vec(name: str, n: int) -> None:
        w.add_tensor(name, (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32))

    if a.rope_freqs:  # per-pair frequency divisors, as Llama 3.1 files carry them
        w.add_tensor("rope_freqs.weight", (1.0 + 7.0 * rng.random(head_dim // 2)).astype(np.float32))
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
        if a.arch == "phi3":  # gate and up in one matrix, the gate's rows first
            mat(p + "ffn_up.weight", n_embd, 2 * n_ff, 0.3)
        else:
            mat(p + "ffn_gate.weight", n_embd, n_ff, 0.3)
            mat(p + "ffn_up.weight", n_embd, n_ff, 0.3)
        mat(p + "ffn_down.weight", n_ff, n_embd, 0.3)
        if a.arch == "qwen2":  # biases of the q, k and v products
            for name, n in (("attn_q", n_head * head_dim), ("attn_k", n_head_kv * head_dim),
                            ("attn_v", n_head_kv * head_dim)):
                w.add_tensor(p + name + ".bias", (0.5 * rng.standard_normal(n)).astype(np.float32))
        if a.arch in ("gemma3", "qwen3"):
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
