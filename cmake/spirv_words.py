#!/usr/bin/env python3
"""Writes a SPIR-V module as the text of a C uint32_t array body (what glslc -mfmt=num writes), so that
cmake/embed_spirv.cmake can include it. Usage: spirv_words.py IN.spv OUT.inc"""
import struct
import sys


def main() -> None:
    data = open(sys.argv[1], "rb").read()
    if len(data) % 4 != 0 or len(data) < 20 or struct.unpack_from("<I", data)[0] != 0x07230203:
        sys.exit(f"{sys.argv[1]}: not a little-endian SPIR-V module")
    words = struct.unpack(f"<{len(data) // 4}I", data)
    lines = (", ".join(f"0x{w:08x}u" for w in words[i : i + 8]) for i in range(0, len(words), 8))
    with open(sys.argv[2], "w") as f:
        f.write(",\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
