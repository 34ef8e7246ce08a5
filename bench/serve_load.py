#!/usr/bin/env python3
"""Load test of `tilellm serve` on loopback: many concurrent clients, a bounded number of chat requests.

For each --parallel N given, a server is started (tests/tools/serve_harness.py), warmed up with one round of
requests, then --clients threads send --requests chat completions in all (each a short conversation with a
few words that differ per request, so prompts are not all cached). A 503 is the documented answer of a full
queue: the client waits Retry-After and sends the request again (counted apart). Reported per N: requests,
failures (anything but 200 and 503), 503s, p50/p99 latency of a request, generated tokens and the aggregate
tokens/s (all generated tokens over the wall time), and the server's RSS after warm-up and at the end.

With --peer LLAMA_SERVER the same load runs against llama-server (tests/reference/llama_cpp_env.sh
build-server) after each tilellm run, with the same model, slots (-np N), context per slot (-c N x CTX, which
llama-server divides among its slots), threads and client load, and the table gets its rows and the ratios.

Exit status 1 when a request failed (other than 503) or the RSS at the end exceeds the one after warm-up by
more than --rss-slack percent; so CI runs it small (tests/tools, CMakeLists.txt).

    bench/serve_load.py TILELLM_BINARY [--model M] [--parallel 1 4 8] [--clients 32] [--requests 300]
                        [--max-tokens 32] [--ctx 1024] [--max-queue 64] [--threads T] [--backend B]
                        [--peer LLAMA_SERVER [--peer-args '-ngl 99']] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
from serve_harness import ENV, Server  # noqa: E402

TOPICS = ["rivers", "bread", "stars", "trains", "music", "chess", "tea", "rain", "bees", "glass", "maps", "salt"]


class PeerServer(Server):
    """llama-server under the same load: a free port chosen here (it takes no port 0), ready once /health is 200."""

    def __init__(self, binary: str, model: str, n: int, ctx: int, threads: int, extra: list[str]):
        super().__init__(binary, model, [])
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        self.cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-np", str(n), "-c",
                    str(n * ctx), "--no-webui"] + (["-t", str(threads)] if threads else []) + extra
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
        self.reader = threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True)
        self.reader.start()
        deadline = time.time() + self.start_timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except Exception:
                time.sleep(0.2)
        self.proc.kill()
        raise RuntimeError(f"llama-server did not start: {' '.join(self.cmd)}")


def run_one(s: Server, i: int, max_tokens: int, stats: dict, lock: threading.Lock) -> None:
    body = {"messages": [{"role": "user", "content": f"Tell me about {TOPICS[i % len(TOPICS)]}, fact {i}."}],
            "max_tokens": max_tokens, "temperature": 0.7, "seed": i}
    t0 = time.time()
    while True:
        try:
            status, headers, raw = s.request("POST", "/v1/chat/completions", body, timeout=600)
        except Exception as e:  # a broken connection is a failure
            status, headers, raw = -1, {}, repr(e).encode()
        if status != 503:
            break
        with lock:
            stats["rejected"] += 1
        time.sleep(float(headers.get("Retry-After", "1")))
    dt = time.time() - t0
    with lock:
        if status == 200:
            stats["latencies"].append(dt)
            stats["tokens"] += json.loads(raw)["usage"]["completion_tokens"]
        else:
            stats["failures"].append(f"{status}: {raw[:200]!r}")


def run_round(s: Server, start: int, count: int, clients: int, max_tokens: int) -> dict:
    stats = {"latencies": [], "tokens": 0, "failures": [], "rejected": 0}
    lock = threading.Lock()
    next_i = [start]

    def client() -> None:
        while True:
            with lock:
                i = next_i[0]
                if i >= start + count:
                    return
                next_i[0] += 1
            run_one(s, i, max_tokens, stats, lock)

    t0 = time.time()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats["wall"] = time.time() - t0
    return stats


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--model", default=os.path.join(os.environ.get("TILELLM_MODELS_DIR", os.path.join(ROOT, "models")),
                                                    "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--parallel", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--max-queue", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="-t of the server (0: its default)")
    ap.add_argument("--backend", help="--backend of tilellm serve (default: its own, the CPU)")
    ap.add_argument("--rss-slack", type=float, default=5.0, help="percent the RSS may grow after warm-up")
    ap.add_argument("--peer", help="llama-server binary to run the same load against")
    ap.add_argument("--peer-args", default="", help="more arguments of llama-server, e.g. '-ngl 99' beside "
                    "--backend cuda")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()

    rows, ok = [], True
    print(f"{'server':>12} {'N':>3} {'requests':>8} {'failed':>6} {'503s':>5} {'p50 s':>7} {'p99 s':>7} "
          f"{'tokens':>7} {'tok/s':>7} {'RSS warm MiB':>12} {'RSS end MiB':>11}")
    for n in a.parallel:
        args = ["--parallel", str(n), "-c", str(a.ctx), "--max-queue", str(a.max_queue)]
        if a.threads:
            args += ["-t", str(a.threads)]
        if a.backend:
            args += ["--backend", a.backend]
        servers = [("tilellm", Server(a.binary, a.model, args))]
        if a.peer:
            servers.append(("llama-server", PeerServer(a.peer, a.model, n, a.ctx, a.threads, a.peer_args.split())))
        for name, server in servers:
            with server as s:
                warm = run_round(s, 0, a.clients, a.clients, a.max_tokens)
                rss_warm = s.rss_kib()
                st = run_round(s, a.clients, a.requests, a.clients, a.max_tokens)
                rss_end = s.rss_kib()
                rc = s.stop()
            failures = warm["failures"] + st["failures"]
            row = {"server": name, "parallel": n, "requests": a.requests, "failed": len(failures),
                   "rejected_503": st["rejected"], "p50_s": pct(st["latencies"], 50),
                   "p99_s": pct(st["latencies"], 99), "tokens": st["tokens"], "tokens_per_s": st["tokens"] / st["wall"],
                   "rss_warm_mib": rss_warm / 1024, "rss_end_mib": rss_end / 1024, "exit_status": rc}
            rows.append(row)
            print(f"{name:>12} {n:>3} {a.requests:>8} {len(failures):>6} {st['rejected']:>5} {row['p50_s']:>7.2f} "
                  f"{row['p99_s']:>7.2f} {st['tokens']:>7} {row['tokens_per_s']:>7.1f} {row['rss_warm_mib']:>12.1f} "
                  f"{row['rss_end_mib']:>11.1f}")
            for f in failures[:5]:
                print(f"    failed: {f}")
            if name != "tilellm":
                continue  # the peer's own failures are reported, not judged
            if failures or rc != 0:
                ok = False
            if rss_end > rss_warm * (1 + a.rss_slack / 100):
                print(f"    RSS grew by {100 * (rss_end / rss_warm - 1):.1f}% after warm-up (allowed {a.rss_slack}%)")
                ok = False
        if a.peer:
            t, p = rows[-2], rows[-1]
            print(f"{'ratio':>12} {n:>3}   tokens/s {t['tokens_per_s'] / p['tokens_per_s']:.2f}x llama-server's, "
                  f"p99 {t['p99_s'] / p['p99_s']:.2f}x, p50 {t['p50_s'] / p['p50_s']:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
