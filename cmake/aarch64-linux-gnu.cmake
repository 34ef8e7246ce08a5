# Toolchain file: cross-compiles TileLLM for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu, and runs
# the resulting programs (tests, gtest discovery) under qemu-user. Used by scripts/test_arm64.sh:
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# The target is baseline ARMv8-A (Advanced SIMD is part of it); newer instructions such as the ARMv8.2 dot
# product are enabled per function and picked at run time, as the x86 kernels are.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(TILELLM_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${TILELLM_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${TILELLM_CROSS_TRIPLE}-g++)

# Libraries and headers come from the cross sysroot only, so that nothing built for the host links in. The
# header-only dependencies are taken from the host's /usr/include explicitly (cmake/cross_deps.cmake).
set(CMAKE_FIND_ROOT_PATH /usr/${TILELLM_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# -L: where qemu finds the ARM dynamic loader and libc. The CPU model (QEMU_CPU) is left to the environment.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-${CMAKE_SYSTEM_PROCESSOR} -L /usr/${TILELLM_CROSS_TRIPLE})
