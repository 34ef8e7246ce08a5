"""Starts `tilellm serve` on a free port for a test and stops it: shared by the serve checks and bench/serve_load.py.

    with Server(binary, model, ["--parallel", "2"]) as s:
        s.url            # http://127.0.0.1:PORT
        s.get("/metrics")

The server is asked for port 0 and its "listening on http://HOST:PORT" line read from stderr, so parallel tests
never race for a port. stop() sends SIGTERM and returns the exit status; the stderr text is kept in s.log.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

# The GPU loaders hidden, as for every CPU check (CMakeLists.txt).
ENV = dict(os.environ, TILELLM_OPENCL_LIBRARY="/nonexistent/libOpenCL.so.1",
           TILELLM_VULKAN_LIBRARY="/nonexistent/libvulkan.so.1")


class Server:
    def __init__(self, binary: str, model: str, args: list[str], start_timeout: float = 120.0):
        self.cmd = [binary, "serve", "-m", model, "--port", "0"] + args
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.log = ""
        self.url = ""
        self.key = ""
        if "--api-key" in args:
            self.key = args[args.index("--api-key") + 1]

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=ENV)
        found = threading.Event()

        def read() -> None:
            for line in self.proc.stderr:
                self.log += line
                m = re.search(r"listening on (http://\S+)", line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
            found.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not found.wait(self.start_timeout) or not self.url:
            self.proc.kill()
            raise RuntimeError(f"the server did not start: {' '.join(self.cmd)}\n{self.log}")

    def stop(self, timeout: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self.reader.join(5)
        return rc

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def request(self, method: str, path: str, body=None, headers: dict | None = None, raw: bytes | None = None,
                timeout: float = 120.0) -> tuple[int, dict, bytes]:
        """(status, headers, body) of one request; an HTTP error status is returned, not raised."""
        h = {"Content-Type": "application/json"}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def get(self, path: str) -> bytes:
        status, _, body = self.request("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {body[:200]!r}")
        return body

    def metric(self, name: str) -> float:
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith(f"tilellm_{name} "):
                return float(line.split()[1])
        raise KeyError(name)

    def wait_metric(self, name: str, want: float, timeout: float = 10.0) -> float:
        deadline = time.time() + timeout
        v = self.metric(name)
        while v != want and time.time() < deadline:
            time.sleep(0.02)
            v = self.metric(name)
        return v
