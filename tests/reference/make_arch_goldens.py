#!/usr/bin/env python3
"""Greedy goldens of llama.cpp on random tiny models of the architectures checked only on tiny files: LongRoPE
(phi3, its short and its long factors), experts (Mixtral-style llama with 1 and 2 experts a token, qwen2moe with
its shared expert, qwen3moe with 8 of 16), written by make_tiny_model.py with fixed seeds.

For each case and prompt this records llama.cpp's greedy continuation (pure argmax of its logits each step) and its
top-2 gap at each step, and from the float64 reference (forward.py) along llama.cpp's trajectory the argmax and
gap. tests/model/check_arch_goldens.py writes the same tiny file again (its tensors' digest must be the recorded
one) and holds the engine to these tokens.

Settings: llama.cpp CPU, 2 threads, flash attention off, an f32 KV cache (both engines then compute in float32
throughout on F32 files; on Q8_0 files llama.cpp rounds activations to 8 bits as the engine's default path does),
the context of the case (LongRoPE: 256 gives the short factors, 512 the long ones; llama.cpp rounds its context
up to a multiple of 256, which is why the tiny models' original context is 256).

Output: tests/data/goldens/tiny_archs.json
  {"llama_cpp_version": "0.3.36", "n_threads": 2, "n_gen": N,
   "cases": [{"name", "args": [make_tiny_model.py arguments], "tensors_sha256" (tensors_sha256()), "n_ctx",
              "activations": "f32" | "q8",
              "prompts": [{"prompt_tokens", "generated", "top2_gap", "ref_argmax", "ref_top2_gap"}]}]}

Usage (after `source tests/reference/llama_cpp_env.sh`):
  python3 tests/reference/make_arch_goldens.py [--out tests/data/goldens/tiny_archs.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import forward  # noqa: E402
from make_model_goldens import LLAMA_CPP_PY_VERSION, _import_llama_cpp  # noqa: E402

N_THREADS = 2
N_GEN = 40
# (name, make_tiny_model.py arguments, context, the engine's activations for the comparison)
CASES = [
    ("phi3-f32-longrope-short", ["--arch", "phi3", "--type", "f32", "--longrope", "--seed", "11"], 256, "f32"),
    ("phi3-f32-longrope-long", ["--arch", "phi3", "--type", "f32", "--longrope", "--seed", "11"], 512, "f32"),
    ("llama-f32-moe8x2", ["--arch", "llama", "--type", "f32", "--moe", "8x2", "--seed", "12"], 256, "f32"),
    ("llama-f32-moe4x1", ["--arch", "llama", "--type", "f32", "--moe", "4x1", "--seed", "13"], 256, "f32"),
    ("qwen2moe-f32", ["--arch", "qwen2moe", "--type", "f32", "--seed", "14"], 256, "f32"),
    ("qwen3moe-f32", ["--arch", "qwen3moe", "--type", "f32", "--seed", "15"], 256, "f32"),
    ("llama-q8_0-moe8x2", ["--arch", "llama", "--type", "q8_0", "--moe", "8x2", "--seed", "16"], 256, "q8"),
    ("qwen3moe-q8_0", ["--arch", "qwen3moe", "--type", "q8_0", "--seed", "17"], 256, "q8"),
]
# Token ids of the tiny vocabulary (85 single characters and merges), three prompts of 8.
PROMPTS = [[5, 9, 14, 3, 7, 21, 33, 2], [40, 11, 12, 13, 60, 61, 3, 4], [70, 1, 22, 50, 8, 8, 17, 29]]


def tensors_sha256(path: str) -> str:
    """A digest of the file's tensors (names, types, shapes, bytes in order): the same weights give the same
    digest whatever the gguf package's version lays out around them."""
    from gguf import GGUFReader
    h = hashlib.sha256()
    for t in GGUFReader(path).tensors:
        h.update(f"{t.name}:{int(t.tensor_type)}:{list(map(int, t.shape))}".encode())
        h.update(np.ascontiguousarray(t.data).tobytes())
    return h.hexdigest()


def make_model(path: str, args: list[str]) -> str:
    subprocess.run([sys.executable, os.path.join(HERE, "make_tiny_model.py"), path, *args], check=True)
    return tensors_sha256(path)


def llama_greedy(path: str, n_ctx: int, prompts: list[list[int]]) -> list[tuple[list[int], list[float]]]:
    llama_cpp = _import_llama_cpp()
    llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, n_threads=N_THREADS,
                          n_threads_batch=N_THREADS, n_gpu_layers=0, flash_attn=False,
                          type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32, verbose=False)
    out = []
    for prompt in prompts:
        llm.reset()
        llm.eval(prompt)
        toks, gaps = [], []
        for _ in range(N_GEN):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
            order = np.argsort(-logits, kind="stable")
            t = int(order[0])
            toks.append(t)
            gaps.append(round(float(logits[order[0]] - logits[order[1]]), 5))
            llm.eval([t])
        out.append((toks, gaps))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "goldens", "tiny_archs.json"))
    args = ap.parse_args()
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, margs, n_ctx, acts in CASES:
            path = os.path.join(tmp, name + ".gguf")
            digest = make_model(path, margs)
            m = forward.Model(path)
            m.n_ctx = n_ctx
            prompts = []
            for prompt, (gen, gaps) in zip(PROMPTS, llama_greedy(path, n_ctx, PROMPTS)):
                ref = forward.forward(m, prompt + gen[:-1])[len(prompt) - 1:]
                top = np.sort(ref, axis=1)
                prompts.append({"prompt_tokens": prompt, "generated": gen, "top2_gap": gaps,
                                "ref_argmax": [int(i) for i in ref.argmax(axis=1)],
                                "ref_top2_gap": [round(float(g), 5) for g in top[:, -1] - top[:, -2]]})
                agree = sum(int(a == b) for a, b in zip(gen, prompts[-1]["ref_argmax"]))
                print(f"{name}: prompt {len(prompts)}: llama.cpp and the float64 reference agree on {agree}/{N_GEN}, "
                      f"smallest llama.cpp gap {min(gaps):.4f}")
            cases.append({"name": name, "args": margs, "tensors_sha256": digest, "n_ctx": n_ctx, "activations": acts,
                          "prompts": prompts})
    doc = {"llama_cpp_version": LLAMA_CPP_PY_VERSION, "n_threads": N_THREADS, "n_gen": N_GEN, "cases": cases}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.relpath(args.out, REPO)}")


if __name__ == "__main__":
    main()
