"""What the CLI checks in tests/tools share: a tally of named checks and a random tiny model
(tests/reference/make_tiny_model.py)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Checks:
    """check(cond, what) prints one line per check; summary() prints the CTest-style line and the exit code."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, cond: bool, what: str) -> None:
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            self.failures.append(what)

    def summary(self) -> int:
        print(f"{0 if self.failures else 1} passed, {1 if self.failures else 0} failed")
        return 1 if self.failures else 0


def tiny_model(path: str, arch: str = "llama", wtype: str = "q8_0", seed: int = 3) -> str:
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "reference", "make_tiny_model.py"), path,
                    "--arch", arch, "--type", wtype, "--seed", str(seed)], check=True)
    return path
