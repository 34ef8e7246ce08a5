#!/usr/bin/env python3
"""`tilellm run --prompt-cache FILE` (llama.cpp's): a run that writes the file and a run that restores it print
exactly the text of a run without it (greedy, SmolLM2); a longer prompt reuses the cached prefix and, token by
token (-b 1, so the batches are the same both ways), still prints the uninterrupted text; --prompt-cache-ro
leaves the file as it is; a file from another model, another context size or cache type, a truncated or a
damaged file is refused with its reason on one line (exit 1) and left as it is.

    check_prompt_cache.py TILELLM_BINARY
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import ROOT, Checks, tiny_model  # noqa: E402

MODELS = os.environ.get("TILELLM_MODELS_DIR", os.path.join(ROOT, "models"))
SMOL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPT = "The three primary colors are"


def main() -> int:
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check

    def run(*args: str, model: str = SMOL, ctx: str = "256") -> subprocess.CompletedProcess:
        return subprocess.run([binary, "run", "-m", model, "-t", "2", "-c", ctx, "--temp", "0", *args],
                              capture_output=True, text=True, timeout=300)

    def refused(r: subprocess.CompletedProcess, pattern: str, what: str) -> None:
        lines = [l for l in r.stderr.strip().splitlines() if l.startswith("error: ")]
        good = r.returncode == 1 and len(lines) == 1 and re.search(pattern, lines[0]) is not None
        check(good, f"{what}: exit {r.returncode}, '{lines[-1] if lines else r.stderr.strip()[-200:]}'")

    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "prompt.cache")
        plain = run("-p", PROMPT, "-n", "24")
        check(plain.returncode == 0 and len(plain.stdout) > len(PROMPT) + 20, "a run without the cache")

        first = run("-p", PROMPT, "-n", "24", "--prompt-cache", cache)
        check(first.returncode == 0 and os.path.exists(cache) and "does not exist yet" in first.stderr,
              "the first run writes the file")
        check(first.stdout == plain.stdout, "the first run prints the uninterrupted text")
        second = run("-p", PROMPT, "-n", "24", "--prompt-cache", cache)
        m = re.search(r"reused (\d+) of (\d+) prompt tokens", second.stderr)
        check(second.returncode == 0 and m is not None and m.group(1) == m.group(2)
              and "prompt: 0 tokens" in second.stderr, "the second run reuses the whole prompt, evaluates none")
        check(second.stdout == plain.stdout, "the restored run prints the uninterrupted text")

        # A longer prompt: its prefix from the file, the rest evaluated here. Token by token both ways.
        tok_cache = os.path.join(tmp, "by_token.cache")
        longer = PROMPT + " used in painting, and"
        run("-p", PROMPT, "-n", "4", "-b", "1", "--prompt-cache", tok_cache)
        whole = run("-p", longer, "-n", "16", "-b", "1")
        ext = run("-p", longer, "-n", "16", "-b", "1", "--prompt-cache", tok_cache)
        m = re.search(r"reused (\d+) of (\d+) prompt tokens", ext.stderr)
        check(ext.returncode == 0 and m is not None and 0 < int(m.group(1)) < int(m.group(2)),
              f"a longer prompt reuses the cached prefix ({m.group(0) if m else 'nothing'})")
        check(ext.stdout == whole.stdout and whole.returncode == 0, "... and prints the uninterrupted text")

        before = open(cache, "rb").read()
        ro = run("-p", "Something else entirely", "-n", "4", "--prompt-cache", cache, "--prompt-cache-ro")
        check(ro.returncode == 0 and open(cache, "rb").read() == before, "--prompt-cache-ro leaves the file")
        refused(run("-p", PROMPT, "--prompt-cache-ro"), "go with --prompt-cache", "--prompt-cache-ro alone")

        tiny = tiny_model(os.path.join(tmp, "tiny.gguf"))
        refused(run("-p", "#$%", "-n", "2", "--prompt-cache", cache, model=tiny), "saved from another model",
                "a file from another model")
        refused(run("-p", PROMPT, "-n", "2", "--prompt-cache", cache, ctx="128"),
                "saved with a context of 256 tokens; this session has 128", "a file of another context size")
        refused(run("-p", PROMPT, "-n", "2", "--cache-type", "f32", "--prompt-cache", cache),
                "KV cache is f16; this session's is f32", "a file of another cache type")
        broken = os.path.join(tmp, "broken.cache")
        with open(broken, "wb") as f:
            f.write(before[: len(before) // 3])
        refused(run("-p", PROMPT, "-n", "2", "--prompt-cache", broken), "truncated session file",
                "a truncated file")
        check(os.path.getsize(broken) == len(before) // 3, "the refused file is left as it was")
        damaged = bytearray(before)
        damaged[len(damaged) // 2] ^= 0x10
        with open(broken, "wb") as f:
            f.write(damaged)
        refused(run("-p", PROMPT, "-n", "2", "--prompt-cache", broken), "checksum", "a damaged file")
        check(open(cache, "rb").read() == before, "the good file is untouched by the refusals")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
