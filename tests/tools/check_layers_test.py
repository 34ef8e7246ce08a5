#!/usr/bin/env python3
"""scripts/check_layers.py on small made-up trees: every kind of include against the layer order fails it,
and the includes the order allows pass.

    check_layers_test.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check_layers.py")

ALLOWED = {
    "src/base/a.h": "",
    "src/format/f.h": '#include "base/a.h"\n',
    "src/backends/backend.h": '#include "format/f.h"\n#include "base/a.h"\n',
    "src/backends/cpu/cpu.h": '#include "backends/backend.h"\n#include "backends/cpu/k.h"\n',
    "src/backends/cpu/k.h": "",
    "src/backends/gpu/g.cpp": '#include "backends/backend.h"\n#include <CL/cl.h>\n',
    "src/tokenizer/t.h": '#include "format/f.h"\n',
    "src/model/m.h": '#include "backends/backend.h"\n#include "tokenizer/t.h"\n',
    "src/runtime/r.h": '#include "model/m.h"\n#include "backends/backend.h"\n',
    "tools/main.cpp": '#include "runtime/r.h"\n#include "backends/backend.h"\n#include "local.h"\n',
    "tools/local.h": "",
    "src/api/c.cpp": '#include "api/c.h"\n#include "runtime/r.h"\n#include "backends/backend.h"\n',
    "src/api/c.h": "",
}

# (file, its text, what the failure line must say)
VIOLATIONS = [
    ("src/base/bad.h", '#include "format/f.h"\n', "points up from base to format"),
    ("src/backends/iface.h", '#include "model/m.h"\n', "points up from backends to model"),
    ("src/backends/gpu/x.h", '#include "backends/cpu/k.h"\n', "crosses from backend gpu into backend cpu"),
    ("src/runtime/s.cpp", '#include "backends/cpu/cpu.h"\n', "names the cpu backend's own headers"),
    ("tools/cmd.cpp", '#include "backends/gpu/g.cpp"\n', "names the gpu backend's own headers"),
    ("src/tokenizer/u.h", '#include "backends/backend.h"\n', "points across from tokenizer to backends"),
    ("src/model/bad.h", '#include "runtime/r.h"\n', "points up from model to runtime"),
    ("src/extra/x.cpp", "", "in no layer"),
    ("tools/api_user.cpp", '#include "api/c.h"\n', "points across from tools to api"),
    ("src/api/d.cpp", '#include "backends/cpu/cpu.h"\n', "names the cpu backend's own headers"),
    ("src/runtime/t.cpp", '#include "api/c.h"\n', "points up from runtime to api"),
]


def check(files: dict[str, str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as d:
        for path, text in files.items():
            os.makedirs(os.path.join(d, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(d, path), "w") as f:
                f.write(text)
        return subprocess.run([sys.executable, SCRIPT, d], capture_output=True, text=True)


def main() -> int:
    fails = []
    r = check(ALLOWED)
    if r.returncode != 0:
        fails.append(f"the allowed tree fails:\n{r.stdout}")
    for path, text, why in VIOLATIONS:
        r = check({**ALLOWED, path: text})
        if r.returncode == 0 or why not in r.stdout or path not in r.stdout:
            fails.append(f"{path} with {text.strip()!r}: want a failure saying {why!r}, got ({r.returncode}):\n{r.stdout}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
