#!/usr/bin/env python3
"""scripts/vs_mnn.py --replay on a made-up log of two rounds: the per-cell medians, the ratios, the count of
cells at or above MNN, a cell only one side printed, and the SVG (well-formed, one solid and one dashed line
per mode and panel). MNN itself is not needed.

    check_vs_mnn.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.dom.minidom

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINE = "  %-28s  M=%-5d K=%-5d N=%-5d  avg=%.3f ms  %.2f GFLOPS\n"


def block(cmd: str, cells: list[tuple]) -> str:
    out = f"$ {cmd}   (load average before: 0.10)\n\n===== Float Conv1x1 GEMM Speed =====\n--- K=64 N=32 ---\n"
    for tag, m, gf in cells:
        ms = 2.0 * m * 64 * 32 / (gf * 1e6)
        out += LINE % (tag, m, 64, 32, ms, gf)
    return out + "\n"


def main() -> int:
    fails = []
    mnn = "/x/run_test.out speed/GemmSpeedFloat 0 2 2"
    ours = "/x/tilellm gemm-speed speed/GemmSpeedFloat 0 2 2 --m 8,32,128,512"
    log = (block(mnn, [("float-gemm", 8, 100.0), ("float-gemm", 32, 200.0)]) +
           block(ours, [("float-gemm", 8, 150.0), ("float-gemm", 32, 180.0), ("float-gemm", 1, 5.0)]) +
           block(ours, [("float-gemm", 8, 130.0), ("float-gemm", 32, 190.0), ("float-gemm", 1, 5.0)]) +
           block(mnn, [("float-gemm", 8, 110.0), ("float-gemm", 32, 220.0)]))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "runs.txt")
        with open(path, "w") as f:
            f.write(log)
        svg = os.path.join(d, "plot.svg")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "vs_mnn.py"), "--replay", path,
                            "--svg", svg], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL: vs_mnn.py --replay failed: {r.stdout}{r.stderr}")
            return 1
        want = ["| float-gemm | 64×32 | 2 | 8 | 105.0 | 140.0 | **1.33** |",
                "| float-gemm | 64×32 | 2 | 32 | 210.0 | 185.0 | 0.88 |",
                "1 of 2 cells at or above MNN (medians of 2 alternating rounds); geometric mean of ours / MNN: 1.084; "
                "lowest: 0.88",
                "cells printed by only one of the two (left out): [('float-gemm', 64, 32, 1, 2)]"]
        for w in want:
            if w not in r.stdout.splitlines():
                fails.append(f"missing line {w!r} in:\n{r.stdout}")
        doc = xml.dom.minidom.parse(svg)
        lines = doc.getElementsByTagName("polyline")
        dashed = [p for p in lines if p.getAttribute("stroke-dasharray")]
        if len(lines) != 2 or len(dashed) != 1:
            fails.append(f"plot: {len(lines)} lines, {len(dashed)} dashed; want 2 and 1")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
