#!/usr/bin/env python3
"""`tilellm perplexity --kl-divergence-base / --kl-divergence` on a random tiny model (make_tiny_model.py):

  - the base file is in llama-perplexity's layout, read here independently: its header, its tokens (the text's
    first n_chunk * n_ctx), and per scored position log-probabilities within one code step of the log-softmax
    of the engine's own logits (`tilellm dump-logits` of the same chunk);
  - scoring a run against its own base gives KLD ~0 and the same top token everywhere; against a base of the
    other activation path a small positive KLD, the mean of the per-position KL sums computed here from the
    two runs' logits;
  - bad input is refused with the reason: no base file, a file that is not one, a file cut short, another
    model's file, -c other than the file's.

    check_kld.py TILELLM_BINARY
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import Checks, tiny_model  # noqa: E402

N_CTX, N_CHUNK = 16, 3


def run(binary: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if ok and r.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def read_base(path: str):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"_logits_", "no _logits_ header"
    n_ctx, n_vocab, n_chunk = struct.unpack_from("<Iii", data, 8)
    off = 20
    tokens = np.frombuffer(data, dtype=np.int32, count=n_ctx * n_chunk, offset=off)
    off += 4 * n_ctx * n_chunk
    nv = 2 * ((n_vocab + 1) // 2) + 4
    scored = n_ctx - 1 - n_ctx // 2
    recs = np.frombuffer(data, dtype=np.uint16, offset=off).reshape(n_chunk, scored, nv)
    assert off + recs.nbytes == len(data), "trailing bytes"
    head = recs[:, :, :4].copy().view(np.float32)  # [chunk, pos, 2]: scale, min_log_prob
    logp = head[:, :, :1] * recs[:, :, 4:4 + n_vocab].astype(np.float64) + head[:, :, 1:2]
    return n_ctx, n_vocab, n_chunk, tokens, head, logp


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def main() -> int:
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check

    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(os.path.join(tmp, "tiny.gguf"))
        other = tiny_model(os.path.join(tmp, "other.gguf"), wtype="f32", seed=4)  # 89 tokens, not 90
        text = os.path.join(tmp, "text.txt")
        rng = np.random.default_rng(5)
        with open(text, "w") as f:  # the tiny vocabulary's characters but token 0 ("!", also its BOS)
            f.write("".join(chr(33 + int(c)) for c in rng.integers(1, 80, 200)))
        base = os.path.join(tmp, "base.kld")
        common = ["-m", model, "-t", "2", "--chunks", str(N_CHUNK)]
        run(binary, "perplexity", *common, "-f", text, "-c", str(N_CTX), "--activations", "f32",
            "--kl-divergence-base", base)

        n_ctx, n_vocab, n_chunk, tokens, head, logp = read_base(base)
        check((n_ctx, n_chunk) == (N_CTX, N_CHUNK), f"header n_ctx {n_ctx}, {n_chunk} chunks")
        ids = run(binary, "tokenize", "-m", model, "-p", open(text).read(), "--ids").stdout.strip().strip("[]")
        text_tokens = [int(x) for x in ids.split(",")]
        check(list(tokens) == text_tokens[:n_ctx * n_chunk], "tokens are the text's first n_chunk * n_ctx")
        bos = text_tokens[0] == 0  # the tokenizer adds BOS: each chunk then starts with it

        def chunk_of(c: int) -> list[int]:
            ch = [int(t) for t in tokens[c * n_ctx:(c + 1) * n_ctx]]
            if bos:
                ch[0] = 0
            return ch

        # Chunk 1 as the engine evaluates it (a fresh cache): its logits against the file.
        chunk = chunk_of(1)
        npy = os.path.join(tmp, "chunk.npy")
        run(binary, "dump-logits", "-m", model, "--tokens", ",".join(map(str, chunk)), "-o", npy,
            "--activations", "f32", "--cache-type", "f16", "-t", "2")
        want = log_softmax(np.load(npy))[n_ctx // 2:n_ctx - 1]
        floor = want.max(axis=1, keepdims=True) - 16  # below this the file holds no resolution
        err = np.abs(np.where(want > floor, logp[1] - want, 0.0)).max()
        step = float(head[1, :, 0].max())
        check(err <= 1.5 * step, f"log-probabilities within a code step ({err:.2e} <= 1.5 x {step:.2e})")

        r = run(binary, "perplexity", "-m", model, "-t", "2", "--activations", "f32", "--kl-divergence",
                "--kl-divergence-base", base)
        kld = float(re.search(r"Mean    KLD:\s+(\S+)", r.stdout).group(1))
        same = float(re.search(r"Same top p:\s+(\S+)", r.stdout).group(1))
        check(abs(kld) < 1e-5 and same == 100.0, f"own base: mean KLD {kld:g}, same top {same}%")

        r = run(binary, "perplexity", "-m", model, "-t", "2", "--activations", "q8", "--kl-divergence",
                "--kl-divergence-base", base)
        kld_q = float(re.search(r"Mean    KLD:\s+(\S+)", r.stdout).group(1))
        # The same sum from the two paths' logits of every chunk (positions n_ctx/2 .. n_ctx-2).
        sums = []
        for c in range(n_chunk):
            run(binary, "dump-logits", "-m", model, "--tokens", ",".join(map(str, chunk_of(c))), "-o", npy,
                "--activations", "q8", "--cache-type", "f16", "-t", "2")
            q = log_softmax(np.load(npy))[n_ctx // 2:n_ctx - 1]
            p = logp[c]
            sums += list(np.where(p > -16, np.exp(p) * (p - q), 0.0).sum(axis=1))
        check(kld_q > 0 and abs(kld_q - np.mean(sums)) <= 1e-4 + 1e-3 * kld_q,
              f"q8 path against the f32 base: mean KLD {kld_q:g}, here {np.mean(sums):g}")

        def refused(args, pattern, what):
            r = run(binary, *args, ok=False)
            check(r.returncode != 0 and re.search(pattern, r.stderr) is not None,
                  f"{what}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else '(no message)'}")

        refused(["perplexity", "-m", model, "--kl-divergence"], "--kl-divergence-base", "no base file")
        refused(["perplexity", "-m", model, "--kl-divergence", "--kl-divergence-base", text], "_logits_",
                "not a base file")
        cut = os.path.join(tmp, "cut.kld")
        with open(base, "rb") as f, open(cut, "wb") as g:
            g.write(f.read()[: os.path.getsize(base) - 100])
        refused(["perplexity", "-m", model, "--kl-divergence", "--kl-divergence-base", cut], "ends before",
                "a file cut short")
        refused(["perplexity", "-m", other, "--kl-divergence", "--kl-divergence-base", base], "vocabulary",
                "another model's file (89 tokens against 90)")
        refused(["perplexity", "-m", model, "-c", "32", "--kl-divergence", "--kl-divergence-base", base],
                "context of 16", "-c other than the file's")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
