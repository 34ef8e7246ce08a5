#!/usr/bin/env bash
# The main job on a fresh machine: install what is needed, fetch the default model, build, and generate text.
#   scripts/run.sh "Your prompt"            (further arguments go to `tilellm run`, e.g. -n 64 --temp 0)
set -euo pipefail
cd "$(dirname "$0")/.."
prompt=${1:-"Once upon a time"}
shift || true
scripts/setup.sh
scripts/fetch_models.sh --default-only
scripts/build.sh tilellm
exec build/tilellm run -p "$prompt" "$@"
