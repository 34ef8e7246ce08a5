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
  - --plot writes an SVG with a line per mode and shape, or for .html a page with it and the results' table;
  - gemv-bw (and gemm-speed speed/GemvBW) prints its same-run peaks (medians of the rounds the rows ran in)
    and MNN's GemvBW columns (then ours), one row per weight format the engine holds, with bytes per weight
    that follow from the format and rates that follow from the time; its header names the activations (q8,
    run's, by default; f32 on request; anything else refused naming the flag); --formats adds GGUF block
    types (q4_0, q4_k, q6_k) in the order given and refuses an unknown one or a K their blocks do not divide;
  - the weights of every mode go through the engine's own load path and matmul: a mode the engine has no
    kernel for at a shape is skipped with the engine's reason, never timed on something else.

    check_gemm_speed.py TILELLM_BINARY
"""

from __future__ import annotations

import math
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


# gemv-bw's rows: name -> bytes per weight at K (codes plus the format's fp16 scales and offsets).
GEMV_FORMATS = {"int8b0": lambda k: 1 + 4 / k, "int4b64": lambda k: 0.5 + 4 / 64, "q8_0": lambda k: 34 / 32,
                "f16": lambda k: 2.0, "q4_0": lambda k: 18 / 32, "q4_k": lambda k: 144 / 256,
                "q6_k": lambda k: 210 / 256}
GEMV_DEFAULT = ["int8b0", "int4b64", "q8_0", "f16"]  # MNN's four


def check_gemv_bw(lines: list[str], k: int, n: int, threads: int, fails: list[str],
                  names: list[str] = GEMV_DEFAULT) -> None:
    """One gemv-bw table at K x N (N a multiple of 16, K of 64: no padding in the byte counts), rows `names`."""
    peak = next((re.match(r"# peak \(same run, (\d+) threads, median of the 10 rounds the rows ran in\): memcpy "
                          r"([0-9.]+) GB/s \(read\+write\), pure read ([0-9.]+) GB/s \(best [0-9.]+ / [0-9.]+\) over", l)
                 for l in lines if l.startswith("# peak")), None)
    if not peak or int(peak.group(1)) != threads or not float(peak.group(3)) > 0:
        fails.append("gemv-bw: no same-run peak line:\n" + "\n".join(lines))
        return
    read = float(peak.group(3))
    head = "| type | thr | us/iter | W MiB | bytes/elem | eff GB/s | %peak | GFLOPS | AI |"
    if not any(l.startswith(head) for l in lines):
        fails.append("gemv-bw: not MNN's GemvBW columns first:\n" + "\n".join(lines))
    rows = [[c.strip() for c in l.strip("|").split("|")] for l in lines
            if l.startswith("| ") and l.split()[1] in GEMV_FORMATS]
    if [r[0] for r in rows] != [f"{name} {n}x{k}" for name in names]:
        fails.append("gemv-bw rows: " + str([r[0] for r in rows]))
        return

    def near(got: float, want: float, digits: int, rel: float = 0.0) -> bool:  # printed with `digits` decimals
        return abs(got - want) <= 0.5 * 10**-digits + rel * abs(want) + 1e-9

    def near_sig(got: float, want: float, sig: int, rel: float = 0.0) -> bool:  # printed with %.{sig}g
        step = 10**(math.floor(math.log10(abs(want))) - sig + 1) if want else 0.0
        return abs(got - want) <= 0.5 * step + rel * abs(want) + 1e-9

    for r in rows:
        thr, us, mib, bpe, gbs, pct, gflops, ai = int(r[1]), *map(float, r[2:9])
        if len(r) != 12 or not all(float(c) > 0 for c in r[9:]):
            fails.append(f"gemv-bw row: not %copy, read W and copy W after MNN's columns: {r}")
        want_bpe = GEMV_FORMATS[r[0].split()[0]](k)
        nbytes = want_bpe * k * n
        rel = 0.06 / us if us > 0 else 0.0  # us/iter is printed to 0.1 us: the rates carry its rounding
        ok = (thr == threads and us > 0 and near(bpe, want_bpe, 4) and near(mib, nbytes / 2**20, 2) and
              near(ai, 2 / want_bpe, 2) and near_sig(gbs, nbytes / us / 1e3, 4, rel) and
              near_sig(gflops, 2 * k * n / us / 1e3, 4, rel) and
              # from the time, not from the printed GB/s: at a small shape its two decimals are 0.4% of it
              near(pct, 100 * nbytes / us / 1e3 / read, 1, rel + 0.006 / read))
        if not ok:
            fails.append(f"gemv-bw row does not follow from the shape and the time: {r}")


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

    # A mode the engine holds no kernel for at a shape: the 8-bit tiles take whole blocks of 32 inputs.
    lines = run(binary, "speed/GemmSpeedInt8", "--shape", "100,64", "--m", "1", "--runs", "1")
    skip = [l for l in lines if l.startswith("  # int8b0-gemm skipped at K=100 N=64: ")]
    if not skip or "not a multiple of 32" not in skip[0] or any(CPU_LINE.match(l) for l in lines):
        fails.append("K % 32 != 0 is not a skip naming the engine's reason:\n" + "\n".join(lines))

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

    # gemv-bw, and the same table through gemm-speed's MNN test name.
    k, n = 1024, 256
    r = subprocess.run([binary, "gemv-bw", "--threads", "2", "--shape", f"{k},{n}"], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        fails.append(f"gemv-bw failed ({r.returncode}): {r.stdout}{r.stderr}")
    check_gemv_bw(r.stdout.splitlines(), k, n, 2, fails)
    check_gemv_bw(run(binary, "speed/GemvBW", "0", "0", "1", "--shape", f"{k},{n}"), k, n, 1, fails)
    # The activations are run's (q8) unless asked otherwise, and the header says which; f32 times the float
    # path through the same table; anything else is refused naming the flag.
    if not any(l.startswith("# gemv-bw |") and "| activations: q8 |" in l for l in r.stdout.splitlines()):
        fails.append("gemv-bw: the header does not say the activations are q8:\n" + r.stdout)
    r = subprocess.run([binary, "gemv-bw", "--shape", f"{k},{n}", "--activations", "f32"], capture_output=True,
                       text=True, timeout=300)
    lines = r.stdout.splitlines()
    if r.returncode != 0 or not any(l.startswith("# gemv-bw |") and "| activations: f32 |" in l for l in lines):
        fails.append(f"gemv-bw --activations f32 ({r.returncode}): {r.stdout}{r.stderr}")
    else:
        check_gemv_bw(lines, k, n, 1, fails)
    r = subprocess.run([binary, "gemv-bw", "--shape", f"{k},{n}", "--activations", "int4"], capture_output=True,
                       text=True, timeout=60)
    if r.returncode == 0 or "--activations" not in r.stderr:
        fails.append(f"gemv-bw --activations int4 is not an error naming the flag: {r.stdout}{r.stderr}")
    # --formats: GGUF block types beside MNN's four, in the order asked; an unknown name or a K the type's
    # blocks do not divide is refused, naming it.
    names = ["q6_k", "q4_0", "q4_k"]
    r = subprocess.run([binary, "gemv-bw", "--threads", "2", "--shape", f"{k},{n}", "--formats", ",".join(names)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fails.append(f"gemv-bw --formats {names} failed ({r.returncode}): {r.stdout}{r.stderr}")
    else:
        check_gemv_bw(r.stdout.splitlines(), k, n, 2, fails, names)
    for bad, says in ((["--formats", "q4_0,q5_0"], "unknown weight format 'q5_0'"),
                      (["--shape", "1088,64", "--formats", "q4_k"], "q4_k rows are blocks of 256: K=1088")):
        r = subprocess.run([binary, "gemv-bw", *bad], capture_output=True, text=True, timeout=60)
        if r.returncode == 0 or says not in r.stderr:
            fails.append(f"gemv-bw {' '.join(bad)}: not refused with '{says}': {r.stdout}{r.stderr}")

    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
