#!/usr/bin/env python3
"""`tilellm gemm-speed` against MNN's GemmSpeed measured on the same machine in the same window.

Runs MNN's test binary (scripts/mnn_peer.sh builds it) and ours on the same test, precision and threads,
alternately, for a number of rounds (the order is swapped every round, so a machine that speeds up or slows
down during the runs favours neither), parses the lines both print in MNN's format, and prints per cell the
median GFLOPS over the rounds of each, their ratio, and how many cells are at or above MNN. Both binaries
time MNN's way: 3 warm-ups, the mean of 10 runs. Our M = 1 row is left out (MNN's tests have no M = 1).

    scripts/vs_mnn.py --mnn $(scripts/mnn_peer.sh path) --tilellm build/tilellm \\
        [--threads 2] [--precision 0,2] [--tests Float,Int8,Int4] [--rounds 3] [--log runs.txt] [--md table.md]
        [--svg plot.svg]
    scripts/vs_mnn.py --replay runs.txt [--md table.md] [--svg plot.svg]    # the same, from a run's --log

--svg draws GFLOPS against M, a panel per shape and precision, a colour per mode: ours solid, MNN dashed; a
self-contained SVG.
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


def parse(text: str) -> dict[tuple, float]:
    """(tag, K, N, M) -> GFLOPS from the GemmSpeed lines of one run's output."""
    cells = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            cells[(m.group(1), int(m.group(3)), int(m.group(4)), int(m.group(2)))] = float(m.group(6))
    return cells


def run(cmd: list[str], log) -> dict[tuple, float]:
    load = os.getloadavg()[0]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if log:
        log.write(f"$ {' '.join(cmd)}   (load average before: {load:.2f})\n{r.stdout}\n")
        log.flush()
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    cells = parse(r.stdout)
    if not cells:
        raise SystemExit(f"{' '.join(cmd)} printed no GemmSpeed line:\n{r.stdout[-2000:]}")
    return cells


def replay(path: str, got: dict) -> int:
    """Fills got from a --log file: each "$ command" line, then that command's output. Returns the rounds."""
    who, precision, text = None, None, []
    runs = defaultdict(int)

    def flush():
        if who is not None:
            runs[who] += 1
            for cell, gf in parse("\n".join(text)).items():
                got[who][cell + (precision,)].append(gf)

    for line in open(path):
        if line.startswith("$ "):
            flush()
            argv = line[2:].split("   (load")[0].split()
            who = "ours" if "gemm-speed" in argv else "mnn"
            i = argv.index("gemm-speed") + 1 if who == "ours" else 1
            precision, text = int(argv[i + 2]), []
        else:
            text.append(line.rstrip("\n"))
    flush()
    if not runs or runs["mnn"] != runs["ours"]:
        raise SystemExit(f"{path}: not a vs_mnn.py log with as many MNN runs as ours ({dict(runs)})")
    return max(len(v) for v in got["mnn"].values())


COLORS = {"float-gemm": "#1f77b4", "int8b0-gemm": "#d62728", "int4b64-gemm": "#2ca02c"}


