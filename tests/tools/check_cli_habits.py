#!/usr/bin/env python3
"""llama.cpp users' habits on `tilellm run` / `chat`, each with its exit code and its one-line message, on a
random tiny model (make_tiny_model.py): -ngl, -cnv / -no-cnv, -sys, -ctk / -ctv, -fa, --no-mmap, -f, -r,
--ignore-eos, --chat-template, -n -1, -c above the training context warned of, the random seed printed and a fixed -s repeating the text, --chat on a
model without a template; and the clear errors: -n -5, --threads 0, -b 0, -c -3, an unknown command, -ctk
q8_0, -ctk and -ctv that differ, a context whose tables would not fit in memory (before allocating), -p with -f, an unknown --chat-template.

    check_cli_habits.py TILELLM_BINARY
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import ROOT, Checks, tiny_model  # noqa: E402


def main() -> int:
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check

    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(os.path.join(tmp, "tiny.gguf"))

        def tl(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
            return subprocess.run([binary, *args], capture_output=True, text=True, input=stdin, timeout=120)

        def run(*args: str, **kw) -> subprocess.CompletedProcess:
            return tl("run", "-m", model, "-t", "2", *args, **kw)

        def ok(r: subprocess.CompletedProcess, what: str, stderr_has: str | None = None) -> None:
            good = r.returncode == 0 and (stderr_has is None or stderr_has in r.stderr)
            check(good, f"{what}: exit {r.returncode}" + (f", says '{stderr_has}'" if stderr_has else ""))

        def refused(r: subprocess.CompletedProcess, pattern: str, what: str) -> None:
            # The error itself: one line (beside the model's description, warnings, and CLI11's pointer to --help).
            lines = [l for l in r.stderr.strip().splitlines()
                     if l and not l.startswith(("Run with --help", "model: ", "warning: "))]
            good = r.returncode != 0 and len(lines) == 1 and re.search(pattern, lines[0]) is not None
            check(good, f"{what}: exit {r.returncode}, '{lines[-1] if lines else ''}'")

        ok(run("-ngl", "99", "-p", "#$%", "-n", "2"), "-ngl 99", "-ngl 99")
        ok(run("-ngl", "0", "-p", "#$%", "-n", "2"), "-ngl 0")
        ok(run("-no-cnv", "-p", "#$%", "-n", "2"), "-no-cnv")
        ok(run("-sys", "be brief", "--chat", "-p", "#$%", "-n", "2"), "-sys with --chat")
        ok(run("-ctk", "f32", "-ctv", "f32", "-p", "#$%", "-n", "2"), "-ctk f32 -ctv f32")
        ok(run("-fa", "-p", "#$%", "-n", "2"), "-fa", "note: -fa")
        ok(run("-fa", "on", "-p", "#$%", "-n", "2"), "-fa on", "note: -fa")
        ok(run("--no-mmap", "-p", "#$%", "-n", "2"), "--no-mmap", "note: --mmap")
        ok(run("--chat-template", "chatml", "-p", "#$%", "-n", "2"), "--chat-template chatml")
        ok(run("-c", "1024", "-p", "#$%", "-n", "2"), "-c above the training context (512)", "warning: -c 1024")
        r = run("--chat", "-p", "#$%", "-n", "2")
        ok(r, "--chat without a template in the file", "using the built-in chatml format")
        r = run("-n", "-1", "-c", "24", "-p", "#$%", "--temp", "0", "--ignore-eos")
        ok(r, "-n -1 (until the context is full)", "stopped: context full")

        prompt = os.path.join(tmp, "prompt.txt")
        with open(prompt, "w") as f:
            f.write("#$%&'")
        r = run("-f", prompt, "-n", "3", "--temp", "0")
        check(r.returncode == 0 and r.stdout.startswith("#$%&'"), f"-f FILE: the prompt from the file")
        refused(run("-f", prompt, "-p", "x"), "not both", "-p with -f")

        # Seeds: a random one is printed; a fixed one repeats the text.
        r = run("-p", "#$%", "-n", "8", "--temp", "1")
        check(re.search(r"^seed: \d+$", r.stderr, re.M) is not None, "no -s: the random seed is printed")
        a = run("-p", "#$%", "-n", "12", "--temp", "1", "-s", "11").stdout
        b = run("-p", "#$%", "-n", "12", "--temp", "1", "-s", "11").stdout
        check(a == b and len(a) > 3, "-s 11 twice: the same text")

        # -r: stop at a string the greedy continuation contains.
        full = run("-p", "#$%", "-n", "30", "--temp", "0", "--ignore-eos").stdout.rstrip("\n")[3:]
        stop = full[10:12]
        r = run("-p", "#$%", "-n", "30", "--temp", "0", "--ignore-eos", "-r", stop)
        text = r.stdout.rstrip("\n")[3:]
        check(r.returncode == 0 and "stopped: reverse prompt" in r.stderr and text.endswith(stop)
              and len(text) < len(full), f"-r '{stop}': generation ends at its first occurrence")

        # --ignore-eos: a seed whose run stops at the end-of-text token goes on to -n with the flag.
        eos_seed = None
        for seed in range(40):
            r = run("-p", "#$%", "-n", "120", "--temp", "3", "-s", str(seed))
            m = re.search(r"generated: (\d+) tokens", r.stderr)
            if m and int(m.group(1)) < 120:
                eos_seed = seed
                break
        if eos_seed is None:
            check(False, "--ignore-eos: no seed of 40 met the end-of-text token")
        else:
            r = run("-p", "#$%", "-n", "120", "--temp", "3", "-s", str(eos_seed), "--ignore-eos")
            m = re.search(r"generated: (\d+) tokens", r.stderr)
            check(m is not None and int(m.group(1)) == 120, f"--ignore-eos: seed {eos_seed} goes on to -n 120")

        r = tl("run", "-m", model, "-t", "2", "-cnv", "-p", "be brief", stdin="")
        ok(r, "-cnv: the chat, -p its system message", "chat template")

        refused(run("-p", "x", "-n", "-5"), "at least -1", "-n -5")
        refused(run("-p", "x", "--threads", "0"), "at least 1", "--threads 0")
        refused(run("-p", "x", "-b", "0"), "at least 1", "-b 0")
        refused(run("-p", "x", "-c", "-3"), "at least 0", "-c -3")
        refused(tl("frobnicate"), "unknown command 'frobnicate'", "an unknown command")
        # The tiny model's cache is too small to overflow memory: SmolLM2's (23 KiB a token) at 16M tokens does.
        smollm2 = os.path.join(os.environ.get("TILELLM_MODELS_DIR", os.path.join(ROOT, "models")),
                               "SmolLM2-135M-Instruct.Q4_1.gguf")
        refused(tl("run", "-m", smollm2, "-p", "Hi", "-c", "16000000", "--backend", "cpu"),
                r"needs [0-9.]+ GiB of host memory \(KV cache .* GiB are available",
                "a context too large for memory (SmolLM2, -c 16000000)")
        refused(run("-p", "#$%", "-ctk", "q8_0"), "not supported", "-ctk q8_0")
        refused(run("-p", "#$%", "-ctk", "f16", "-ctv", "f32"), "differ", "-ctk f16 -ctv f32")
        refused(run("-p", "#$%", "--chat-template", "nope"), "not a built-in format", "--chat-template nope")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
