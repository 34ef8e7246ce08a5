#!/usr/bin/env python3
"""Writes random-weight GGUF models of real shapes for speed measurements, quantized by llama.cpp itself.

Speed depends on the shapes and the block types, not on the weight values, so a random model with a real model's
shape benchmarks like the real one; and llama-quantize writes exactly the tensor-type mix llama.cpp would ship
(Q4_K_M keeps some tensors in Q6_K, every type keeps the norms in F32), so both engines read the same bytes.

Shapes (arch llama):
    smollm2    SmolLM2-135M:  n_embd 576,  30 layers,  9 heads, 3 KV heads, n_ff 1536, vocab 49152, tied output
    tinyllama  TinyLlama-1.1B: n_embd 2048, 22 layers, 32 heads, 4 KV heads, n_ff 5632, vocab 32000

Each is written once as an F16 source (the `gguf` Python package), then quantized with llama-quantize into
Q4_0, Q4_1, Q8_0, Q4_K_M and F16. The tokenizer is a minimal byte-level `gpt2` one with the right vocabulary size
(the benchmarks feed random token ids). Output goes to a cache folder, never into the repository:

    python3 bench/make_random_models.py                       # both shapes, all types, ~/.cache/tilellm/bench-models
    python3 bench/make_random_models.py --shapes smollm2 --types q4_0
    OUT: <out>/<shape>-random-<type>.gguf   (e.g. smollm2-random-q4_0.gguf)

An existing output file is kept (delete it to rebuild). Needs numpy and gguf; llama-quantize comes from the
llama.cpp build described in tests/reference/llama_cpp_env.sh (run `tests/reference/llama_cpp_env.sh build`).
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
}
# llama-quantize's type names.
TYPES = {"q4_0": "Q4_0", "q4_1": "Q4_1", "q8_0": "Q8_0", "q4_k_m": "Q4_K_M", "f16": "F16", "bf16": "BF16"}


def cache_dir() -> Path:
    return Path(os.environ.get("TILELLM_CACHE", Path.home() / ".cache" / "tilellm"))


def write_source(path: Path, shape: str, seed: int) -> None:
    n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx, tied, rope_base = SHAPES[shape]
    head_dim = n_embd // n_head
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(f"{shape} random")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(rope_base)
    # Minimal byte-level BPE vocabulary: the printable ASCII characters, a few merged pairs with their merge
    # rules (loaders insist on a merge list), then distinct filler tokens up to the real vocabulary size.
    chars = [chr(c) for c in range(33, 127)]
    n_merges = 8
    merges = [f"{chars[2 * i]} {chars[2 * i + 1]}" for i in range(n_merges)]
    toks = chars + [chars[2 * i] + chars[2 * i + 1] for i in range(n_merges)]
    toks += [f"<t{i}>" for i in range(n_vocab - len(toks))]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_types([1] * n_vocab)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    def mat(name: str, n_in: int, n_out: int) -> None:
        # Scaled so that activations stay finite through the layers (the values do not matter for speed).
        x = rng.standard_normal((n_out, n_in), dtype=np.float32) * np.float32(0.5 / np.sqrt(n_in))
        w.add_tensor(name, x.astype(np.float16))

    def vec(name: str, n: int) -> None:
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    mat("token_embd.weight", n_embd, n_vocab)
    vec("output_norm.weight", n_embd)
    if not tied:
        mat("output.weight", n_embd, n_vocab)
    for il in range(n_layer):
        p = f"blk.{il}."
        vec(p + "attn_norm.weight", n_embd)
        mat(p + "attn_q.weight", n_embd, n_head * head_dim)
        mat(p + "attn_k.weight", n_embd, n_head_kv * head_dim)
        mat(p + "attn_v.weight", n_embd, n_head_kv * head_dim)
        mat(p + "attn_output.weight", n_head * head_dim, n_embd)
        vec(p + "ffn_norm.weight", n_embd)
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
        if t not in TYPES:
            sys.exit(f"error: unknown type '{t}' (known: {', '.join(TYPES)})")
    if not a.quantize.exists():
        sys.exit(f"error: {a.quantize} not found; run tests/reference/llama_cpp_env.sh build")
    a.out.mkdir(parents=True, exist_ok=True)

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
