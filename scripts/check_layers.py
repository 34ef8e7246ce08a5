#!/usr/bin/env python3
"""Fails when an #include points up a layer, or across from one backend into another.

The layers, lowest first (a file may include its own layer's headers and any lower layer's):

    base      src/base/        errors, aligned memory, thread pool, CPU features and CPU sets, fp16
    format    src/format/      GGUF reader, block formats and the conversions every backend shares
    backends  src/backends/    the op interface, the registry and the types they need (weights, KV cache)
              src/backends/X/  one backend: may include the interface and its own folder, no other backend
    tokenizer src/tokenizer/   beside the backends: base and format only
    model     src/model/       the layer loop, written against the op interface
    runtime   src/runtime/     session, sampler, benchmarks
    tools     tools/           the CLI: knows backends only through the registry (never a backend's folder)
    api       src/api/         the C API (include/tilellm/tilellm.h), beside tools: neither includes the other

Includes are the project's quoted ones ("dir/file.h"); system and library headers are not checked. A source
file under src/ in a folder that is not listed here is an error too, so a new folder gets a place in the
order. Run from anywhere:

    scripts/check_layers.py [REPO_ROOT]
"""

from __future__ import annotations

import os
import re
import sys

RANK = {"base": 0, "format": 1, "backends": 2, "tokenizer": 2, "model": 3, "runtime": 4, "tools": 5, "api": 5}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".h", ".hpp", ".cpp", ".cc", ".inc", ".cu", ".cuh")


def place(path: str) -> tuple[str, str | None] | None:
    """(layer, backend folder or None) of a repository path, or None when it is in no layer."""
    parts = path.split("/")
    if parts[0] == "tools":
        return "tools", None
    if parts[0] != "src" or len(parts) < 3:
        return None
    layer = parts[1]
    if layer not in RANK:
        return None
    backend = parts[2] if layer == "backends" and len(parts) > 3 else None
    return layer, backend


def resolve(root: str, includer: str, inc: str) -> str | None:
    """The repository path an include names: relative to src/, or to the includer's folder (tools/)."""
    for base in ("src", os.path.dirname(includer)):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def allowed(src: tuple[str, str | None], dst: tuple[str, str | None]) -> str | None:
    """None when src may include dst, else why not."""
    (sl, sb), (dl, db) = src, dst
    if dl == "tools" and sl != "tools":
        return "points up into tools/"
    if db is not None and sl != "backends":
        return f"names the {db} backend's own headers (only the registry may know a backend)"
    if db is not None and sb != db:
        return f"crosses from {'the interface' if sb is None else 'backend ' + sb} into backend {db}"
    if sl == dl:
        return None
    if RANK[dl] >= RANK[sl]:
        return f"points {'across' if RANK[dl] == RANK[sl] else 'up'} from {sl} to {dl}"
    return None


def main() -> int:
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    errors, files = [], 0
    for top in ("src", "tools"):
        for d, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(d, name), root)
                src = place(path)
                if src is None:
                    errors.append(f"{path}: in no layer (scripts/check_layers.py lists them)")
                    continue
                files += 1
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = resolve(root, path, m.group(1))
                        if target is None:
                            continue  # a generated header (build_commit.h, opencl_kernels) or a library's
                        dst = place(target)
                        if dst is None:
                            errors.append(f"{path}:{lineno}: includes {target}, which is in no layer")
                            continue
                        why = allowed(src, dst)
                        if why:
                            errors.append(f"{path}:{lineno}: #include \"{m.group(1)}\" {why}")
    for e in errors:
        print(e)
    print(f"check_layers: {files} files, {len(errors)} include(s) against the layer order")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
