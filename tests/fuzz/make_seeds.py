#!/usr/bin/env python3
"""Seed inputs for the fuzz targets (tests/fuzz), written into a folder: for fuzz_gguf, micro models a few KiB
long that load completely (llama and gemma3 architectures, a byte-level BPE and a SentencePiece tokenizer, F32
and Q8_0 matrices), so that mutations reach every stage of the reader; for fuzz_tokenizer, texts with special
tokens, mixed scripts and odd bytes, each behind its selector byte.

    make_seeds.py GGUF_DIR TEXT_DIR
"""

from __future__ import annotations

import os
import sys

import numpy as np
import gguf
from gguf.quants import quantize


def micro(path: str, arch: str, tokenizer: str, qtype: gguf.GGMLQuantizationType) -> None:
    rng = np.random.default_rng(1)
    n_embd, n_ff, n_head, n_head_kv, n_vocab = 32, 32, 2, 1, 12  # quantized rows: 32 values a block
    if qtype == gguf.GGMLQuantizationType.F32:
        n_embd, n_ff = 8, 12
    head_dim = n_embd // n_head
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"micro {arch}")
    w.add_context_length(64)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-6)
    if arch == "gemma3":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_sliding_window(3)
    if tokenizer == "gpt2":
        toks = ["a", "b", "c", "d", "Ġ", "ab", "cd", "Ġa", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(toks)
        w.add_token_types([1] * 8 + [3, 3, 3, 3])
        w.add_token_merges(["a b", "c d", "Ġ a"])
        w.add_bos_token_id(8)
        w.add_eos_token_id(9)
    else:
        toks = ["<unk>", "<s>", "</s>", "<0x41>", "<0x0A>", "▁", "a", "b", "▁a", "ab", "▁ab", "<start_of_turn>"]
        w.add_tokenizer_model("llama")
        w.add_token_list(toks)
        w.add_token_scores([0.0, 0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -2.5, -0.5, -0.7, -0.1, 0.0])
        w.add_token_types([2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 4])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)

    def mat(name: str, n_in: int, n_out: int) -> None:
        x = (rng.standard_normal((n_out, n_in)) * 0.3).astype(np.float32)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, quantize(x, qtype), raw_dtype=qtype)

    def vec(name: str, n: int) -> None:
        w.add_tensor(name, (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", n_embd, n_vocab)
    vec("output_norm.weight", n_embd)
    p = "blk.0."
    vec(p + "attn_norm.weight", n_embd)
    mat(p + "attn_q.weight", n_embd, n_head * head_dim)
    mat(p + "attn_k.weight", n_embd, n_head_kv * head_dim)
    mat(p + "attn_v.weight", n_embd, n_head_kv * head_dim)
    mat(p + "attn_output.weight", n_head * head_dim, n_embd)
    vec(p + "ffn_norm.weight", n_embd)
    mat(p + "ffn_gate.weight", n_embd, n_ff)
    mat(p + "ffn_up.weight", n_embd, n_ff)
    mat(p + "ffn_down.weight", n_ff, n_embd)
    if arch == "gemma3":
        vec(p + "attn_q_norm.weight", head_dim)
        vec(p + "attn_k_norm.weight", head_dim)
        vec(p + "post_attention_norm.weight", n_embd)
        vec(p + "post_ffw_norm.weight", n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


TEXTS = [
    "Hello world! How are you today?",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nWhat's 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "  leading spaces, tabs\tand\nnewlines\r\n  ",
    "日本語のテキスト、中文，한국어, ünïcödé, emoji 🦙🔥",
    "numbers 1234567890 3.14159 -42 1e10",
    "code: for (int i = 0; i < n; ++i) { x[i] += y[i]; }",
    "don't won't it's we're they'll I'd",
    "\x00\x01\x7f\xc3\x28\xe2\x82\xff bytes",
]


def main() -> None:
    gguf_dir, text_dir = sys.argv[1], sys.argv[2]
    os.makedirs(gguf_dir, exist_ok=True)
    os.makedirs(text_dir, exist_ok=True)
    micro(os.path.join(gguf_dir, "llama_bpe_f32.gguf"), "llama", "gpt2", gguf.GGMLQuantizationType.F32)
    micro(os.path.join(gguf_dir, "llama_spm_q8_0.gguf"), "llama", "spm", gguf.GGMLQuantizationType.Q8_0)
    micro(os.path.join(gguf_dir, "gemma3_spm_f32.gguf"), "gemma3", "spm", gguf.GGMLQuantizationType.F32)
    for i, t in enumerate(TEXTS):
        for sel in range(16):
            if (sel + i) % 3 == 0:  # a spread of selectors, not every one for every text
                with open(os.path.join(text_dir, f"text_{i}_{sel}"), "wb") as f:
                    f.write(bytes([sel]) + t.encode("utf-8", "surrogateescape"))


if __name__ == "__main__":
    main()
