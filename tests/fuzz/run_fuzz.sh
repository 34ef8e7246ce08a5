#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz) with clang, libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer
# in a build of their own (BUILD_DIR; only base, format, tokenizer and the model's binding are compiled), and
# runs each for a bounded time from seeds written by make_seeds.py. Fails on any crash, sanitizer report,
# leak, uncaught exception, input slower than 10 s or allocation over 2 GiB.
#   run_fuzz.sh SOURCE_DIR BUILD_DIR [SECONDS_PER_TARGET [PYTHON]]
set -euo pipefail
src=$1
build=$2
secs=${3:-30}
py=${4:-python3}
cxx=${CXX_FUZZ:-clang++}
cc=${CC_FUZZ:-clang}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DTILELLM_FUZZ=ON -DTILELLM_BUILD_TESTS=OFF \
  -DTILELLM_WITH_OPENCL=OFF -DTILELLM_WITH_VULKAN=OFF -DTILELLM_WITH_CUDA=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_gguf fuzz_tokenizer
"$py" "$src/tests/fuzz/make_seeds.py" "$build/seeds/gguf" "$build/seeds/text"
status=0
for t in gguf tokenizer; do
  seeds=$build/seeds/$([ $t = gguf ] && echo gguf || echo text)
  corpus=$build/corpus/$t
  rm -rf "$corpus" && mkdir -p "$corpus"
  echo "run_fuzz: fuzz_$t for ${secs} s"
  (cd "$build" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "./fuzz_$t" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 "$corpus" "$seeds") || status=1
done
if [ $status -ne 0 ]; then
  echo "run_fuzz: a target failed (the input that did is in $build as crash-*, leak-*, timeout-* or oom-*)" >&2
  exit 1
fi
echo "run_fuzz: 0 crashes"
