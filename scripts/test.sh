#!/usr/bin/env bash
# The test job on a fresh machine: install what is needed, fetch the test models, build, run every test (CTest runs
# the GoogleTest programs and the Python reference checks) on all cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch_models.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
scripts/test_arm64.sh  # the NEON kernels, cross-built for AArch64 and run under qemu-user
