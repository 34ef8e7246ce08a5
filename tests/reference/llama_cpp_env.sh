#!/usr/bin/env bash
# llama.cpp as the external oracle for goldens (tests/data/goldens) and perplexity numbers (docs/REFERENCE.md).
#
# We pin llama.cpp through the llama-cpp-python 0.3.36 source distribution: it vendors one llama.cpp tree and ships
# the pure-Python ctypes bindings that make_model_goldens.py uses. Nothing of it is committed to this repository;
# it lives in ~/.cache/tilellm (override with TILELLM_CACHE).
#
# Usage
#   source tests/reference/llama_cpp_env.sh          # export the variables below (build must exist)
#   tests/reference/llama_cpp_env.sh build           # download the sdist and build llama.cpp if absent
#   tests/reference/llama_cpp_env.sh check           # print versions and verify the Python bindings load
#   tests/reference/llama_cpp_env.sh build-vulkan    # llama-bench with the Vulkan backend (build-vulkan/)
#   tests/reference/llama_cpp_env.sh build-cuda      # llama-bench with the CUDA backend (build-cuda/)
#   tests/reference/llama_cpp_env.sh build-server    # llama-server on the CPU (build-server/), the peer of
#                                                    # bench/serve_load.py (docs/SERVE.md)
#
# The GPU peers (docs/PERF.md, docs/VULKAN.md) are static llama-bench binaries, built here and carried to the
# GPU machine: Vulkan against headers of Vulkan 1.4 (TILELLM_VULKAN_HEADERS, an include folder holding
# vulkan/vulkan.h: Debian trixie's libvulkan-dev 1.4.309, unpacked with dpkg -x, as bookworm's 1.3.239
# lacks VK_EXT_layer_settings), Debian's glslc (which knows no cooperative-matrix extension: the build
# then reports "matrix cores: none") and Debian's spirv-headers (its CMake package, which ggml-vulkan looks
# up); CUDA with the CUDA toolkit's nvcc for sm_90 (the H200), which on 2
# cores takes about an hour (-j1 at low priority beside other work).
#
# Exports
#   LLAMA_CPP_PY_DIR   the unpacked sdist (…/llama_cpp_python-0.3.36)
#   LLAMA_CPP_DIR      its vendored llama.cpp source tree
#   LLAMA_CPP_BIN      the build's bin/ (llama-perplexity, llama-tokenize, …, and the shared libraries)
#   LLAMA_CPP_LIB_PATH read by llama_cpp/llama_cpp.py to find libllama.so (instead of the wheel's own copy)
#   PYTHONPATH         prefixed with LLAMA_CPP_PY_DIR so that `import llama_cpp` finds the pure-Python package
#
# The Python package needs numpy, typing-extensions, diskcache and jinja2 (pip install them; all pure Python
# except numpy). The build is CPU-only, Release, shared libraries, no CURL, for the machine it runs on
# (llama.cpp's default GGML_NATIVE):
#   cmake -S vendor/llama.cpp -B vendor/llama.cpp/build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
#         -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF [-DCMAKE_C_FLAGS=... on x86]
#   cmake --build vendor/llama.cpp/build -j2 --target llama-perplexity llama-tokenize llama-simple llama-bench \
#         llama-quantize
# On x86 its AMX kernels are left out (-mno-amx-tile -mno-amx-int8 -mno-amx-bf16 for C and C++): on the Xeon
# VM of docs/PERF.md (2026-12-01) every model died in them (ggml_backend_amx_mul_mat: ldtilecfg refuses their
# tile configuration, then SIGILL at tilezero), as in llama.cpp's open issue #20824, while a plain tile
# configuration runs there. TileLLM has no AMX kernels either: both engines run AVX-512 (or AVX2) code. A
# build configured without those flags is configured and built again.

LLAMA_CPP_PY_VERSION=0.3.36
_tl_cache="${TILELLM_CACHE:-$HOME/.cache/tilellm}"
export LLAMA_CPP_PY_DIR="$_tl_cache/llama_cpp_python-$LLAMA_CPP_PY_VERSION"
export LLAMA_CPP_DIR="$LLAMA_CPP_PY_DIR/vendor/llama.cpp"
export LLAMA_CPP_BIN="$LLAMA_CPP_DIR/build/bin"
export LLAMA_CPP_LIB_PATH="$LLAMA_CPP_BIN"
case ":${PYTHONPATH:-}:" in
    *":$LLAMA_CPP_PY_DIR:"*) ;;
    *) export PYTHONPATH="$LLAMA_CPP_PY_DIR${PYTHONPATH:+:$PYTHONPATH}" ;;
