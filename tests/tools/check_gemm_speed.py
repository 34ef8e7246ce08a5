#!/usr/bin/env python3
"""`tilellm gemm-speed` on the CPU, run as a user runs it, checked line by line against what MNN's GemmSpeed
(test/speed/GemmSpeed.cpp at 4d40bdb) prints for the same test, so MNN's scripts read ours:

  - the blank line, the test's banner and printBackendConfig's line open the output;
  - GemmSpeedAll labels each shape once (after a blank line) and runs float, int8b0, int4b64 under it, M by M;
    a single-mode test labels each shape without the blank line, and Int4-Block64 leaves out a shape whose
    K % 64 != 0 (ours says so on a "#" line, which MNN's parsers skip);
  - every result line is MNN's CPU printf format, rebuilt here from the numbers it shows, with GFLOPS that
    follow from the time; nothing but "#" lines comes in between;
  - the metadata line names the commit the binary was built from;
  - --plot writes an SVG with a line per mode and shape, or for .html a page with it and the results' table.

    check_gemm_speed.py TILELLM_BINARY
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.dom.minidom

CPU_LINE = re.compile(r"^  (\S+)\s+M=(\d+)\s+K=(\d+)\s+N=(\d+)\s+avg=([0-9.]+) ms  ([0-9.]+) GFLOPS$")
SMALL = ["--shape", "128,40", "--shape", "96,24", "--m", "1,5", "--warmup", "1", "--runs", "2"]


def run(binary: str, *args: str) -> list[str]:
    r = subprocess.run([binary, "gemm-speed", *args], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"gemm-speed {' '.join(args)} failed ({r.returncode}): {r.stdout}{r.stderr}")
    return r.stdout.splitlines()


def skeleton(lines: list[str], fails: list[str]) -> list[str]:
    """The output with each result line checked and reduced to 'tag M K N'; '#' lines dropped."""
    out = []
    for line in lines:
        if line.lstrip().startswith("#"):
            continue
        m = CPU_LINE.match(line)
        if not m:
            out.append(line)
            continue
        tag, mm, k, n, ms, gf = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), \
            float(m.group(5)), float(m.group(6))
        mnn = "  %-28s  M=%-5d K=%-5d N=%-5d  avg=%.3f ms  %.2f GFLOPS" % (tag, mm, k, n, ms, gf)
        if line != mnn:
            fails.append(f"not MNN's printf format:\n{line!r}\n{mnn!r}")
        flops = 2.0 * mm * k * n
        lo, hi = flops / ((ms + 0.0005) * 1e6), flops / (max(ms - 0.0005, 1e-9) * 1e6)
        if not lo - 0.006 <= gf <= hi + 0.006:
            fails.append(f"GFLOPS do not follow from the time: {line}")
        out.append(f"{tag} {mm} {k} {n}")
    return out


def main() -> int:
    binary = sys.argv[1]
    fails: list[str] = []

    got = skeleton(run(binary, "speed/GemmSpeedAll", "0", "2", "2", *SMALL), fails)
    want = ["", "===== All GEMM Speed Benchmark =====", "Backend: CPU (type=0), precision=2, numthread=2"]
    for k, n in ((128, 40), (96, 24)):
        want += ["", f"--- K={k} N={n} ---"]
        for tag in ("float-gemm", "int8b0-gemm", "int4b64-gemm"):
            if tag == "int4b64-gemm" and k % 64:
                continue
            want += [f"{tag} {m} {k} {n}" for m in (1, 5)]
    if got != want:
        fails.append("GemmSpeedAll:\n  got  " + "\n       ".join(got) + "\n  want " + "\n       ".join(want))

    # The metadata names the commit the binary was built from; the tree has not moved since the build here.
    lines = run(binary, "speed/GemmSpeedFloat", "--shape", "64,16", "--m", "1", "--runs", "1")
    here = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    meta = [l for l in lines if l.startswith("# cpu: ")]
    commit = re.search(r"\| commit: ([0-9a-f]+)", meta[0]) if meta else None
    if here and not (commit and here.startswith(commit.group(1))):
        fails.append(f"metadata commit {commit.group(1) if commit else None} is not the tree's {here}")

    lines = run(binary, "speed/GemmSpeedInt4", "--threads", "1", *SMALL)
    got = skeleton(lines, fails)
    want = ["", "===== Int4-Block64 Conv1x1 GEMM Speed =====", "Backend: CPU (type=0), precision=0, numthread=1",
            "--- K=128 N=40 ---", "int4b64-gemm 1 128 40", "int4b64-gemm 5 128 40"]
    if got != want:
        fails.append("GemmSpeedInt4:\n  got  " + "\n       ".join(got) + "\n  want " + "\n       ".join(want))
    if not any(l.startswith("  # int4b64-gemm skipped at K=96 N=24") for l in lines):
        fails.append("the K % 64 skip is not said")

    # --plot: an SVG with a line per mode of a shape; .html the same SVG inline and a table row per result.
    with tempfile.TemporaryDirectory() as d:
        svg, page = os.path.join(d, "p.svg"), os.path.join(d, "p.html")
        run(binary, "speed/GemmSpeedAll", *SMALL, "--plot", svg)
        run(binary, "speed/GemmSpeedAll", *SMALL, "--plot", page)
        lines = xml.dom.minidom.parse(svg).getElementsByTagName("polyline")
        if len(lines) != 5:  # float, int8b0, int4b64 at K=128; float, int8b0 at K=96
            fails.append(f"plot: {len(lines)} lines, want 5")
        text = open(page).read()
        if not text.startswith("<!DOCTYPE html>") or "<svg " not in text or text.count("<tr>") != 1 + 10:
            fails.append(f"html plot: not a page with the SVG and a row per result:\n{text[:300]}")

    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
