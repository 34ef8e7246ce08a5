#!/usr/bin/env python3
"""Greedy-decode goldens of real models, made with llama.cpp (llama-cpp-python 0.3.36 bindings, CPU).

For each model and each raw prompt (no chat template) this records what llama.cpp does:
  prompt_tokens   llama.cpp's tokenization with add_special=True (BOS only where the model's metadata asks for it)
  generated       64 greedy tokens: pure argmax of the raw logits each step (no sampler, no penalties); it stops
                  early only when llama.cpp reports an end-of-generation token, which is then the last entry
  top2_gap        per step, logit[top1] - logit[top2] (float32 logits); a small gap marks a near-tie where another
                  correct engine may legitimately pick the other token
  stopped_at_eog  whether generation ended on an end-of-generation token (llama_vocab_is_eog)
  last_logits_top the top-20 (id, logit) of llama.cpp's logits at the last prompt position (five of the cases)
and, from the float64 NumPy reference (forward.py), teacher-forced on prompt_tokens + generated:
  ref_argmax, ref_top2_gap   the reference's argmax and top-2 gap at each generation step
  ref_last_logits_top        the reference's logits of the last_logits_top ids

Output: tests/data/goldens/<name>.json
  {"model": file name, "sha256": hex of the GGUF, "llama_cpp_version": "0.3.36", "ggml_version": ...,
   "n_ctx": 512, "n_threads": 2, "n_gen": 64, "add_special": true,
   "cases": [{"prompt", "prompt_tokens", "generated", "top2_gap", "stopped_at_eog", "ref_argmax", "ref_top2_gap",
              "last_logits_top": [[id, logit], ...], "ref_last_logits_top": [[id, logit], ...]}]}

Usage (after `source tests/reference/llama_cpp_env.sh`):
  python3 tests/reference/make_model_goldens.py [--models-dir models] [--out-dir tests/data/goldens]
                                                [--only smollm2|gemma3] [--no-ref]
  python3 tests/reference/make_model_goldens.py --ref-only        # recompute only the reference fields
  python3 tests/reference/make_model_goldens.py --perplexity      # tests/data/goldens/perplexity.json

The helpers open_llama / llama_logits are also used by compare_logits.py --llama-cpp.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

LLAMA_CPP_PY_VERSION = "0.3.36"
N_CTX = 512
N_THREADS = 2
N_GEN = 64
N_TOP = 20

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

# Raw prompts: prose, code, a list, questions (SmolLM2-Instruct answers the first with its end-of-turn token at
# once, which tests stopping at EOG), non-English (French, Japanese, German), numbers, JSON, odd whitespace, a
# one-word prompt. Each exercises a different corner of the tokenizers and of generation.
PROMPTS = [
    "The quick brown fox jumps over the lazy dog. In the early morning light, the old farmer",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Shopping list:\n1. Milk\n2. Eggs\n3.",
    "Question: What is the capital of France?\nAnswer:",
    "Q: How many legs does a spider have?\nA: A spider has",
    "La tour Eiffel est un monument de Paris. Elle a été construite en",
    "The first ten prime numbers are 2, 3, 5, 7,",
    "東京は日本の首都です。人口は",
    "{\"name\": \"Alice\", \"age\": 30, \"city\":",
    "Once upon a time,  there   was\ta little robot who",
    "Die Katze schläft auf dem Sofa, während der Hund",
    "Hello",
]
# Cases whose last-prompt-position logits are also recorded from llama.cpp (and from the NumPy reference).
TOP_LOGIT_CASES = (0, 1, 4, 5, 7)


def _import_llama_cpp():
    try:
        import llama_cpp  # noqa: F401
        import llama_cpp._logger
        llama_cpp._logger.set_verbose(False)  # llama.cpp's load logs would drown the report
    except Exception as e:
        sys.exit("make_model_goldens.py: cannot import llama_cpp (%s); `source tests/reference/llama_cpp_env.sh` "
                 "first (it sets PYTHONPATH and LLAMA_CPP_LIB_PATH)" % e)
    return llama_cpp


def open_llama(model_path: str, logits_all: bool = False, n_ctx: int = N_CTX, n_threads: int = N_THREADS):
    llama_cpp = _import_llama_cpp()
    return llama_cpp.Llama(model_path=model_path, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx,
                           n_threads=n_threads, n_threads_batch=n_threads, n_gpu_layers=0,
                           logits_all=logits_all, verbose=False)


class _GgmlTensor(ctypes.Structure):
    """struct ggml_tensor of the pinned ggml (0.25.x, ggml/include/ggml.h): only read, in the eval callback."""
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64),
                ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8)]


def llama_trace(model_path: str, tokens, names, n_ctx: int = N_CTX, n_threads: int = N_THREADS) -> dict:
    """Run one llama.cpp decode of `tokens` and capture the named graph tensors (f32, contiguous), e.g.
    "l_out-3", "ffn_inp-0", "result_norm": returns {name: float32 array [n_tokens, -1]}. Used to check the
    NumPy reference block by block (compare_logits.py --per-layer)."""
    llama_cpp = _import_llama_cpp()
    names = set(names)
    store = {}

    @llama_cpp.ggml_backend_sched_eval_callback
    def cb(t, ask, user_data):
        tt = ctypes.cast(t, ctypes.POINTER(_GgmlTensor)).contents
        name = tt.name.decode(errors="replace")
        if ask:
            return name in names
        contiguous = tt.nb[0] == 4 and all(tt.nb[i] == tt.nb[i - 1] * tt.ne[i - 1] for i in range(1, 4))
        if tt.type == 0 and contiguous:  # GGML_TYPE_F32
            n = tt.ne[0] * tt.ne[1] * tt.ne[2] * tt.ne[3]
            a = np.ctypeslib.as_array(ctypes.cast(tt.data, ctypes.POINTER(ctypes.c_float)), shape=(n,)).copy()
            store[name] = a.reshape(len(tokens), -1) if n % len(tokens) == 0 else a
        return True

    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(model_path.encode(), llama_cpp.llama_model_default_params())
    if not model:
        raise OSError(f"llama.cpp could not load {model_path}")
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = n_ctx, n_ctx, n_ctx
    cp.n_threads, cp.n_threads_batch = n_threads, n_threads
    cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.cb_eval, cp.cb_eval_user_data = cb, None
    ctx = llama_cpp.llama_init_from_model(model, cp)
    try:
        batch = llama_cpp.llama_batch_init(len(tokens), 0, 1)
        batch.n_tokens = len(tokens)
        for i, t in enumerate(tokens):   # every position is an output, so the last block keeps all rows
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, i, 1, True
            batch.seq_id[i][0] = 0
        rc = llama_cpp.llama_decode(ctx, batch)
        llama_cpp.llama_batch_free(batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed ({rc})")
    finally:
        llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)
    return store


def tokenize(llm, text: str) -> list[int]:
    # add_bos=True maps to llama_tokenize(add_special=True): BOS/EOS as the GGUF metadata asks; special=False: the
    # text is raw, "<...>" in it is not parsed as a control token.
    return list(llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))


def llama_logits(llm, tokens) -> np.ndarray:
    """llama.cpp's logits [n_tokens, n_vocab] (float32) of every position; llm must be opened with logits_all."""
    llm.reset()
    llm.eval(list(tokens))
    return np.array(llm.scores[: len(tokens), :], dtype=np.float32)


