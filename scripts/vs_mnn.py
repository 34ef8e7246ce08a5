#!/usr/bin/env python3
"""`tilellm gemm-speed` against MNN's GemmSpeed measured on the same machine in the same window.

Runs MNN's test binary (scripts/mnn_peer.sh builds it) and ours on the same test, precision and threads,
alternately, for a number of rounds (the order is swapped every round, so a machine that speeds up or slows
down during the runs favours neither), parses the lines both print in MNN's format, and prints per cell the
median GFLOPS over the rounds of each, their ratio, and how many cells are at or above MNN. Both binaries
time MNN's way: 3 warm-ups, the mean of 10 runs. Our M = 1 row is left out (MNN's tests have no M = 1).

    scripts/vs_mnn.py --mnn $(scripts/mnn_peer.sh path) --tilellm build/tilellm \\
        [--threads 2] [--precision 0,2] [--tests Float,Int8,Int4] [--rounds 3] [--log runs.txt] [--md table.md]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict

LINE = re.compile(r"^  (\S+)\s+M=(\d+)\s+K=(\d+)\s+N=(\d+)\s+avg=([0-9.]+) ms  ([0-9.]+) GFLOPS$")
TAG_ORDER = {"float-gemm": 0, "int8b0-gemm": 1, "int4b64-gemm": 2}


def run(cmd: list[str], log) -> dict[tuple, float]:
    load = os.getloadavg()[0]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if log:
        log.write(f"$ {' '.join(cmd)}   (load average before: {load:.2f})\n{r.stdout}\n")
        log.flush()
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    cells = {}
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        if m:
            cells[(m.group(1), int(m.group(3)), int(m.group(4)), int(m.group(2)))] = float(m.group(6))
    if not cells:
        raise SystemExit(f"{' '.join(cmd)} printed no GemmSpeed line:\n{r.stdout[-2000:]}")
    return cells


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mnn", required=True, help="MNN's run_test.out (scripts/mnn_peer.sh path)")
    ap.add_argument("--tilellm", required=True, help="the tilellm binary")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="0,2")
    ap.add_argument("--tests", default="Float,Int8,Int4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--log", help="append every command and its whole output here")
    ap.add_argument("--md", help="also write the table here (Markdown)")
    a = ap.parse_args()
    for path in (a.mnn, a.tilellm):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            ap.error(f"{path} is not an executable file")
    if a.rounds < 1 or a.threads < 1:
        ap.error("--rounds and --threads must be >= 1")
    precisions = [int(p) for p in a.precision.split(",")]
    tests = [f"speed/GemmSpeed{t}" for t in a.tests.split(",")]
    log = open(a.log, "a") if a.log else None

    got: dict[str, dict[tuple, list[float]]] = {"mnn": defaultdict(list), "ours": defaultdict(list)}
    for rnd in range(a.rounds):
        for test in tests:
            for p in precisions:
                cmds = {
                    "mnn": [a.mnn, test, "0", str(p), str(a.threads)],
                    "ours": [a.tilellm, "gemm-speed", test, "0", str(p), str(a.threads), "--m", "8,32,128,512"],
                }
                order = ["mnn", "ours"] if rnd % 2 == 0 else ["ours", "mnn"]
                for who in order:
                    for cell, gf in run(cmds[who], log).items():
                        got[who][cell + (p,)].append(gf)
                print(f"round {rnd + 1}/{a.rounds}: {test} precision {p} done", file=sys.stderr, flush=True)

    cells = sorted(set(got["mnn"]) & set(got["ours"]),
                   key=lambda c: (c[1] != 2560 or c[2] != 4096, TAG_ORDER.get(c[0], 9), c[1], c[2], c[4], c[3]))
    rows = ["| mode | K×N | precision | M | MNN GFLOPS | ours GFLOPS | ours / MNN |",
            "|---|---|---:|---:|---:|---:|---:|"]
    at_or_above = 0
    ratios = []
    for c in cells:
        mnn, ours = statistics.median(got["mnn"][c]), statistics.median(got["ours"][c])
        ratio = ours / mnn
        ratios.append(ratio)
        at_or_above += ratio >= 1.0
        rows.append(f"| {c[0]} | {c[1]}×{c[2]} | {c[4]} | {c[3]} | {mnn:.1f} | {ours:.1f} | "
                    f"{'**' if ratio >= 1 else ''}{ratio:.2f}{'**' if ratio >= 1 else ''} |")
    geo = statistics.geometric_mean(ratios) if ratios else float("nan")
    rows.append("")
    rows.append(f"{at_or_above} of {len(cells)} cells at or above MNN (medians of {a.rounds} alternating "
                f"rounds, {a.threads} threads); geometric mean of ours / MNN: {geo:.3f}")
    missing = set(got["mnn"]) ^ set(got["ours"])
    if missing:
        rows.append(f"cells printed by only one of the two (left out): {sorted(missing)}")
    text = "\n".join(rows) + "\n"
    print(text, end="")
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