esac

_tl_build() {
    set -euo pipefail
    _tl_sdist
    local flags=""
    if [ "$(uname -m)" = x86_64 ]; then flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"; fi
    local cache="$LLAMA_CPP_DIR/build/CMakeCache.txt"
    if [ ! -x "$LLAMA_CPP_BIN/llama-perplexity" ] || [ ! -x "$LLAMA_CPP_BIN/llama-quantize" ] ||
        [ ! -e "$LLAMA_CPP_BIN/libllama.so" ] || ! grep -qxF "CMAKE_C_FLAGS:STRING=$flags" "$cache" 2>/dev/null; then
        cmake -S "$LLAMA_CPP_DIR" -B "$LLAMA_CPP_DIR/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
            -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags"
        cmake --build "$LLAMA_CPP_DIR/build" -j"${JOBS:-2}" \
            --target llama-perplexity llama-tokenize llama-simple llama-bench llama-quantize
    fi
    python3 -c 'import typing_extensions, diskcache, jinja2' 2>/dev/null ||
        pip install typing-extensions diskcache jinja2
}

_tl_sdist() {
    mkdir -p "$_tl_cache"
    if [ ! -d "$LLAMA_CPP_DIR" ]; then
        (cd "$_tl_cache" &&
            pip download --no-deps --no-binary :all: "llama-cpp-python==$LLAMA_CPP_PY_VERSION" -d . &&
            tar xzf "llama_cpp_python-$LLAMA_CPP_PY_VERSION.tar.gz")
    fi
}

_tl_build_gpu() {  # $1: vulkan or cuda
    set -euo pipefail
    _tl_sdist
    local common=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF)
    if [ "$1" = vulkan ]; then
        local inc="${TILELLM_VULKAN_HEADERS:-/opt/vkh/usr/include}"
        [ -e "$inc/vulkan/vulkan.h" ] || { echo "no vulkan/vulkan.h under $inc (TILELLM_VULKAN_HEADERS)" >&2; exit 1; }
        cmake -S "$LLAMA_CPP_DIR" -B "$LLAMA_CPP_DIR/build-vulkan" "${common[@]}" -DGGML_VULKAN=ON \
            -DVulkan_INCLUDE_DIR="$inc"
        cmake --build "$LLAMA_CPP_DIR/build-vulkan" -j"${JOBS:-2}" --target llama-bench
    else
        local nvcc="${CUDACXX:-/usr/local/cuda/bin/nvcc}"
        cmake -S "$LLAMA_CPP_DIR" -B "$LLAMA_CPP_DIR/build-cuda" "${common[@]}" -DGGML_CUDA=ON \
            -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$nvcc"
        cmake --build "$LLAMA_CPP_DIR/build-cuda" -j"${JOBS:-2}" --target llama-bench
    fi
}

_tl_build_server() {
    set -euo pipefail
    _tl_sdist
    local flags=""
    if [ "$(uname -m)" = x86_64 ]; then flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"; fi
    cmake -S "$LLAMA_CPP_DIR" -B "$LLAMA_CPP_DIR/build-server" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON \
        -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags"
    cmake --build "$LLAMA_CPP_DIR/build-server" -j"${JOBS:-2}" --target llama-server
}

_tl_check() {
    echo "llama-cpp-python: $LLAMA_CPP_PY_VERSION ($LLAMA_CPP_PY_DIR)"
    echo "llama.cpp build:  $LLAMA_CPP_BIN"
    python3 - <<'EOF'
import llama_cpp
print("python bindings:", llama_cpp.__version__, "system info:", llama_cpp.llama_print_system_info().decode())
EOF
}

# Executed (not sourced): run the sub-command.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    case "${1:-check}" in
        build) _tl_build ;;
        check) _tl_check ;;
        build-vulkan) _tl_build_gpu vulkan ;;
        build-cuda) _tl_build_gpu cuda ;;
        build-server) _tl_build_server ;;
        *) echo "usage: $0 [build|check|build-vulkan|build-cuda|build-server]   (or: source $0)" >&2; exit 2 ;;
    esac
fi