def write_svg(path: str, med: dict, title: str) -> None:
    """med: (who, tag, K, N, M, precision) -> GFLOPS. A panel per (K, N) and precision."""
    shapes = sorted({(k[2], k[3]) for k in med}, key=lambda s: (s != (2560, 4096), s))
    precisions = sorted({k[5] for k in med})
    ms = sorted({k[4] for k in med})
    tags = sorted({k[1] for k in med}, key=lambda t: TAG_ORDER.get(t, 9))
    pw, ph, ml, mt, gap = 230, 200, 55, 75, 25  # mt: title, legend, then the first row of panel titles
    width = ml + len(shapes) * (pw + gap) + 10
    height = mt + len(precisions) * (ph + 60) - 10
    top = max(med.values()) * 1.08
    top = -(-top // 100) * 100
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>',
         f'<text x="{ml}" y="20" font-size="14">{title}</text>']
    lx = ml
    for tag in tags:
        o.append(f'<line x1="{lx}" x2="{lx + 24}" y1="38" y2="38" stroke="{COLORS.get(tag, "#000")}" '
                 f'stroke-width="2"/><text x="{lx + 28}" y="42">{tag}</text>')
        lx += 120
    o.append(f'<text x="{lx + 10}" y="42">solid: TileLLM; dashed: MNN (same window)</text>')
    for pi, p in enumerate(precisions):
        py = mt + pi * (ph + 60)
        for si, (k, n) in enumerate(shapes):
            px = ml + si * (pw + gap)
            o.append(f'<rect x="{px}" y="{py}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
            o.append(f'<text x="{px + pw / 2}" y="{py - 6}" text-anchor="middle">K={k} N={n}, '
                     f'precision {p}</text>')
            for g in range(5):
                v = top * g / 4
                y = py + ph - v / top * ph
                o.append(f'<line x1="{px}" x2="{px + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
                if si == 0:
                    o.append(f'<text x="{px - 4}" y="{y + 4:.1f}" text-anchor="end">{v:.0f}</text>')
            xs = {m: px + (i * pw / (len(ms) - 1) if len(ms) > 1 else pw / 2) for i, m in enumerate(ms)}
            for m, x in xs.items():
                o.append(f'<text x="{x:.1f}" y="{py + ph + 14}" text-anchor="middle">{m}</text>')
            if si == 0:
                o.append(f'<text x="{px - 40}" y="{py + ph / 2}" transform="rotate(-90 {px - 40} '
                         f'{py + ph / 2})" text-anchor="middle">GFLOPS</text>')
            o.append(f'<text x="{px + pw / 2}" y="{py + ph + 28}" text-anchor="middle">M</text>')
            for tag in tags:
                for who, dash in (("ours", ""), ("mnn", ' stroke-dasharray="5,4"')):
                    pts = [(xs[m], py + ph - med[(who, tag, k, n, m, p)] / top * ph)
                           for m in ms if (who, tag, k, n, m, p) in med]
                    if pts:
                        o.append(f'<polyline fill="none" stroke="{COLORS.get(tag, "#000")}" stroke-width="2"'
                                 f'{dash} points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mnn", help="MNN's run_test.out (scripts/mnn_peer.sh path)")
    ap.add_argument("--tilellm", help="the tilellm binary")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="0,2")
    ap.add_argument("--tests", default="Float,Int8,Int4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--log", help="append every command and its whole output here")
    ap.add_argument("--replay", help="read the runs from a --log file instead of running anything")
    ap.add_argument("--md", help="also write the table here (Markdown)")
    ap.add_argument("--svg", help="also draw the medians here (SVG)")
    a = ap.parse_args()
    got: dict[str, dict[tuple, list[float]]] = {"mnn": defaultdict(list), "ours": defaultdict(list)}
    if a.replay:
        rounds = replay(a.replay, got)
    else:
        if not a.mnn or not a.tilellm:
            ap.error("--mnn and --tilellm are needed (or --replay LOG)")
        for path in (a.mnn, a.tilellm):
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                ap.error(f"{path} is not an executable file")
        if a.rounds < 1 or a.threads < 1:
            ap.error("--rounds and --threads must be >= 1")
        precisions = [int(p) for p in a.precision.split(",")]
        tests = [f"speed/GemmSpeed{t}" for t in a.tests.split(",")]
        log = open(a.log, "a") if a.log else None
        rounds = a.rounds
        for rnd in range(a.rounds):
            for test in tests:
                for p in precisions:
                    cmds = {
                        "mnn": [a.mnn, test, "0", str(p), str(a.threads)],
                        "ours": [a.tilellm, "gemm-speed", test, "0", str(p), str(a.threads), "--m",
                                 "8,32,128,512"],
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
    med = {}
    for c in cells:
        mnn, ours = statistics.median(got["mnn"][c]), statistics.median(got["ours"][c])
        med[("mnn",) + c] = mnn
        med[("ours",) + c] = ours
        ratio = ours / mnn
        ratios.append(ratio)
        at_or_above += ratio >= 1.0
        rows.append(f"| {c[0]} | {c[1]}×{c[2]} | {c[4]} | {c[3]} | {mnn:.1f} | {ours:.1f} | "
                    f"{'**' if ratio >= 1 else ''}{ratio:.2f}{'**' if ratio >= 1 else ''} |")
    geo = statistics.geometric_mean(ratios) if ratios else float("nan")
    rows.append("")
    low = min(ratios) if ratios else float("nan")
    rows.append(f"{at_or_above} of {len(cells)} cells at or above MNN (medians of {rounds} alternating "
                f"rounds); geometric mean of ours / MNN: {geo:.3f}; lowest: {low:.2f}")
    missing = set(got["mnn"]) ^ set(got["ours"])
    if missing:
        rows.append(f"cells printed by only one of the two (left out): {sorted(missing)}")
    text = "\n".join(rows) + "\n"
    print(text, end="")
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    if a.svg and med:
        write_svg(a.svg, med, f"GemmSpeed: TileLLM and MNN, medians of {rounds} alternating rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
