#!/usr/bin/env python3
"""`tilellm gemm-speed` and `tilellm gemv-bw` on a GPU backend (3 OpenCL, the default; 7 Vulkan), run as a user
runs them, on a small shape:

  - every mode of speed/GemmSpeedAll prints one MNN GPU line per M, byte for byte MNN's printf format
    (rebuilt here from the numbers it shows), after its reference check (a CHECK FAILED line would fail);
  - int4a8-gemm (no device format for int4b0) prints the backend's reason on a skip line and never a number;
  - the image memory mode (bitmask bit 128, --gpu-memory image) prints that it is not available and reports
    no numbers; a bad bitmask and a missing device are errors naming the cause;
  - --format md carries the GPU columns;
  - the backend's own flags reach the benchmarked matmul (OpenCL: a named GEMM tile; Vulkan: subgroups off),
    each given one printed under the device line; a bad value is an error naming the flag;
  - gemv-bw --backend NAME prints its peaks and one row per format, with the same bytes read and copied, then
    the back-to-back table: one row per format, its copies and a positive time and bandwidth.
  - the backend runs with the runtime library it found at run time (the binary links neither libOpenCL nor
    libvulkan);
  - `bench --backend NAME -o jsonl` on a random tiny model names the backend, the device (gpu_info, as
    `tilellm devices` lists device 0) and all layers on it (n_gpu_layers 99), as llama-bench's rows do.

    check_gpu_bench.py TILELLM_BINARY [BACKEND_NUMBER]

Exits 77 (CTest's skip code) when the backend has no device here or is not in this build.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import tiny_model  # noqa: E402

GPU_LINE = re.compile(
    r"^  (\S+)\s+M=(\d+)\s+K=(\d+)\s+N=(\d+)\s+total=([0-9.]+) ms \(([0-9.]+) GFLOPS\)  "
    r"gpu=([0-9.]+) ms \(([0-9.]+) GFLOPS\)$")


def run(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)


def mnn_line(tag: str, m: int, k: int, n: int, total: float, tg: float, gpu: float, gg: float) -> str:
    return "  %-28s  M=%-5d K=%-5d N=%-5d  total=%.3f ms (%.2f GFLOPS)  gpu=%.3f ms (%.2f GFLOPS)" % (
        tag, m, k, n, total, tg, gpu, gg)


def consistent(gflops: float, m: int, k: int, n: int, ms: float) -> bool:
    """The printed GFLOPS is 2 M K N / (ms 1e6) of the unrounded ms, which the printed ms (3 decimals) can
    only bound: ms is within 0.0005 of it."""
    flops = 2.0 * m * k * n
    lo, hi = flops / ((ms + 0.0005) * 1e6), flops / (max(ms - 0.0005, 1e-9) * 1e6)
    return lo - 0.006 <= gflops <= hi + 0.006


NAMES = {"3": "opencl", "7": "vulkan"}
TITLES = {"3": "OpenCL", "7": "Vulkan"}


def main() -> int:
    binary = sys.argv[1]
    num = sys.argv[2] if len(sys.argv) > 2 else "3"
    name = NAMES[num]
    devices = run(binary, "devices")
    if devices.returncode != 0 or f"backend {name} (MNN type {num}): unavailable" in devices.stdout or \
            f"backend {name}" not in devices.stdout:
        print(f"no {name} device (or no {name} backend in this build): skipped")
        return 77
    fails = []
    small = ["--shape", "128,40", "--m", "1,5", "--warmup", "1", "--runs", "2"]

    for precision in ("0", "2"):
        r = run(binary, "gemm-speed", "speed/GemmSpeedAll", num, precision, "68", *small)
        if r.returncode != 0:
            fails.append(f"GemmSpeedAll precision {precision} failed ({r.returncode}): {r.stdout}{r.stderr}")
            continue
        lines = r.stdout.splitlines()
        head = ["", "===== All GEMM Speed Benchmark =====",
                f"Backend: {TITLES[num]} (type={num}), precision={precision}, numthread=68"] + \
            (["  OpenCL memory mode: BUFFER"] if num == "3" else [])  # MNN prints it for OpenCL only
        if lines[:len(head)] != head:
            fails.append(f"MNN's header lines: {lines[:len(head)]}, expected {head}")
        if "--- K=128 N=40 ---" not in lines:
            fails.append("no shape label")
        if not any(l.startswith("# device 0: ") and "memory: BUFFER" in l and "driver:" in l for l in lines):
            fails.append("no metadata header with device, driver and memory mode")
        seen = []
        for l in lines:
            m = GPU_LINE.match(l)
            if not m:
                if "CHECK FAILED" in l:
                    fails.append(l)
                continue
            tag, mm, k, n = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
            total, tg, gpu, gg = (float(m.group(i)) for i in (5, 6, 7, 8))
            if gpu <= 0 or total <= 0 or gpu > total:
                fails.append(f"times not positive, or gpu above total: {l}")
                continue
            if l != mnn_line(tag, mm, k, n, total, tg, gpu, gg):
                fails.append(f"not MNN's printf format:\n{l!r}\n{mnn_line(tag, mm, k, n, total, tg, gpu, gg)!r}")
            if not consistent(tg, mm, k, n, total) or not consistent(gg, mm, k, n, gpu):
                fails.append(f"GFLOPS do not follow from the times: {l}")
            seen.append((tag, mm))
        want = [(t, m) for t in ("float-gemm", "int8b0-gemm", "int4b64-gemm") for m in (1, 5)]
        if seen != want:
            fails.append(f"precision {precision}: rows {seen}, expected {want}")

    r = run(binary, "gemm-speed", "speed/GemmSpeedInt4A8", num, "0", "68", *small)
    if r.returncode != 0 or "int4a8-gemm skipped" not in r.stdout or "int4b0 has no device format" not in r.stdout or \
            any(GPU_LINE.match(l) for l in r.stdout.splitlines()):
        fails.append(f"int4a8 on the device is not a clean skip: {r.stdout}{r.stderr}")

    for args in ([num, "0", "132"], [num, "0", "--gpu-memory", "image"]):
        r = run(binary, "gemm-speed", "speed/GemmSpeedFloat", *args, *small)
        if r.returncode != 0 or "memory mode IMAGE: skipped" not in r.stdout or \
                any(GPU_LINE.match(l) for l in r.stdout.splitlines()):
            fails.append(f"image mode {args} is not a clean skip: {r.stdout}{r.stderr}")

    r = run(binary, "gemm-speed", "speed/GemmSpeedFloat", num, "0", "192", *small)
    if r.returncode == 0 or "sets both BUFFER (64) and IMAGE (128)" not in r.stderr:
        fails.append(f"bitmask 192 is not an error naming the bits: {r.stdout}{r.stderr}")
    r = run(binary, "gemm-speed", "speed/GemmSpeedFloat", num, "0", "68", "--device", "99", *small)
    if r.returncode == 0 or f"{name} device 99 does not exist" not in r.stderr:
        fails.append(f"--device 99 is not an error naming the device: {r.stdout}{r.stderr}")

    r = run(binary, "gemm-speed", "speed/GemmSpeedInt8", "--backend", name, "--gpu-memory", "buffer",
            "--device-profile", "powervr-rogue", "--format", "md", *small)
    if r.returncode != 0 or "| gpu ms | gpu median ms | GFLOPS (gpu) |" not in r.stdout or \
            r.stdout.count("| int8b0-gemm | ") != 2 or "profile: powervr-rogue" not in r.stdout:
        fails.append(f"md table: {r.stdout}{r.stderr}")

    flag, value, bad = {"3": ("--cl-gemm-tile", "32x32x2", "999x1"), "7": ("--vk-subgroups", "off", "on")}[num]
    r = run(binary, "gemm-speed", "speed/GemmSpeedFloat", num, "0", "68", flag, value, *small)
    if r.returncode != 0 or f"\n# {flag} {value}\n" not in r.stdout or \
            sum(1 for l in r.stdout.splitlines() if GPU_LINE.match(l)) != 2:
        fails.append(f"gemm-speed {flag} {value}: {r.stdout}{r.stderr}")
    r = run(binary, "gemm-speed", "speed/GemmSpeedFloat", num, "0", "68", flag, bad, *small)
    if r.returncode == 0 or f"{flag}: '{bad}'" not in r.stderr:
        fails.append(f"gemm-speed {flag} {bad} is not an error naming the flag: {r.stdout}{r.stderr}")
    if num == "3":  # the tile reaches the backend: one PowerVR Rogue cannot hold is refused (a skip line)
        r = run(binary, "gemm-speed", "speed/GemmSpeedFloat", num, "0", "68", "--device-profile", "powervr-rogue",
                flag, "128x64", *small)
        if "skipped at K=128 N=40: OpenCL backend: --cl-gemm-tile 128x64 needs work-groups of 128 items" \
                not in r.stdout or any(GPU_LINE.match(l) for l in r.stdout.splitlines()):
            fails.append(f"gemm-speed --cl-gemm-tile 128x64 on powervr-rogue: {r.stdout}{r.stderr}")

    r = run(binary, "gemv-bw", "--backend", name, "--shape", "256,40", "--peak-mib", "32")
    first, _, b2b = r.stdout.partition("# back to back")
    rows = [l for l in first.splitlines() if l.startswith("| ") and not l.startswith("| type")]
    b2b_rows = [l for l in b2b.splitlines() if l.startswith("| ") and not l.startswith("| type")]
    if r.returncode != 0 or "# peak (same run, device timestamps, median of the 10 rounds" not in r.stdout or \
            [l.split()[1] for l in rows] != ["int8b0", "int4b64", "q8_0", "f16"]:
        fails.append(f"gemv-bw --backend {name}: {r.stdout}{r.stderr}")
    for l in rows:
        cells = [c.strip() for c in l.strip("|").split("|")]
        # MNN's nine columns, then %copy and the same bytes read and copied alone
        if len(cells) != 12 or cells[1] != "gpu" or not float(cells[2]) > 0 or not float(cells[5]) > 0 or \
                not float(cells[10]) > 0 or not float(cells[11]) > 0:
            fails.append(f"gemv-bw row: {l}")
    if [l.split()[1] for l in b2b_rows] != ["int8b0", "int4b64", "q8_0", "f16"]:
        fails.append(f"gemv-bw back-to-back table: {b2b}")
    for l in b2b_rows:
        cells = [c.strip() for c in l.strip("|").split("|")]
        if len(cells) != 6 or not int(cells[1]) >= 2 or not float(cells[2]) > 0 or not float(cells[3]) > 0:
            fails.append(f"gemv-bw back-to-back row: {l}")

    section = devices.stdout.split(f"backend {name} (MNN type {num})", 1)[1]
    device0 = re.search(r"^  device 0: (.*)$", section, re.M)
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(os.path.join(tmp, "tiny.gguf"))
        r = run(binary, "bench", "-m", model, "--backend", name, "-p", "8", "-n", "2", "-r", "1", "-o", "jsonl")
        rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        if r.returncode != 0 or len(rows) != 2 or not device0:
            fails.append(f"bench -o jsonl on {name}: {r.stdout}{r.stderr}")
        for row in rows:
            got = (row.get("backends"), row.get("gpu_info"), row.get("n_gpu_layers"))
            if got != (TITLES[num], device0.group(1), 99):
                fails.append(f"bench jsonl row: backends, gpu_info, n_gpu_layers {got}")

    for f in fails:
        print("FAIL:", f)
    if not fails:
        print(f"gemm-speed / gemv-bw on {TITLES[num]}: ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
