#!/usr/bin/env python3
"""Perplexity and KL-divergence of the engine against llama-perplexity on the tiny LongRoPE and expert models of
make_arch_goldens.py and on tiny dense models of each architecture (the same files), on a fixed stream of random
characters of the tiny vocabulary.

For each case: llama-perplexity -c 128 with an f32 KV cache and flash attention off (its CPU flash attention
computes in f16, which on these models flips some tokens' choice of expert: with it on, llama-f32-moe4x1's max KLD
was 4.4 and PPL 0.7% apart; off, 3.6e-5 and equal) writes its base file (--kl-divergence-base); `tilellm
perplexity` computes its own perplexity of the same text (float path on F32 files, the default 8-bit activations
on Q8_0 ones) and, reading llama.cpp's base file, the mean KLD and the share of positions with the same top token.
Prints one table row per case. Not run in CI (it needs the pinned llama.cpp build); the numbers are in
docs/REFERENCE.md.

    source tests/reference/llama_cpp_env.sh
    python3 tests/reference/compare_arch_perplexity.py build/tilellm [NAME ...]   # all cases, or those named
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_arch_goldens import CASES, make_model  # noqa: E402

N_CTX = 128
N_CHARS = 2100  # 16 chunks of 128 tokens (one character a token, but for the few merged pairs)
# LongRoPE's long factors need a context past the original 256: that case runs 4 chunks of 512.
CTX = {"phi3-f32-longrope-long": 512}
# The dense architectures (make_tiny_model.py's defaults: GQA, odd sizes; gemma3 with its sliding window of 5),
# in the layout of CASES: name, make_tiny_model.py arguments, (unused) context, activations.
DENSE = [
    (f"{arch}-{t}", ["--arch", arch, "--type", t, "--seed", "21"], 0, "f32" if t == "f32" else "q8")
    for arch in ("llama", "gemma3", "qwen2", "qwen3", "phi3")
    for t in ("f32", "q8_0")
]


def number(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    if not m:
        raise RuntimeError(f"no match for {pattern!r} in:\n{text[-2000:]}")
    return float(m.group(1))


def main() -> None:
    binary = sys.argv[1]
    llama_bin = os.environ.get("LLAMA_CPP_BIN")
    if not llama_bin:
        sys.exit("source tests/reference/llama_cpp_env.sh first")
    rng = np.random.default_rng(3)
    text = "".join(rng.choice([chr(33 + i) for i in range(83)], N_CHARS))
    print("| model | llama.cpp PPL | engine PPL | ratio | mean KLD | max KLD | same top token |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        txt = os.path.join(tmp, "text.txt")
        with open(txt, "w") as f:
            f.write(text)
        for name, margs, _, acts in CASES + DENSE:
            if len(sys.argv) > 2 and name not in sys.argv[2:]:
                continue
            path = os.path.join(tmp, name + ".gguf")
            make_model(path, margs)
            base = os.path.join(tmp, name + ".kld")
            n_ctx = CTX.get(name, N_CTX)
            # llama.cpp's perplexity is read back from its base file (tilellm's "Mean PPL(base)", equal to what
            # llama-perplexity prints): llama.cpp logs from a thread of its own and often exits before its last
            # lines are out.
            subprocess.run([os.path.join(llama_bin, "llama-perplexity"), "-m", path, "-f", txt, "-c", str(n_ctx),
                            "-t", "2", "-ctk", "f32", "-ctv", "f32", "-fa", "off", "--kl-divergence-base", base],
                           capture_output=True, text=True, check=True)
            ours = [binary, "perplexity", "-m", path, "-c", str(n_ctx), "-t", "2", "--cache-type", "f32"]
            ours += ["--activations", "f32"] if acts == "f32" else []
            r = subprocess.run(ours + ["-f", txt], capture_output=True, text=True, check=True)
            ppl_ours = number(r"Final estimate: PPL = ([0-9.]+)", r.stderr + r.stdout)
            r = subprocess.run(ours + ["--kl-divergence", "--kl-divergence-base", base], capture_output=True,
                               text=True, check=True)
            out = r.stderr + r.stdout
            ppl_llama = number(r"Mean PPL\(base\) +: ([0-9.]+)", out)
            print(f"| {name} | {ppl_llama:.4f} | {ppl_ours:.4f} | {ppl_ours / ppl_llama:.5f} | "
                  f"{abs(number(r'Mean    KLD: +(-?[0-9.]+)', out)):.1e} | {abs(number(r'Maximum KLD: +(-?[0-9.]+)', out)):.1e} | "
                  f"{number(r'Same top p: +([0-9.]+)', out):.2f}% |", flush=True)


if __name__ == "__main__":
    main()