def _last_logits(llm) -> np.ndarray:
    llama_cpp = _import_llama_cpp()
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()


def greedy(llm, prompt_tokens: list[int], n_gen: int):
    """Greedy decode with llama.cpp; returns (generated ids, top2 gaps, stopped_at_eog, last prompt logits)."""
    llama_cpp = _import_llama_cpp()
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    llm.reset()
    llm.eval(prompt_tokens)
    logits = _last_logits(llm)
    first_logits = logits
    out, gaps, eog = [], [], False
    for _ in range(n_gen):
        top2 = np.argpartition(-logits, 2)[:2]
        top2 = top2[np.argsort(-logits[top2], kind="stable")]
        t = int(np.argmax(logits))   # lowest id among equal maxima, like a plain argmax loop
        out.append(t)
        gaps.append(float(logits[top2[0]] - logits[top2[1]]))
        if llama_cpp.llama_vocab_is_eog(vocab, t):
            eog = True
            break
        if len(out) == n_gen:
            break
        llm.eval([t])
        logits = _last_logits(llm)
    return out, gaps, eog, first_logits


def top_pairs(logits: np.ndarray, k: int = N_TOP) -> list:
    idx = np.argsort(-logits, kind="stable")[:k]
    return [[int(i), round(float(logits[i]), 5)] for i in idx]


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def ggml_version() -> str:
    """ggml's version from the vendored source tree next to the build (LLAMA_CPP_LIB_PATH = <tree>/build/bin)."""
    try:
        import re
        with open(os.path.join(os.environ.get("LLAMA_CPP_LIB_PATH", ""), "..", "..", "ggml", "CMakeLists.txt")) as f:
            s = f.read()
        v = [re.search(r"set\(GGML_VERSION_%s (\d+)\)" % p, s).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
        return ".".join(v)
    except Exception:
        return "unknown"


def make(name: str, models_dir: str, out_dir: str, with_ref: bool) -> str:
    fname = MODELS[name]
    path = os.path.join(models_dir, fname)
    if not os.path.exists(path):
        sys.exit(f"make_model_goldens.py: model file not found: {path}")
    llm = open_llama(path)
    cases = []
    for i, prompt in enumerate(PROMPTS):
        toks = tokenize(llm, prompt)
        gen, gaps, eog, last = greedy(llm, toks, N_GEN)
        case = {"prompt": prompt, "prompt_tokens": toks, "generated": gen,
                "top2_gap": [round(g, 5) for g in gaps], "stopped_at_eog": eog}
        if i in TOP_LOGIT_CASES:
            case["last_logits_top"] = top_pairs(last)
        cases.append(case)
        print(f"{name} case {i}: {len(toks)} prompt tokens, {len(gen)} generated, min gap {min(gaps):.4f}"
              + (" (EOG)" if eog else ""), file=sys.stderr)
    doc = {"model": fname, "sha256": sha256(path), "llama_cpp_version": LLAMA_CPP_PY_VERSION,
           "ggml_version": ggml_version(), "n_ctx": N_CTX, "n_threads": N_THREADS, "n_gen": N_GEN,
           "add_special": True, "cases": cases}
    del llm
    if with_ref:
        add_reference(doc, path)
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{name}.json")
    _write_json(out, doc)
    return out


def _write_json(path: str, doc) -> None:
    """Write doc as JSON with one line per field of a case (token lists stay on one line, so diffs are readable);
    written to a temporary file first so a failed run never leaves half a file."""
    def dumps(v):
        return json.dumps(v, ensure_ascii=False)

    items = []
    for k, v in doc.items():
        if k == "cases":
            cases = ["  {\n" + ",\n".join(f"   {dumps(ck)}: {dumps(cv)}" for ck, cv in c.items()) + "\n  }"
                     for c in v]
            items.append(' "cases": [\n' + ",\n".join(cases) + "\n ]")
        else:
            items.append(f" {dumps(k)}: {dumps(v)}")
    text = "{\n" + ",\n".join(items) + "\n}\n"
    assert json.loads(text) == doc
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def add_reference(doc: dict, model_path: str) -> None:
    """Score every case with the float64 NumPy reference, teacher-forced on llama.cpp's tokens: one forward pass
    over prompt_tokens + generated gives, for each step, the reference's argmax (ref_argmax) and its top-2 gap
    (ref_top2_gap), and the reference's logits of the last_logits_top ids (ref_last_logits_top). Where ref_argmax
    differs from generated, llama.cpp's 8-bit activations flipped a near-tie; an engine that computes in float
    should agree with ref_argmax wherever ref_top2_gap is not tiny."""
    sys.path.insert(0, HERE)
    import forward
    m = forward.load(model_path)
    for case in doc["cases"]:
        p, gen = case["prompt_tokens"], case["generated"]
        seq = p + gen[:-1]
        h = forward.hidden_states(m, seq)[len(p) - 1:]
        logits = forward.logits_from_hidden(m, h)
        top2 = np.argsort(-logits, axis=1, kind="stable")[:, :2]
        rows = np.arange(len(gen))
        case["ref_argmax"] = [int(t) for t in logits.argmax(axis=1)]
        case["ref_top2_gap"] = [round(float(g), 5) for g in logits[rows, top2[:, 0]] - logits[rows, top2[:, 1]]]
        if "last_logits_top" in case:
            case["ref_last_logits_top"] = [[t, round(float(logits[0, t]), 5)] for t, _ in case["last_logits_top"]]
        agree = sum(int(a == b) for a, b in zip(case["ref_argmax"], gen))
        print(f"  reference agrees with llama.cpp on {agree}/{len(gen)} steps", file=sys.stderr)


PPL_TEXT = os.path.join(REPO, "tests", "data", "text", "declaration_of_independence.txt")
PPL_CTX = (128, 256)


def llama_perplexity(model_path: str, text_path: str, n_ctx: int) -> tuple[float, float]:
    """Run llama.cpp's llama-perplexity; returns (ppl, err) of its "Final estimate" line."""
    import re
    import subprocess
    exe = os.path.join(os.environ.get("LLAMA_CPP_LIB_PATH", ""), "llama-perplexity")
    cmd = [exe, "-m", model_path, "-f", text_path, "-c", str(n_ctx), "-t", str(N_THREADS)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    mt = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", p.stdout + p.stderr)
    if p.returncode != 0 or not mt:
        sys.exit(f"make_model_goldens.py: {' '.join(cmd)} failed (rc {p.returncode}):\n{p.stderr[-2000:]}")
    return float(mt.group(1)), float(mt.group(2))


def make_perplexity(models_dir: str, out_dir: str, with_ref: bool) -> str:
    """tests/data/goldens/perplexity.json: {model file: {ctx: {ppl, err, ...}}} from llama-perplexity, plus the
    float64 NumPy reference's perplexity by the same recipe (ref_ppl, ref_err)."""
    llama_cpp = _import_llama_cpp()
    with open(PPL_TEXT, encoding="utf-8") as f:
        text = f.read()
    doc = {}
    for name, fname in MODELS.items():
        path = os.path.join(models_dir, fname)
        llm = open_llama(path)
        toks = tokenize(llm, text)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        bos = llama_cpp.llama_vocab_bos(vocab) if llama_cpp.llama_vocab_get_add_bos(vocab) else None
        del llm
        entry = {}
        for n_ctx in PPL_CTX:
            ppl, err = llama_perplexity(path, PPL_TEXT, n_ctx)
            e = {"ppl": ppl, "err": err, "n_chunks": len(toks) // n_ctx, "n_tokens": len(toks),
                 "n_scored": (len(toks) // n_ctx) * (n_ctx - n_ctx // 2 - 1),
                 "text": os.path.relpath(PPL_TEXT, REPO), "llama_cpp_version": LLAMA_CPP_PY_VERSION,
                 "command": f"$LLAMA_CPP_BIN/llama-perplexity -m models/{fname} -f "
                            f"{os.path.relpath(PPL_TEXT, REPO)} -c {n_ctx} -t {N_THREADS}"}
            if with_ref:
                sys.path.insert(0, HERE)
                import forward
                rppl, rerr, n = forward.perplexity(path, toks, n_ctx, bos)
                e.update({"ref_ppl": round(rppl, 4), "ref_err": round(rerr, 5)})
            entry[str(n_ctx)] = e
            print(f"{name} ctx {n_ctx}: llama.cpp PPL {ppl} +/- {err}"
                  + (f"; reference {e['ref_ppl']} +/- {e['ref_err']}" if with_ref else ""), file=sys.stderr)
        doc[fname] = entry
    out = os.path.join(out_dir, "perplexity.json")
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(out + ".tmp", out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models-dir", default=os.path.join(REPO, "models"))
    ap.add_argument("--out-dir", default=os.path.join(REPO, "tests", "data", "goldens"))
    ap.add_argument("--only", choices=sorted(MODELS))
    ap.add_argument("--no-ref", action="store_true", help="skip the NumPy reference's numbers")
    ap.add_argument("--ref-only", action="store_true",
                    help="only (re)compute the reference fields of existing golden files")
    ap.add_argument("--perplexity", action="store_true",
                    help="write perplexity.json (llama-perplexity -c 128 and 256) instead of the greedy goldens")
    args = ap.parse_args(argv)
    if args.perplexity:
        print(make_perplexity(args.models_dir, args.out_dir, not args.no_ref))
        return 0
    if args.ref_only:
        for name in ([args.only] if args.only else MODELS):
            out = os.path.join(args.out_dir, f"{name}.json")
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
            add_reference(doc, os.path.join(args.models_dir, doc["model"]))
            _write_json(out, doc)
            print(out)
        return 0
    for name in ([args.only] if args.only else MODELS):
        print(make(name, args.models_dir, args.out_dir, not args.no_ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
