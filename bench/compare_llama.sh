#!/usr/bin/env bash
# Same-run speed comparison with llama.cpp: llama-bench and `tilellm bench` on the same model files, with the same
# threads and tests, one model after the other (llama.cpp first, then TileLLM, so that both see the same machine
# state), plus the machine's memory bandwidth and the decode roofline. Prints ratios ours / llama.cpp.
#
#   bench/compare_llama.sh [-t 2] [-p 128] [-n 64] [-r 5] [--pg 512,128] [-b 64] [--activations q8] MODEL.gguf...
#   bench/compare_llama.sh --report DIR      # print the table again from the raw results of an earlier run
#
# llama.cpp is the llama-cpp-python 0.3.36 vendored tree (tests/reference/llama_cpp_env.sh), built into
# ~/.cache/tilellm when absent. TileLLM is $TILELLM_BIN, or the first of build/, build-bench/ that holds tilellm.
# Raw JSON of both tools is kept in $OUT_DIR (default: a fresh temporary folder, printed at the end).
#
# The roofline of a tg test is read bandwidth / weight bytes one decode step reads (tilellm's
# weight_bytes_per_token): a decode step cannot be faster than streaming its weights once from memory. With small
# models a large part of the weights may sit in the last-level cache, so the roofline is a guide, not a bound.
# The bandwidth buffer is MEMBW_MIB (default 256) MiB: make it larger than the last-level cache to measure DRAM.
# Besides llama-bench's mean ± stddev, the table gives the ratio of the medians and of the best runs: on a shared
# machine a run that lost its CPU to another process is slow for reasons of neither engine, and the best run is
# the one least disturbed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
threads=2 prompt=128 gen=64 reps=5 pg="" batch=64 activations=q8
models=()
report=""
while [ $# -gt 0 ]; do
    case "$1" in
        -t) threads="$2"; shift 2 ;;
        -p) prompt="$2"; shift 2 ;;
        -n) gen="$2"; shift 2 ;;
        -r) reps="$2"; shift 2 ;;
        --pg|-pg) pg="$2"; shift 2 ;;
        -b) batch="$2"; shift 2 ;;
        --activations) activations="$2"; shift 2 ;;
        --report) report="$2"; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        -*) echo "error: unknown option $1" >&2; exit 2 ;;
        *) models+=("$1"); shift ;;
    esac
done
print_report() {
python3 - "$1" <<'EOF'
import json, os, statistics, sys

out = sys.argv[1]
def rows(name):
    with open(os.path.join(out, name)) as f:
        return [json.loads(l) for l in f if l.strip()]

llama, ours = rows("llama.jsonl"), rows("tilellm.jsonl")
bw = {r["n_threads"]: r for r in json.load(open(os.path.join(out, "membw.json")))}

def key(r):
    return (os.path.basename(r["model_filename"]), r["n_threads"], r["n_prompt"], r["n_gen"], r.get("n_depth", 0))

def test(r):
    p, g = r["n_prompt"], r["n_gen"]
    return f"pp{p}" if g == 0 else f"tg{g}" if p == 0 else f"pp{p}+tg{g}"

ref = {key(r): r for r in llama}
commit = ours[0]["commit"] if ours else "unknown"
print(f"tilellm {commit} vs llama.cpp {llama[0]['build_commit'] if llama else '?'}; "
      f"CPU: {ours[0]['cpu_info'] if ours else '?'}; cpu_set {ours[0]['cpu_set'] if ours else '?'}")
for t, b in sorted(bw.items()):
    print(f"memory bandwidth, {t} threads, {b['buffer_bytes'] >> 20} MiB: "
          f"memcpy {b['membw_copy_gbs']:.2f} GB/s (read+write), read {b['membw_read_gbs']:.2f} GB/s")
print()
print("| model | threads | test | llama.cpp t/s (mean ± sd) | tilellm t/s (mean ± sd) | ratio of means "
      "| ratio of medians | ratio of best runs | tg roofline t/s | tilellm best % of roofline |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

def ratio(a, b):
    return f"{a / b:.2f}" if b > 0 else "n/a"

for r in ours:
    l = ref.get(key(r))
    ts = r["samples_ts"]
    lt = rm = rmed = rbest = "n/a"
    if l:
        lts = l["samples_ts"]
        lt = f"{l['avg_ts']:.2f} ± {l['stddev_ts']:.2f}"
        rm = ratio(r["avg_ts"], l["avg_ts"])
        rmed = ratio(statistics.median(ts), statistics.median(lts))
        rbest = ratio(max(ts), max(lts))
    roof = pct = ""
    if r["n_prompt"] == 0 and r["n_threads"] in bw and r.get("weight_bytes_per_token"):
        rt = bw[r["n_threads"]]["membw_read_gbs"] * 1e9 / r["weight_bytes_per_token"]
        roof, pct = f"{rt:.1f}", f"{100 * max(ts) / rt:.0f}%"
    print(f"| {key(r)[0]} | {r['n_threads']} | {test(r)} | {lt} | {r['avg_ts']:.2f} ± {r['stddev_ts']:.2f} "
          f"| {rm} | {rmed} | {rbest} | {roof} | {pct} |")
EOF
}

if [ -n "$report" ]; then
    print_report "$report"
    exit 0
fi
[ ${#models[@]} -gt 0 ] || { echo "error: no model files given (see --help)" >&2; exit 2; }
for m in "${models[@]}"; do [ -f "$m" ] || { echo "error: $m: no such model file" >&2; exit 2; }; done

# shellcheck source=/dev/null
source "$here/tests/reference/llama_cpp_env.sh"
# Builds llama.cpp, or configures and builds it again when the build is not the one the script describes.
"$here/tests/reference/llama_cpp_env.sh" build
tilellm="${TILELLM_BIN:-}"
if [ -z "$tilellm" ]; then
    for d in build build-bench; do
        if [ -x "$here/$d/tilellm" ]; then tilellm="$here/$d/tilellm"; break; fi
    done
fi
if [ -z "$tilellm" ] || [ ! -x "$tilellm" ]; then
    echo "error: no tilellm binary; build it or set TILELLM_BIN" >&2
    exit 2
fi

out="${OUT_DIR:-$(mktemp -d /tmp/tilellm-compare.XXXXXX)}"
mkdir -p "$out"
pg_args=()
[ -n "$pg" ] && pg_args=(-pg "$pg")

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs available;" \
    "load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$tilellm" bench --membw --membw-mib "${MEMBW_MIB:-256}" -t "$threads" -r 5 -o json >"$out/membw.json"

: >"$out/llama.jsonl"
: >"$out/tilellm.jsonl"
for m in "${models[@]}"; do
    echo "llama-bench: $m" >&2
    LD_LIBRARY_PATH="$LLAMA_CPP_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$LLAMA_CPP_BIN/llama-bench" \
        -m "$m" -t "$threads" -p "$prompt" -n "$gen" "${pg_args[@]}" -r "$reps" -o jsonl >>"$out/llama.jsonl"
    echo "tilellm bench: $m" >&2
    "$tilellm" bench -m "$m" -t "$threads" -p "$prompt" -n "$gen" "${pg_args[@]}" -r "$reps" -b "$batch" \
        --activations "$activations" -o jsonl >>"$out/tilellm.jsonl"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

print_report "$out"
echo "raw results: $out (llama.jsonl, tilellm.jsonl, membw.json)" >&2
