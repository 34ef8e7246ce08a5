#!/usr/bin/env bash
# Configures and builds into build/ (Release, warnings on): everything this machine supports, or only the
# targets named as arguments (e.g. scripts/build.sh tilellm).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$(command -v "${PYTHON:-python3}")" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build build -j"$(nproc)" --target "$@"
else
  cmake --build build -j"$(nproc)"
fi
