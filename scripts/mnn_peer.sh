#!/usr/bin/env bash
# MNN's GemmSpeed / GemvBW benchmark (its test binary run_test.out) as a peer measured on the same machine in
# the same window as `tilellm gemm-speed` / `gemv-bw` (scripts/vs_mnn.py runs the two alternately).
#
# MNN is not on the package indexes this project may use, so the source tree comes from the user: a checkout
# of https://github.com/alibaba/MNN (the MNN figures in docs/GEMM_SPEED.md: 4d40bdb). Nothing is written
# into it: the tree is copied (without .git) into the cache, and only the copy's test/CMakeLists.txt is cut
# down to the two benchmark files (MNN's whole test suite is ~180 files; the library alone took 12 minutes on
# 2 cores). Built as those MNN figures were: Release, AVX-512 (with VNNI), low-memory mode (the
# weight-quantized int8/int4 paths), one library.
#
# Usage
#   scripts/mnn_peer.sh build MNN_SOURCE_DIR    # copy and build; prints the binary's path
#   scripts/mnn_peer.sh path                    # the binary's path (exit 1 when not built)
#
# Everything lives in ~/.cache/tilellm/mnn (TILELLM_CACHE overrides ~/.cache/tilellm): src/ (the copy),
# build/run_test.out (run as `run_test.out speed/GemmSpeedAll 0 0 2`, MNN's own arguments) and COMMIT (the
# source's commit, when it was a git checkout).
set -euo pipefail

cache="${TILELLM_CACHE:-$HOME/.cache/tilellm}/mnn"
bin="$cache/build/run_test.out"

case "${1:-}" in
    path)
        [ -x "$bin" ] || { echo "MNN peer not built: run scripts/mnn_peer.sh build MNN_SOURCE_DIR" >&2; exit 1; }
        echo "$bin"
        ;;
    build)
        src="${2:?usage: scripts/mnn_peer.sh build MNN_SOURCE_DIR}"
        if [ ! -f "$src/test/speed/GemmSpeed.cpp" ] || [ ! -f "$src/test/CMakeLists.txt" ]; then
            echo "error: $src is not an MNN source tree with test/speed/GemmSpeed.cpp (one with the GemmSpeed benchmark)" >&2
            exit 2
        fi
        rm -rf "$cache/src"
        mkdir -p "$cache/src"
        tar -C "$src" --exclude=.git --exclude=apps --exclude=project --exclude=docs -cf - . | tar -C "$cache/src" -xf -
        if [ -d "$src/.git" ]; then git -C "$src" rev-parse --short HEAD > "$cache/COMMIT" 2>/dev/null || true; fi
        t="$cache/src/test/CMakeLists.txt"
        glob='file(GLOB_RECURSE Files ${CMAKE_CURRENT_LIST_DIR}/*.cpp)'
        if ! grep -qF "$glob" "$t"; then
            echo "error: $t no longer globs its sources as expected; cannot cut the test suite down" >&2
            exit 2
        fi
        files='set(Files ${CMAKE_CURRENT_LIST_DIR}/main.cpp ${CMAKE_CURRENT_LIST_DIR}/MNNTestSuite.cpp'
        files+=' ${CMAKE_CURRENT_LIST_DIR}/TestUtils.cpp ${CMAKE_CURRENT_LIST_DIR}/speed/GemmSpeed.cpp'
        files+=' ${CMAKE_CURRENT_LIST_DIR}/speed/GemvBWTest.cpp)'
        python3 - "$t" "$glob" "$files" <<'PY'
import sys
path, old, new = sys.argv[1:]
s = open(path).read()
open(path, "w").write(s.replace(old, new, 1))
PY
        cmake -S "$cache/src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DMNN_BUILD_TEST=ON -DMNN_AVX512=ON \
            -DMNN_LOW_MEMORY=ON -DMNN_SEP_BUILD=OFF > "$cache/cmake.log"
        cmake --build "$cache/build" --target run_test.out -j"$(nproc)"
        echo "$bin"
        ;;
    *)
        sed -n '2,18p' "$0"
        exit 2
        ;;
esac
