#!/usr/bin/env python3
"""The C API as a user meets it: `cmake --install` of the build into a temporary prefix; libtilellm.so there
with its versioned SONAME, exporting the tilellm_* functions and nothing else; examples/simple.c compiled as C
(cc -std=c99 -pedantic) with the flags pkg-config finds in the prefix's tilellm.pc; its greedy text on the
default model equal to `tilellm run --temp 0`'s, for two prompts.

    check_install.py BUILD_DIR SOURCE_DIR TILELLM_BINARY
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from cli_check import ROOT, Checks  # noqa: E402

MODELS = os.environ.get("TILELLM_MODELS_DIR", os.path.join(ROOT, "models"))
SMOL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPTS = ["The capital of France is", "Here is a short poem about the sea:\n"]


def main() -> int:
    build, source, binary = sys.argv[1:4]
    checks = Checks()
    check = checks.check
    cc = os.environ.get("CC", "cc")

    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        r = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True, text=True)
        check(r.returncode == 0, f"cmake --install into a temporary prefix: exit {r.returncode} {r.stderr[-300:]}")
        libdir = next((os.path.join(prefix, d) for d in ("lib", "lib64")
                       if os.path.exists(os.path.join(prefix, d, "pkgconfig", "tilellm.pc"))), None)
        check(libdir is not None, "the prefix holds lib/pkgconfig/tilellm.pc")
        if libdir is None:
            return checks.summary()
        check(os.path.exists(os.path.join(prefix, "include", "tilellm", "tilellm.h")), "... include/tilellm/tilellm.h")
        check(os.path.exists(os.path.join(prefix, "bin", "tilellm")), "... bin/tilellm")
        so = os.path.join(libdir, "libtilellm.so")
        check(os.path.islink(so) and os.path.exists(so), "... lib/libtilellm.so, a link to the versioned file")

        dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout
        m = re.search(r"\(SONAME\)\s+Library soname: \[(.+?)\]", dyn)
        check(m is not None and m.group(1) == "libtilellm.so.0", f"SONAME {m.group(1) if m else 'none'}")
        syms = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True).stdout.split("\n")
        names = [l.split()[-1] for l in syms if len(l.split()) >= 3 and l.split()[1] in "TtWwDdBbRrVv"]
        names = [n.split("@")[0] for n in names]
        exported = sorted(set(n for n in names if n and n != "TILELLM_0"))
        header_text = open(os.path.join(prefix, "include", "tilellm", "tilellm.h")).read()
        declared = sorted(set(re.findall(r"TILELLM_API\s[^;(]*?\b(tilellm_\w+)\s*\(", header_text)))
        check(len(declared) > 40 and exported == declared,
              f"it exports the {len(declared)} functions the header declares and nothing else "
              f"(not declared: {sorted(set(exported) - set(declared))[:5]}, missing: "
              f"{sorted(set(declared) - set(exported))[:5]})")

        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "tilellm"], capture_output=True, text=True,
                               env=env)
        check(flags.returncode == 0 and "-ltilellm" in flags.stdout, f"pkg-config --cflags --libs tilellm: {flags.stdout.strip()}")
        exe = os.path.join(tmp, "tilellm-simple")
        r = subprocess.run([cc, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror",
                            os.path.join(source, "examples", "simple.c"), *flags.stdout.split(), "-o", exe],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{cc} -std=c99 examples/simple.c: exit {r.returncode} {r.stderr[-400:]}")
        if r.returncode != 0:
            return checks.summary()
        run_env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, env=run_env).stdout
        check(os.path.realpath(libdir) in ldd or libdir in ldd, "the program loads the installed libtilellm.so.0")
        # The program written at the top of the header, compiled and run as it stands.
        header = open(os.path.join(prefix, "include", "tilellm", "tilellm.h")).read()
        body = header[header.index(" *   #include <stdio.h>"):header.index(" * Build it against")]
        example = "\n".join(l[5:] for l in body.splitlines()).replace("models/SmolLM2-135M-Instruct.Q4_1.gguf", SMOL)
        src = os.path.join(tmp, "header_example.c")
        with open(src, "w") as f:
            f.write(example)
        hexe = os.path.join(tmp, "header-example")
        r = subprocess.run([cc, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", src, *flags.stdout.split(),
                            "-o", hexe], capture_output=True, text=True)
        check(r.returncode == 0, f"the header's example compiles as C99: exit {r.returncode} {r.stderr[-400:]}")
        if r.returncode == 0:
            c = subprocess.run([hexe], capture_output=True, text=True, env=run_env, timeout=300)
            t = subprocess.run([binary, "run", "-m", SMOL, "-p", "The capital of France is", "-n", "32", "-c", "512",
                                "--temp", "0"], capture_output=True, text=True, timeout=300)
            check(c.returncode == 0 and c.stdout == t.stdout, f"... and prints `tilellm run`'s text: {c.stdout!r}")
        for prompt in PROMPTS:
            c = subprocess.run([exe, SMOL, prompt, "48", "2"], capture_output=True, text=True, env=run_env, timeout=300)
            t = subprocess.run([binary, "run", "-m", SMOL, "-p", prompt, "-n", "48", "-t", "2", "--temp", "0"],
                               capture_output=True, text=True, timeout=300)
            check(c.returncode == 0 and t.returncode == 0 and c.stdout == t.stdout and len(c.stdout) > len(prompt) + 20,
                  f"the C program prints `tilellm run --temp 0`'s text for {prompt!r}: {c.stdout[len(prompt):][:60]!r}")
            if c.stdout != t.stdout:
                print("   C program:", repr(c.stdout), c.stderr[-300:])
                print("   tilellm:  ", repr(t.stdout))
        shutil.rmtree(prefix, ignore_errors=True)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
