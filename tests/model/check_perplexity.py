#!/usr/bin/env python3
"""Perplexity of a real model on the shipped public-domain text against the recorded references
(tests/data/goldens/perplexity.json, made by tests/reference/make_model_goldens.py):

  default path (8-bit activations, like llama.cpp):  within 2% of llama.cpp's llama-perplexity
  float path (--activations f32):                    within 0.1% of the NumPy float64 reference forward pass

  --weights MODE (int8b0, f16):                      within 2% of llama.cpp too (see main() for why)

    check_perplexity.py TILELLM_BINARY MODEL_FILE CTX [--weights MODE,...]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.environ.get("TILELLM_MODELS_DIR", os.path.join(ROOT, "models"))


def run_ppl(binary: str, model: str, text: str, ctx: str, activations: str, weights: str = "native") -> float:
    r = subprocess.run([binary, "perplexity", "-m", model, "-f", text, "-c", ctx, "-t", "2", "--activations",
                        activations, "--weights", weights], capture_output=True, text=True)
    m = re.search(r"^Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        sys.exit(f"perplexity run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return float(m.group(1))


def main() -> int:
    binary, model_file, ctx = sys.argv[1], sys.argv[2], sys.argv[3]
    modes = sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[4] == "--weights" else []
    model = os.path.join(MODELS, model_file)
    if not os.path.exists(model):
        print(f"model {model} is missing: run scripts/fetch_models.sh")
        return 1
    ref = json.load(open(os.path.join(ROOT, "tests", "data", "goldens", "perplexity.json")))[model_file][ctx]
    text = os.path.join(ROOT, ref["text"])
    ok = True
    if modes:
        # Matrices converted at load (--weights). Their rounding is far below the 4-bit source's: int8b0's step is
        # 1/255 of a row's range (~0.7% relative RMS error on SmolLM2's Q4_1 matrices, against ~8% for a 4-bit
        # re-quantization), f16 rounds each value to 11 bits. So they must stay within the same 2% of llama.cpp
        # as the native path (measured at -c 128: int8b0 +1.5% since its activations are Q8_K, one scale per 256
        # values where K allows, +1.2% with one per 32 before; f16 -0.4%); a wrong conversion or kernel moves it
        # far more.
        for mode in modes:
            got = run_ppl(binary, model, text, ctx, "q8", mode)
            rel = abs(got - ref["ppl"]) / ref["ppl"]
            good = rel <= 0.02
            ok &= good
            print(f"{model_file} -c {ctx} --weights {mode}: PPL {got:.4f}, llama.cpp {ref['ppl']:.4f}, "
                  f"difference {100 * rel:.2f}% (limit 2%) -> {'OK' if good else 'FAIL'}")
        print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
        return 0 if ok else 1
    # Why 2% for the 8-bit path: it rounds activations exactly as llama.cpp does, so what is left is float
    # rounding (accumulation order, the KV cache, the exponential), and at -c 128 on this ~1,500-token text that
    # alone moves Gemma 3's perplexity by up to ~1.7%: each change flips a few 8-bit activation roundings, and
    # Gemma's large activations carry such flips far. Measured with nothing but float rounding changed: row
    # kernels 12.5416; the same with an f32 KV cache 12.6303; Q8_0 products summed in tile order (values equal
    # to ~1e-7 relative) 12.6662; plus the vectorized exponential in GELU (~1 ulp) 12.7309; then K-quant tiles
    # 12.5218 and Q5_0 tiles 12.4875 (same integer block sums, another float order) — llama.cpp 12.5172.
    # SmolLM2 moves by 0.1-0.2%. A real arithmetic error (a wrong block scale, a dropped offset) moves both by
    # far more; the f32 path below is held to 0.1% of the exact reference.
    for activations, want, limit, who in (("q8", ref["ppl"], 0.02, "llama.cpp"),
                                          ("f32", ref["ref_ppl"], 0.001, "NumPy reference")):
        got = run_ppl(binary, model, text, ctx, activations)
        rel = abs(got - want) / want
        good = rel <= limit
        ok &= good
        print(f"{model_file} -c {ctx} --activations {activations}: PPL {got:.4f}, {who} {want:.4f}, "
              f"difference {100 * rel:.2f}% (limit {100 * limit:g}%) -> {'OK' if good else 'FAIL'}")
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
