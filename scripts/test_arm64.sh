#!/usr/bin/env bash
# The ARM half of the test job: cross-compiles the kernel tests for AArch64 Linux (Debian's
# g++-aarch64-linux-gnu, cmake/aarch64-linux-gnu.cmake) into build-arm64 and runs them under qemu-user.
#
# qemu runs them with QEMU_CPU=max, an ARMv8 CPU model with the dot product, so that the tests exercise the
# scalar, "neon" and "neondot" kernel tables of quants_q8, the "neon" table of quants and the "neon" and
# "neondot" tiled matmul kernels against their references. test_format and test_backends' tiled matmul tests
# run once more on a Cortex-A53 model (ARMv8.0, no dot product): the run-time picks must fall back to "neon",
# and an ARMv8.2 instruction that leaked into the baseline kernels would stop the program there. Emulated
# timings mean nothing for speed; this checks correctness only. Fails when a build or a test fails, or when a
# NEON test was skipped on the max model.
#
# Needs the packages of scripts/setup.sh (g++-aarch64-linux-gnu, qemu-user, libgtest-dev's sources, the
# fmt/json/CLI11 headers). Usage: scripts/test_arm64.sh [build-dir]   (default build-arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-arm64}
SYSROOT=/usr/aarch64-linux-gnu

for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "test_arm64: $tool not found (run scripts/setup.sh)" >&2; exit 1; }
done

# The test programs that reach the ARM kernels: test_format runs every kernel table against the scalar
# reference; test_backends runs the CPU ops (matmuls through the best table) against their references.
# test_gemm is left out: its kernels have no ARM path yet, and its scalar reference shapes take minutes
# under emulation.
TESTS=(test_format test_backends)

cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target "${TESTS[@]}"

run() {  # run CPU_MODEL PROGRAM [gtest args...]
  local cpu=$1 prog=$2
  shift 2
  echo "test_arm64: $prog on qemu cpu $cpu"
  QEMU_CPU=$cpu qemu-aarch64 -L "$SYSROOT" "$BUILD/$prog" "$@"
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for prog in "${TESTS[@]}"; do
  run max "$prog" 2>&1 | tee "$log" || status=1
  # A NEON path that is skipped is a NEON path that is not tested: qemu's max CPU has every extension.
  if grep -E '^\[  SKIPPED \].*neon' "$log" >/dev/null; then
    echo "test_arm64: $prog skipped NEON tests on a CPU model that has NEON and the dot product" >&2
    status=1
  fi
done
run cortex-a53 test_format || status=1
run cortex-a53 test_backends --gtest_filter='Tiled*' || status=1

if [ "$status" -ne 0 ]; then
  echo "test_arm64: FAILED" >&2
  exit 1
fi
echo "test_arm64: all ARM tests passed"
