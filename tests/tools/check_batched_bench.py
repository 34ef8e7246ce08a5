#!/usr/bin/env python3
"""`tilellm batched-bench` on a random tiny model (make_tiny_model.py), as llama-batched-bench users call it:
llama's single-dash -npp / -ntg / -npl, the table's rows (one per PP x TG x B, N_KV = B (PP + TG), every time
and speed positive, each speed its tokens over its time), the jsonl form with llama-batched-bench's field
names, and the clear errors (-npl 0, -npp -1, nothing to measure).

    check_batched_bench.py TILELLM_BINARY
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import Checks, tiny_model  # noqa: E402


def main() -> int:
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(os.path.join(tmp, "tiny.gguf"))

        def bb(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([binary, "batched-bench", "-m", model, "-t", "2", *args], capture_output=True,
                                  text=True, timeout=300)

        r = bb("-npp", "7,12", "-ntg", "5", "-npl", "1,3")
        check(r.returncode == 0, f"-npp 7,12 -ntg 5 -npl 1,3: exit {r.returncode} {r.stderr.strip()[-200:]}")
        rows = [l for l in r.stdout.splitlines() if l.startswith("|") and l[1:].strip()[:1].isdigit()]
        check(len(rows) == 4, f"one row per PP x TG x B: {len(rows)} rows")
        want = [(7, 5, 1), (7, 5, 3), (12, 5, 1), (12, 5, 3)]
        for row, (pp, tg, b) in zip(rows, want):
            f = [c.strip() for c in row.strip("|").split("|")]
            ok = (int(f[0]), int(f[1]), int(f[2]), int(f[3])) == (pp, tg, b, b * (pp + tg))
            t_pp, s_pp, t_tg, s_tg, t, s = (float(x) for x in f[4:10])
            ok = ok and min(s_pp, s_tg, s) > 0 and min(t_pp, t_tg, t) >= 0 and abs(t - t_pp - t_tg) <= 0.0015
            # Times are printed to a millisecond (a tiny model's may print as 0.000): each speed is its
            # tokens over its time within that rounding.
            ok = ok and abs(s_tg * t_tg - b * tg) <= 0.01 * b * tg + s_tg * 0.0006
            check(ok, f"row PP {pp} TG {tg} B {b}: {row}")

        r = bb("-npp", "4", "-ntg", "3", "-npl", "2", "-o", "jsonl")
        lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
        ok = r.returncode == 0 and len(lines) == 1
        if ok:
            j = json.loads(lines[0])
            ok = (j["pp"], j["tg"], j["pl"], j["n_kv"]) == (4, 3, 2, 14) and j["speed_tg"] > 0 and j["t"] > 0
        check(ok, f"-o jsonl: {lines}")

        for args, pattern in ((("-npl", "0"), "-npl: 0 is below 1"), (("-npp", "-1"), "-npp"),
                              (("-npp", "0", "-ntg", "0"), "no tokens to measure")):
            r = bb(*args)
            check(r.returncode != 0 and pattern in r.stderr, f"{' '.join(args)} refused: {r.stderr.strip()[-160:]}")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
