#!/usr/bin/env python3
"""Writes random-weight GGUF models of real shapes for speed measurements, quantized by llama.cpp itself.

Speed depends on the shapes and the block types, not on the weight values, so a random model with a real model's
shape benchmarks like the real one; and llama-quantize writes exactly the tensor-type mix llama.cpp would ship
(Q4_K_M keeps some tensors in Q6_K, every type keeps the norms in F32), so both engines read the same bytes.

Shapes (arch llama unless said):
    smollm2    SmolLM2-135M:  n_embd 576,  30 layers,  9 heads, 3 KV heads, n_ff 1536, vocab 49152, tied output
    tinyllama  TinyLlama-1.1B: n_embd 2048, 22 layers, 32 heads, 4 KV heads, n_ff 5632, vocab 32000
    llama7b    Llama-2-7B:     n_embd 4096, 32 layers, 32 heads, 32 KV heads, n_ff 11008, vocab 32000
    phi3mini   Phi-3-mini-4k (phi3, 3.8B): n_embd 3072, 32 layers, 32 heads, 32 KV heads, n_ff 8192, vocab 32064;
               q/k/v in one attn_qkv matrix and gate/up in one ffn_up matrix, as the converter writes them
  Mixtures of experts, their real widths with fewer layers (the per-token work of a layer is the real one):
    mixtral4l  Mixtral-8x7B's layer, 4 of its 32 layers: n_embd 4096, 32 heads, 8 KV heads, 8 experts of
               n_ff 14336, 2 a token, vocab 32000
    qwen3moe8l Qwen3-30B-A3B's layer (qwen3moe), 8 of its 48 layers: n_embd 2048, 32 heads of 128, 4 KV heads,
               128 experts of 768, 8 a token, vocab 151936
    qwen2moe8l Qwen1.5-MoE-A2.7B's layer (qwen2moe), 8 of its 24 layers: n_embd 2048, 16 heads, 60 experts of
               1408, 4 a token, a shared expert of 5632 with its gate, vocab 151936

Each is written once as an F16 source (the `gguf` Python package), then quantized with llama-quantize into
Q4_0, Q4_1, Q8_0, Q4_K_M and F16. The tokenizer is a minimal byte-level `gpt2` one with the right vocabulary size
(the benchmarks feed random token ids). Output goes to a cache folder, never into the repository:

    python3 bench/make_random_models.py                       # both shapes, all types, ~/.cache/tilellm/bench-models
    python3 bench/make_random_models.py --shapes smollm2 --types q4_0
    OUT: <out>/<shape>-random-<type>.gguf   (e.g. smollm2-random-q4_0.gguf)

An existing output file is kept (delete it to rebuild). Needs numpy and gguf; llama-quantize comes from the
llama.cpp build described in tests/reference/llama_cpp_env.sh (run `tests/reference/llama_cpp_env.sh build`).

--direct (q4_0, q8_0, q4_k only) writes the quantized blocks themselves, with no F16 source and no llama-quantize:
random codes and small random fp16 scales, laid out as llama-quantize lays out a file of that type (the
matrices in the type, an untied output matrix in Q6_K, the norms in F32). For machines without a llama.cpp
build, and for large shapes whose F16 source would be slow to write:

    python3 bench/make_random_models.py --direct --shapes llama7b --types q4_0
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import gguf

SHAPES = {
    # name: (n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx_train, tied output, rope base)
    "smollm2": (576, 30, 9, 3, 1536, 49152, 8192, True, 100000.0),
    "tinyllama": (2048, 22, 32, 4, 5632, 32000, 2048, False, 10000.0),
    "llama7b": (4096, 32, 32, 32, 11008, 32000, 4096, False, 10000.0),
    "phi3mini": (3072, 32, 32, 32, 8192, 32064, 4096, False, 10000.0),
    "mixtral4l": (4096, 4, 32, 8, 14336, 32000, 32768, False, 1000000.0),
    "qwen3moe8l": (2048, 8, 32, 4, 6144, 151936, 40960, False, 1000000.0),
    "qwen2moe8l": (2048, 8, 16, 16, 5632, 151936, 8192, False, 1000000.0),
}
# What a shape has beyond the tuple above: its architecture, experts (count, used, width, shared width) and
# its own head size.
ARCH = {"phi3mini": "phi3", "qwen3moe8l": "qwen3moe", "qwen2moe8l": "qwen2moe"}
EXPERTS = {"mixtral4l": (8, 2, 14336, 0), "qwen3moe8l": (128, 8, 768, 0), "qwen2moe8l": (60, 4, 1408, 5632)}
HEAD_DIM = {"qwen3moe8l": 128}
# llama-quantize's type names.
TYPES = {"q4_0": "Q4_0", "q4_1": "Q4_1", "q8_0": "Q8_0", "q4_k_m": "Q4_K_M", "f16": "F16", "bf16": "BF16"}


def cache_dir() -> Path:
    return Path(os.environ.get("TILELLM_CACHE", Path.home() / ".cache" / "tilellm"))


# --direct: GGUF block layouts (bytes per block of 256 or 32 values; where the fp16 scale sits).
DIRECT = {"q4_0": (gguf.GGMLQuantizationType.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
          "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
          "q4_k": (gguf.GGMLQuantizationType.Q4_K, gguf.LlamaFileType.MOSTLY_Q4_K_S)}


def random_blocks(rng: np.random.Generator, qtype: gguf.GGMLQuantizationType, n_in: int, n_out: int) -> np.ndarray:
    """Rows of random blocks of qtype: random code bytes, fp16 scales of about 0.5 / sqrt(n_in) per weight."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    nb = n_in // block
    b = rng.integers(0, 256, size=(n_out, nb, size), dtype=np.uint8)
    step = 0.5 / np.sqrt(n_in)
    if qtype == gguf.GGMLQuantizationType.Q6_K:
        # ql[128] qh[64] scales int8[16] d fp16: scales 1..8, d so that d * scale * 32 ~ step * 32
        b[:, :, 192:208] = rng.integers(1, 9, size=(n_out, nb, 16), dtype=np.uint8)
        d = (rng.uniform(0.5, 1.5, size=(n_out, nb)) * step / 4).astype(np.float16)
        b[:, :, 208:210] = d.view(np.uint8).reshape(n_out, nb, 2)
    elif qtype == gguf.GGMLQuantizationType.Q4_K:
        # d, dmin fp16, scales[12] (random 6-bit scales and mins, 0..63), qs: d * sc * 15 ~ step * 4
        d = (rng.uniform(0.5, 1.5, size=(n_out, nb)) * step * 4 / (15 * 32)).astype(np.float16)
        dmin = (rng.uniform(0.5, 1.5, size=(n_out, nb)) * step * 2 / 32).astype(np.float16)
        b[:, :, 0:2] = d.view(np.uint8).reshape(n_out, nb, 2)
        b[:, :, 2:4] = dmin.view(np.uint8).reshape(n_out, nb, 2)
    else:
        # d fp16 first: Q4_0 codes span 16 steps, Q5_0 32, Q8_0 256
        span = {gguf.GGMLQuantizationType.Q4_0: 16, gguf.GGMLQuantizationType.Q5_0: 32}.get(qtype, 256)
        d = (rng.uniform(0.5, 1.5, size=(n_out, nb)) * step * 4 / span).astype(np.float16)
        b[:, :, 0:2] = d.view(np.uint8).reshape(n_out, nb, 2)
    return b.reshape(n_out, nb * size)


