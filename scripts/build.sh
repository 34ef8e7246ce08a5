#!/usr/bin/env bash
# Configures and builds everything this machine supports into build/ (Release, warnings on).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$(command -v "${PYTHON:-python3}")" >/dev/null
cmake --build build -j"$(nproc)"
