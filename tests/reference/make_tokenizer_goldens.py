#!/usr/bin/env python3
"""Record llama.cpp's tokenization of a fixed corpus as goldens for tests/tokenizer/.

For every model under --models-dir this runs llama.cpp's `llama-tokenize` on each string of the corpus, in two
modes (add_special + parse_special, and neither), and writes tests/data/tokenizer/<model stem>.json:

    {"model": "<file name>", "reference": "<llama-tokenize --version>",
     "cases": [{"text": "...", "add_special": true, "parse_special": true, "ids": [...],
                "decoded": "...", "decoded_special": "..."}, ...]}

"decoded"/"decoded_special" are llama_detokenize(ids, remove_special=false, unparse_special=false/true), taken
through llama-cpp-python's bindings when they import (source tests/reference/llama_cpp_env.sh first); without
them only ids are recorded. Strings that are not valid UTF-8 are stored as "<field>_hex" instead. The corpus is fixed strings covering
ASCII, accents, CJK, emoji, code, whitespace runs, numbers, contractions, mixed scripts and special-token texts,
plus seeded random mixtures of the same ingredients (the seed is fixed, so reruns give the same corpus).

Usage:
    python3 tests/reference/make_tokenizer_goldens.py [--llama-tokenize PATH] [--models-dir DIR] [--out-dir DIR]
PATH defaults to $LLAMA_TOKENIZE, then to the llama.cpp build in the tilellm cache.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TOOL = "/root/.cache/tilellm/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-tokenize"
MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]
# llama.cpp's vocabulary-only GGUFs: Llama 2 SPM (TinyLlama's tokenizer), Phi-3 SPM (strips after specials),
# Llama 3, Qwen2, GPT-2, StarCoder, Command-R, and two files without tokenizer.ggml.pre ("default" regexes).
LLAMA_VOCABS = ["llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "starcoder", "command-r", "gpt-neox",
                "aquila"]

FIXED: list[str | bytes] = [
    # empty and whitespace only
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\t\t", " \t \n", "          ",
    # plain ASCII, leading / trailing / repeated spaces
    "Hello world", " Hello world", "Hello world ", "Hello  world", "Hello   world", "   leading spaces",
    "trailing spaces   ", "hello\tworld", "Hello\n\nWorld\n", "line one\nline two\r\nline three",
    "The quick brown fox jumps over the lazy dog.", "A", "a", "I", "ab", "  a  b  c  ",
    "tabs\t\tand  spaces   mixed \t \n end",
    # accents and Latin scripts
    "café déjà vu, naïve façade", "Ångström Øresund Straße", "ÀÉÎÕÜ àéîõü", "Ærøskøbing", "Łódź Kraków",
    "e\u0301 a\u0308 n\u0303", "Zürich–Genève", "İstanbul ıi",
    # CJK and other scripts
    "你好，世界！", "日本語のテキストです。", "한국어 문장입니다.", "中文English混合text",
    "Привет, мир! Как дела?", "Ελληνικά γράμματα", "עברית", "العربية لغة جميلة", "हिन्दी भाषा", "ไทย",
    "Привет мир! Hello Ελληνικά עברית العربية हिन्दी ไทย 日本",
    # emoji
    "🙂😀👍🏽", "👨‍👩‍👧‍👦 family", "🇫🇷🇩🇪", "I ❤️ NY", "smile :) 😂😂😂", "🤖🚀✨",
    # code
    "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) { a[i] += b[i]; }",
    "<div class=\"a\">&nbsp;</div>", "SELECT * FROM t WHERE id=42;", "if x != None and y >= 3:\n\tpass",
    "#include <stdio.h>\nint main() { printf(\"hi\\n\"); }", "a_b__c___d", "x+=1;y-=2;z*=3", "`code` ~tilde~ ^caret^",
    "http://example.com/path?q=1&r=2#frag", "user@example.com", "$100 + 50% = ?", "{\"key\": [1, 2, 3]}",
    # numbers
    "1234567890", "3.14159 2.71828", "1,000,000", "12345678901234567890", "0x1F 0b1010", "²³ ½ ١٢٣ ४५६",
    "2024-01-15T12:34:56Z", "v1.2.3", "1 2 3 4 5", "007", "9999999", "A1B2C3", "100km/h",
    # contractions
    "I'm sure it's John's car, we're done, they've left, I'll go, he'd say, don't",
    "IT'S WE'RE I'LL THEY'VE", "'s 're 've 'm 'll 'd 't", "rock 'n' roll", "''quoted''", "it's", "'",
    # unusual whitespace and control characters
    "a\u00a0b", "a\u3000b", "x\u2009y", "a \u200b b", "one\u2028two", "\u0085next", "a\x00b", "\x01\x02\x7f",
    "\ue000 private \U000F0000", "\u0378 unassigned",
    # punctuation
    "Hello!!! What?? ... ---- ***", "«quotes» “smart” ‘single’ — dash … ellipsis", "¿Qué? ¡Sí!",
    "Hello , world . Is it ? Yes !", "a - b -- c --- d", "((nested (parens)))", "!!!", "...",
    # special-token texts of both models
    "<|im_start|>user\nHi<|im_end|>\n", "<|im_start|>assistant\n", "<|endoftext|>",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n", "<bos>text<eos>", "<unk>", "<mask>",
    "<unused0>", "[multimodal]", "<s>[INST] hi [/INST]</s>", "x<|im_end|>y", "  <start_of_turn>  ",
    "<|im_start|><|im_end|>", "<start_of_turn><end_of_turn>", "<repo_name>r<file_sep>f", "<|im_start",
    # longer text
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et "
    "dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex "
    "ea commodo consequat.\n\nDuis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu "
    "fugiat nulla pariatur.",
    "a" * 100, "ab" * 50, " " * 40 + "x", "\n" * 20, "=" * 64, "🙂" * 20,
    # invalid UTF-8 (stored as hex)
    b"\xff\xfe abc", b"abc\xc3", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"ok\x80ok", b"\xf0\x9f\x98",
]

POOL = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") * 4
    + list("0123456789") * 3
    + [" "] * 20 + ["  ", "\t", "\n", "\r\n", "\n\n", "   "]
    + list(".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`")
    + ["'s", "'re", "'ve", "'ll", "'d", "'t", "'M", "'S"]
    + list("éèàùçñöüßøåæœ") + list("你好世界日本語한국어") + list("Привет") + list("αβγ")
    + ["🙂", "👍🏽", "❤️", "🇫🇷", "\u0301", "\u00a0", "\u3000", "²", "½", "١", "\ue000"]
    + ["<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<eos>", "<bos>", "<|endoftext|>"]
)


def random_corpus(n: int, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 40)
        out.append("".join(rng.choice(POOL) for _ in range(k)))
    return out


def tokenize(tool: str, model: Path, data: bytes, add_special: bool, parse_special: bool) -> list[int]:
    cmd = [tool, "-m", str(model), "--stdin", "--no-escape", "--ids", "--log-disable"]
    if not add_special:
        cmd.append("--no-bos")
    if not parse_special:  # llama-tokenize parses special tokens by default
        cmd.append("--no-parse-special")
    res = subprocess.run(cmd, input=data, capture_output=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {res.stderr.decode(errors='replace')[-2000:]}")
    line = res.stdout.decode().strip().splitlines()[-1]
    return json.loads(line)


class Detokenizer:
    """llama_detokenize(remove_special=false) through llama-cpp-python's ctypes bindings (optional)."""

    def __init__(self, model: Path):
        import ctypes
        import llama_cpp
        import llama_cpp._logger

        self.ctypes, self.lib = ctypes, llama_cpp
        llama_cpp._logger.set_verbose(False)  # silence llama.cpp's load log
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self.model = llama_cpp.llama_model_load_from_file(str(model).encode(), params)
        if not self.model:
            raise RuntimeError(f"llama.cpp cannot load {model}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)

    def __call__(self, ids: list[int], unparse_special: bool) -> bytes:
        arr = (self.lib.llama_token * max(1, len(ids)))(*ids)
        size = 64 + 16 * len(ids)
        while True:
            buf = self.ctypes.create_string_buffer(size)
            n = self.lib.llama_detokenize(self.vocab, arr, len(ids), buf, size, False, unparse_special)
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def close(self) -> None:
        self.lib.llama_model_free(self.model)


def write_goldens(path: Path, name: str, reference: str, cases: list[dict]) -> None:
    # One case per line keeps diffs of regenerated goldens readable.
    with open(path, "w", encoding="utf-8") as f:
        f.write("{" + f'"model": {json.dumps(name)},\n"reference": {json.dumps(reference)},\n"cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")


def add_decodings(path: Path, model: Path) -> None:
    """--decode-only: fill in the decode fields of an existing goldens file."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    detok = Detokenizer(model)
    for case in doc["cases"]:
        for k in ("decoded", "decoded_hex", "decoded_special", "decoded_special_hex"):
            case.pop(k, None)
        case.update(text_field("decoded", detok(case["ids"], False)))
        case.update(text_field("decoded_special", detok(case["ids"], True)))
    detok.close()
    write_goldens(path, doc["model"], doc["reference"], doc["cases"])


def text_field(name: str, data: bytes) -> dict:
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {name + "_hex": data.hex()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-tokenize", default=os.environ.get("LLAMA_TOKENIZE", DEFAULT_TOOL))
    ap.add_argument("--models-dir", default=os.environ.get("TILELLM_MODELS_DIR", str(ROOT / "models")))
    ap.add_argument("--out-dir", default=str(ROOT / "tests" / "data" / "tokenizer"))
    ap.add_argument("--random", type=int, default=150, help="number of seeded random strings")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--model", action="append", default=[],
                    help="GGUF file to record instead of the default models (repeatable)")
    ap.add_argument("--llama-vocabs", action="store_true",
                    help="record llama.cpp's own vocabulary-only test files (models/ggml-vocab-*.gguf next to its "
                    "build) for the tokenizer families the two real models do not cover")
    ap.add_argument("--decode-only", action="store_true",
                    help="keep the recorded ids, only (re)compute the decode fields with the bindings")
    args = ap.parse_args()

    if not os.access(args.llama_tokenize, os.X_OK):
        print(f"llama-tokenize not found at {args.llama_tokenize}", file=sys.stderr)
        return 1
    version = subprocess.run([args.llama_tokenize, "--version"], capture_output=True, text=True)
    reference = (version.stdout + version.stderr).strip().splitlines()
    reference = " ".join(reference[:1]) if reference else "llama-tokenize"

    corpus: list[str | bytes] = FIXED + random_corpus(args.random)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    models = [Path(m) for m in args.model] or [Path(args.models_dir) / m for m in MODELS]
    if args.llama_vocabs:
        vocab_dir = Path(args.llama_tokenize).resolve().parents[2] / "models"
        models = [vocab_dir / f"ggml-vocab-{v}.gguf" for v in LLAMA_VOCABS]
    for model in models:
        name = model.name
        if not model.exists():
            print(f"missing {model}; run scripts/fetch_models.sh", file=sys.stderr)
            return 1
        if args.decode_only:
            add_decodings(out_dir / (model.stem + ".json"), model)
            print(f"{out_dir / (model.stem + '.json')}: decodings added")
            continue
        jobs = []
        for text in corpus:
            data = text if isinstance(text, bytes) else text.encode("utf-8")
            for add_special, parse_special in ((True, True), (False, False)):
                jobs.append((text, data, add_special, parse_special))
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            results = list(ex.map(lambda j: tokenize(args.llama_tokenize, model, j[1], j[2], j[3]), jobs))
        detok = None
        try:
            detok = Detokenizer(model)
        except ImportError as e:
            print(f"no llama_cpp bindings ({e}); recording ids only. For the decode goldens: "
                  "source tests/reference/llama_cpp_env.sh", file=sys.stderr)
        cases = []
        for (text, data, add_special, parse_special), ids in zip(jobs, results):
            case = {"text_hex": data.hex()} if isinstance(text, bytes) else {"text": text}
            case.update({"add_special": add_special, "parse_special": parse_special, "ids": ids})
            if detok:  # what llama_detokenize makes of these ids, without and with special-token texts
                case.update(text_field("decoded", detok(ids, False)))
                case.update(text_field("decoded_special", detok(ids, True)))
            cases.append(case)
        if detok:
            detok.close()
        path = out_dir / (model.stem + ".json")
        write_goldens(path, name, reference, cases)
        print(f"{path}: {len(cases)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
