#!/usr/bin/env bash
# The C API's thread test under ThreadSanitizer: a separate, small build of the engine and libtilellm.so
# with -fsanitize=thread (at -O1, the CPU backend only: the GPU backends are left out of this build) into
# BUILD_DIR, then test_c_api_threads on a tiny random model (tests/reference/make_tiny_model.py: the same
# code paths as a real model, quick under the sanitizer). Fails on any report (exit 66) or failed check.
#   run_tsan.sh SOURCE_DIR BUILD_DIR [PYTHON]
set -euo pipefail
src=$1
build=$2
py=${3:-python3}
flags="-fsanitize=thread -O1 -g1"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=TSan -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DTILELLM_WITH_OPENCL=OFF -DTILELLM_WITH_VULKAN=OFF -DTILELLM_WITH_CUDA=OFF \
  -DPython3_EXECUTABLE="$(command -v "$py")" >/dev/null
cmake --build "$build" -j"$(nproc)" --target test_c_api_threads
model="$build/tiny-q8_0.gguf"
"$py" "$src/tests/reference/make_tiny_model.py" "$model" --type q8_0 --seed 7
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1" "$build/test_c_api_threads" "$model" 12