def write_source(path: Path, shape: str, seed: int, direct: str | None = None) -> None:
    """The F16 source of a shape, or (direct) the model in that quantized type."""
    n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx, tied, rope_base = SHAPES[shape]
    arch = ARCH.get(shape, "llama")
    n_expert, n_used, n_ff_exp, n_ff_shexp = EXPERTS.get(shape, (0, 0, 0, 0))
    head_dim = HEAD_DIM.get(shape, n_embd // n_head)
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), arch)
    w.add_name(f"{shape} random")
    w.add_file_type(DIRECT[direct][1] if direct else gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    if shape in HEAD_DIM:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if n_expert:
        w.add_expert_count(n_expert)
        w.add_expert_used_count(n_used)
        if arch != "llama":
            w.add_expert_feed_forward_length(n_ff_exp)
        if n_ff_shexp:
            w.add_expert_shared_feed_forward_length(n_ff_shexp)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(rope_base)
    # Minimal byte-level BPE vocabulary: the printable ASCII characters, a few merged pairs with their merge
    # rules (loaders insist on a merge list), then distinct filler tokens up to the real vocabulary size.
    chars = [chr(c) for c in range(33, 127)]
    n_merges = 8
    merges = [f"{chars[2 * i]} {chars[2 * i + 1]}" for i in range(n_merges)]
    toks = chars + [chars[2 * i] + chars[2 * i + 1] for i in range(n_merges)]
    # llama.cpp sets attributes of these four by name in a model named like Phi-3 (and fails to load one
    # without them), as Phi-3's own vocabulary has them.
    named = ["<unk>", "<s>", "</s>", "<|endoftext|>"] if arch == "phi3" else []
    toks += named + [f"<t{i}>" for i in range(n_vocab - len(toks) - len(named))]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_types([1] * n_vocab)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    def mat(name: str, n_in: int, n_out: int, n_exp: int = 0) -> None:
        """A matrix [n_out][n_in], or n_exp of them stacked (an expert tensor, GGUF shape [n_in, n_out, n_exp])."""
        rows = n_out * max(n_exp, 1)
        if direct:
            qtype = gguf.GGMLQuantizationType.Q6_K if name == "output.weight" else DIRECT[direct][0]
            if n_in % gguf.GGML_QUANT_SIZES[qtype][0] != 0:
                # A row that is not whole K-blocks (SmolLM2's 576): Q5_0, as llama-quantize falls back.
                qtype = gguf.GGMLQuantizationType.Q5_0
            b = random_blocks(rng, qtype, n_in, rows)
            w.add_tensor(name, b.reshape(n_exp, n_out, -1) if n_exp else b, raw_dtype=qtype)
            return
        # Scaled so that activations stay finite through the layers (the values do not matter for speed).
        x = rng.standard_normal((rows, n_in), dtype=np.float32) * np.float32(0.5 / np.sqrt(n_in))
        w.add_tensor(name, x.astype(np.float16).reshape(n_exp, n_out, n_in) if n_exp else x.astype(np.float16))

    def vec(name: str, n: int) -> None:
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    def f32(name: str, n_in: int, n_out: int) -> None:
        """A small matrix kept in F32 (llama-quantize keeps the routers so)."""
        x = rng.standard_normal((n_out, n_in), dtype=np.float32) / np.float32(np.sqrt(n_in))
        w.add_tensor(name, x if n_out > 1 else x.reshape(-1))

    mat("token_embd.weight", n_embd, n_vocab)
    vec("output_norm.weight", n_embd)
    if not tied:
        mat("output.weight", n_embd, n_vocab)
    for il in range(n_layer):
        p = f"blk.{il}."
        vec(p + "attn_norm.weight", n_embd)
        if arch == "phi3":
            mat(p + "attn_qkv.weight", n_embd, (n_head + 2 * n_head_kv) * head_dim)
        else:
            mat(p + "attn_q.weight", n_embd, n_head * head_dim)
            mat(p + "attn_k.weight", n_embd, n_head_kv * head_dim)
            mat(p + "attn_v.weight", n_embd, n_head_kv * head_dim)
        if arch == "qwen2moe":
            for b, n in (("attn_q.bias", n_head * head_dim), ("attn_k.bias", n_head_kv * head_dim),
                         ("attn_v.bias", n_head_kv * head_dim)):
                w.add_tensor(p + b, np.zeros(n, dtype=np.float32))
        if arch == "qwen3moe":
            vec(p + "attn_q_norm.weight", head_dim)
            vec(p + "attn_k_norm.weight", head_dim)
        mat(p + "attn_output.weight", n_head * head_dim, n_embd)
        vec(p + "ffn_norm.weight", n_embd)
        if n_expert:
            ne = n_ff_exp if arch != "llama" else n_ff
            f32(p + "ffn_gate_inp.weight", n_embd, n_expert)
            mat(p + "ffn_gate_exps.weight", n_embd, ne, n_expert)
            mat(p + "ffn_up_exps.weight", n_embd, ne, n_expert)
            mat(p + "ffn_down_exps.weight", ne, n_embd, n_expert)
            if n_ff_shexp:
                f32(p + "ffn_gate_inp_shexp.weight", n_embd, 1)
                mat(p + "ffn_gate_shexp.weight", n_embd, n_ff_shexp)
                mat(p + "ffn_up_shexp.weight", n_embd, n_ff_shexp)
                mat(p + "ffn_down_shexp.weight", n_ff_shexp, n_embd)
        elif arch == "phi3":
            mat(p + "ffn_up.weight", n_embd, 2 * n_ff)
            mat(p + "ffn_down.weight", n_ff, n_embd)
        else:
            mat(p + "ffn_gate.weight", n_embd, n_ff)
            mat(p + "ffn_up.weight", n_embd, n_ff)
            mat(p + "ffn_down.weight", n_ff, n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.rename(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=cache_dir() / "bench-models")
    ap.add_argument("--shapes", default="smollm2,tinyllama", help="comma list of: " + ",".join(SHAPES))
    ap.add_argument("--types", default=",".join(TYPES), help="comma list of: " + ",".join(TYPES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--direct", action="store_true", help="write q4_0/q8_0/q4_k blocks directly (no llama-quantize)")
    ap.add_argument(
        "--quantize",
        type=Path,
        default=cache_dir() / "llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-quantize",
        help="llama-quantize binary",
    )
    a = ap.parse_args()
    shapes = [s for s in a.shapes.split(",") if s]
    types = [t for t in a.types.split(",") if t]
    for s in shapes:
        if s not in SHAPES:
            sys.exit(f"error: unknown shape '{s}' (known: {', '.join(SHAPES)})")
    for t in types:
        if t not in TYPES and not (a.direct and t in DIRECT):
            sys.exit(f"error: unknown type '{t}' (known: {', '.join(TYPES)})")
    a.out.mkdir(parents=True, exist_ok=True)
    if a.direct:
        for t in types:
            if t not in DIRECT:
                sys.exit(f"error: --direct writes {', '.join(DIRECT)} only, not '{t}'")
        for s in shapes:
            for t in types:
                dst = a.out / f"{s}-random-{t}.gguf"
                if dst.exists():
                    print(f"kept    {dst}", file=sys.stderr)
                    continue
                print(f"writing {dst}", file=sys.stderr)
                write_source(dst, s, a.seed, direct=t)
                print(dst)
        return
    if not a.quantize.exists():
        sys.exit(f"error: {a.quantize} not found; run tests/reference/llama_cpp_env.sh build")

    for s in shapes:
        src = a.out / f"{s}-random-source-f16.gguf"
        if not src.exists():
            print(f"writing {src}", file=sys.stderr)
            write_source(src, s, a.seed)
        for t in types:
            dst = a.out / f"{s}-random-{t}.gguf"
            if dst.exists():
                print(f"kept    {dst}", file=sys.stderr)
                continue
            tmp = dst.with_suffix(".tmp")
            print(f"quantizing {dst}", file=sys.stderr)
            r = subprocess.run(
                [str(a.quantize), "--allow-requantize", str(src), str(tmp), TYPES[t]],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            if r.returncode != 0:
                tmp.unlink(missing_ok=True)
                sys.exit(f"error: llama-quantize failed for {dst}:\n{r.stderr[-2000:]}")
            tmp.rename(dst)
            print(dst)


if __name__ == "__main__":
    main()
