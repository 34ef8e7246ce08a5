#!/usr/bin/env python3
"""`tilellm` on a machine without OpenCL, Vulkan or an NVIDIA driver, tried as a new user would: the binary
links neither the OpenCL ICD loader nor the Vulkan loader nor the CUDA driver (ldd), and with all three hidden
(TILELLM_OPENCL_LIBRARY, TILELLM_VULKAN_LIBRARY and TILELLM_CUDA_DRIVER pointing at files that do not exist,
which the backends then fail to load exactly as on a machine without them) it still starts, runs the CPU
path, lists the three backends as unavailable with the reason, and refuses --backend opencl / vulkan / cuda
(and gemm-speed's and gemv-bw's backends 3, 7 and 2) with that reason; a backend this build lacks (Metal) is
named with why and with what the build has. A build without the Vulkan or CUDA backend (no headers or glslc;
no nvcc) is told by `devices` not listing it; its checks are then those of a backend the build lacks.

    check_no_gpu_loaders.py TILELLM_BINARY
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

HIDDEN = {**os.environ, "TILELLM_OPENCL_LIBRARY": "/nonexistent/libOpenCL.so.1",
          "TILELLM_VULKAN_LIBRARY": "/nonexistent/libvulkan.so.1", "TILELLM_CUDA_DRIVER": "/nonexistent/libcuda.so.1"}
REASON = "/nonexistent/libOpenCL.so.1 could not be loaded"
VK_REASON = "/nonexistent/libvulkan.so.1 could not be loaded"
CUDA_REASON = "the NVIDIA driver is not installed (/nonexistent/libcuda.so.1 could not be loaded)"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=300, env=env or HIDDEN)


def main() -> int:
    binary = sys.argv[1]
    fails = []
    if shutil.which("ldd"):
        r = run("ldd", binary, env=dict(os.environ))
        for lib in ("libOpenCL", "libvulkan", "libcuda"):
            if lib in r.stdout:
                fails.append(f"the binary links {lib}:\n{r.stdout}")

    r = run(binary, "devices")
    vulkan_built = "backend vulkan (MNN type 7)" in r.stdout
    cuda_built = "backend cuda (MNN type 2)" in r.stdout
    if r.returncode != 0 or "backend cpu (MNN type 0)" not in r.stdout or \
            f"backend opencl (MNN type 3): unavailable: {REASON}" not in r.stdout or \
            (vulkan_built and f"backend vulkan (MNN type 7): unavailable: {VK_REASON}" not in r.stdout) or \
            (cuda_built and f"backend cuda (MNN type 2): unavailable: {CUDA_REASON}" not in r.stdout):
        fails.append(f"devices with the loaders hidden:\n{r.stdout}{r.stderr}")
    vk_want = f"backend vulkan cannot run on this machine: {VK_REASON}" if vulkan_built else \
        "backend vulkan is not in this build: "
    vk7_want = f"backend vulkan cannot run on this machine: {VK_REASON}" if vulkan_built else \
        "backend 7 (vulkan) is not in this build"
    cuda_want = f"backend cuda cannot run on this machine: {CUDA_REASON}" if cuda_built else \
        "backend cuda is not in this build: "
    cuda2_want = f"backend cuda cannot run on this machine: {CUDA_REASON}" if cuda_built else \
        "backend 2 (cuda) is not in this build"

    r = run(binary, "run", "-p", "Once upon a time", "-n", "4", "--temp", "0", "-t", "2")
    if r.returncode != 0 or not r.stdout.strip() or "generated: 4 tokens" not in r.stderr:
        fails.append(f"the CPU path with the loader hidden ({r.returncode}):\n{r.stdout}{r.stderr}")

    for args, want in ((["run", "-p", "x", "-n", "2", "--backend", "opencl"],
                        f"backend opencl cannot run on this machine: {REASON}"),
                       (["gemm-speed", "speed/GemmSpeedFloat", "3", "0", "68", "--shape", "64,16"],
                        f"backend opencl cannot run on this machine: {REASON}"),
                       (["run", "-p", "x", "-n", "2", "--backend", "vulkan"], vk_want),
                       (["run", "-p", "x", "-n", "2", "--backend", "cuda"], cuda_want),
                       (["run", "-p", "x", "-n", "2", "--backend", "metal"],
                        "backend metal is not in this build: Metal is Apple's GPU API"),
                       (["gemm-speed", "speed/GemmSpeedFloat", "1", "--shape", "64,16"],
                        "backend 1 (metal) is not in this build: Metal is Apple's GPU API"),
                       (["gemm-speed", "speed/GemmSpeedFloat", "7", "--shape", "64,16"], vk7_want),
                       (["gemv-bw", "--backend", "2", "--shape", "64,16"], cuda2_want)):
        r = run(binary, *args)
        err = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        if r.returncode == 0 or want not in err or "this build has cpu (0)" not in err:
            fails.append(f"{' '.join(args)}: want one error line with {want!r} and what the build has, got "
                         f"({r.returncode}): {r.stdout}{r.stderr}")
        if "Segmentation" in r.stderr or r.returncode < 0:
            fails.append(f"{' '.join(args)} crashed: {r.returncode}")

    for f in fails:
        print("FAIL:", f)
    if not fails:
        print("no OpenCL or Vulkan loader, no NVIDIA driver: ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
