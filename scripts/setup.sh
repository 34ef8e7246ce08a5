#!/usr/bin/env bash
# Installs what building and testing TileLLM needs on a fresh Debian 12 machine: the compiler toolchain and -dev
# packages (apt; chromium opens monitor's HTML report headless in its test, and with chromium-driver drives
# serve's chat page), the Python packages the reference scripts and serve's tests use (pip: openai is the
# official client the server is tested with, selenium drives the browser). Safe to run again: it installs only
# what is missing. Run as root, or with sudo available.
set -euo pipefail

APT_PACKAGES=(build-essential cmake pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev
              libxxhash-dev libedit-dev libcpp-httplib-dev
              python3 python3-pip unzip pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers clinfo
              libvulkan-dev mesa-vulkan-drivers glslc
              g++-aarch64-linux-gnu qemu-user
              chromium chromium-driver
              clang libclang-rt-14-dev)  # libFuzzer and the sanitizers' runtimes (tests/fuzz)
PIP_PACKAGES=(numpy gguf jinja2 openai selenium)

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if ! "$PY" -c "import numpy, gguf, jinja2, openai, selenium" 2>/dev/null; then
  echo "setup: installing Python packages ${PIP_PACKAGES[*]}"
  "$PY" -m pip install -q "${PIP_PACKAGES[@]}" 2>/dev/null ||
    "$PY" -m pip install -q --break-system-packages "${PIP_PACKAGES[@]}"
fi
