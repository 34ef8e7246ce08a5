#!/usr/bin/env python3
"""The engine against llama.cpp's greedy tokens on the tiny LongRoPE and mixture-of-experts models
(tests/data/goldens/tiny_archs.json, made by tests/reference/make_arch_goldens.py with the pinned llama.cpp).

Each case's tiny file is written again with the recorded make_tiny_model.py arguments; its tensors must have the
recorded digest (else the golden does not apply: a changed generator, not an engine fault, and the test says so).
The engine then reads each prompt followed by llama.cpp's greedy continuation (dump-logits, the case's context
and an f32 cache; the float path on F32 files, the default 8-bit activations on Q8_0 ones) and its argmax at
every generation step must be llama.cpp's token, except at splits docs/GOLDENS.md explains: llama.cpp's top-2
gap under 0.05 (a near-tie), or the engine's token being the float64 reference's argmax there, or, with 8-bit
activations, the reference itself within 0.5 of a tie. It prints the tokens equal and the splits per case.

    check_arch_goldens.py TILELLM_BINARY
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from make_arch_goldens import tensors_sha256  # noqa: E402

NEAR_TIE = 0.05
Q8_NOISE = 0.5


def main() -> int:
    binary = sys.argv[1]
    with open(os.path.join(ROOT, "tests", "data", "goldens", "tiny_archs.json")) as f:
        golden = json.load(f)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for case in golden["cases"]:
            path = os.path.join(tmp, case["name"] + ".gguf")
            subprocess.run([sys.executable, os.path.join(ROOT, "tests", "reference", "make_tiny_model.py"), path,
                            *case["args"]], check=True)
            if tensors_sha256(path) != case["tensors_sha256"]:
                print(f"FAIL {case['name']}: make_tiny_model.py now writes other weights than the golden's; "
                      "run tests/reference/make_arch_goldens.py again")
                ok = False
                continue
            equal = steps = 0
            splits = []
            for k, p in enumerate(case["prompts"]):
                tokens = p["prompt_tokens"] + p["generated"][:-1]
                out = os.path.join(tmp, "logits.npy")
                acts = ["--activations", "f32"] if case["activations"] == "f32" else []
                subprocess.run([binary, "dump-logits", "-m", path, "--tokens", ",".join(map(str, tokens)), "-o", out,
                                "-c", str(case["n_ctx"]), "--cache-type", "f32", "-t", "2", *acts], check=True,
                               stderr=subprocess.DEVNULL)
                ours = np.load(out)[len(p["prompt_tokens"]) - 1:].argmax(axis=1)
                for i, (want, got) in enumerate(zip(p["generated"], ours)):
                    steps += 1
                    if want == got:
                        equal += 1
                        continue
                    gap, ref, ref_gap = p["top2_gap"][i], p["ref_argmax"][i], p["ref_top2_gap"][i]
                    why = ("near-tie" if gap < NEAR_TIE else "exact sides with us" if got == ref else
                           "within q8 noise" if case["activations"] == "q8" and ref_gap < Q8_NOISE else None)
                    splits.append(f"prompt {k} step {i}: llama.cpp {want} (gap {gap:.3f}), ours {got}, "
                                  f"reference {ref} (gap {ref_gap:.3f}): {why or 'UNEXPLAINED'}")
                    ok &= why is not None
            print(f"{case['name']}: {equal}/{steps} greedy tokens equal to llama.cpp's"
                  + "".join(f"\n    {s}" for s in splits))
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
