# The CUDA backend (src/backends/cuda): built into tilellm_core when CMake finds a CUDA compiler (nvcc on the
# PATH, or /usr/local/cuda/bin/nvcc) and TILELLM_WITH_CUDA is on; else the engine builds without it (the
# registry then says so).
# The CUDA runtime is linked statically (CUDA::cudart_static), and the runtime opens the driver
# (libcuda.so.1) only when the backend first asks for a device, so the binary starts and runs the CPU path on
# a machine without an NVIDIA driver or GPU (src/backends/cuda/device.h says how that is reported).
#
# Kernels (src/backends/cuda/kernels/*.cu) are compiled for Hopper (sm_90 machine code) and as compute_80
# PTX, which the driver compiles at first start on any later GPU (Ampere, Ada, Orin, Blackwell): the kernels
# use cp.async and int8 mma.sync, which need compute capability 8.0. TILELLM_CUDA_ARCHITECTURES overrides
# the list (CMake's CUDA_ARCHITECTURES syntax). Sets TILELLM_CUDA.
option(TILELLM_WITH_CUDA "Build the CUDA backend when a CUDA compiler is found" ON)
if(NOT TILELLM_WITH_CUDA)
  message(STATUS "TILELLM_WITH_CUDA is off: building without the CUDA backend")
  set(TILELLM_CUDA OFF)
  return()
endif()
if(CMAKE_CROSSCOMPILING)
  message(STATUS "Cross build: without the CUDA backend")
  set(TILELLM_CUDA OFF)
  return()
endif()
include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "No CUDA compiler found: building without the CUDA backend")
  set(TILELLM_CUDA OFF)
  return()
endif()
set(TILELLM_CUDA_ARCHITECTURES "90-real;80-virtual" CACHE STRING "CUDA architectures of the CUDA backend")
set(CMAKE_CUDA_ARCHITECTURES ${TILELLM_CUDA_ARCHITECTURES})
enable_language(CUDA)
# C++20 (as the rest of the engine: the targets' C++ standard reaches CUDA too), whose flag CMake 3.25 does
# not know for nvcc 13.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
find_package(CUDAToolkit REQUIRED)
message(STATUS "CUDA compiler found (${CMAKE_CUDA_COMPILER}, ${CMAKE_CUDA_COMPILER_VERSION}): building the "
               "CUDA backend for ${TILELLM_CUDA_ARCHITECTURES}")
set(TILELLM_CUDA ON)

file(GLOB TILELLM_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backends/cuda/*.cpp)
file(GLOB TILELLM_CUDA_KERNELS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backends/cuda/kernels/*.cu)
target_sources(tilellm_core PRIVATE ${TILELLM_CUDA_SOURCES} ${TILELLM_CUDA_KERNELS})
set_source_files_properties(${TILELLM_CUDA_KERNELS} PROPERTIES LANGUAGE CUDA)
# The target exists before this file runs, so its properties are set here, not from CMAKE_CUDA_*.
set_property(TARGET tilellm_core PROPERTY CUDA_ARCHITECTURES ${TILELLM_CUDA_ARCHITECTURES})
set_property(TARGET tilellm_core PROPERTY CUDA_STANDARD 20)
# The kernels see only their own headers (kernels/kernels.h, kernels/*.cuh) and the CUDA runtime; -Wall and
# -Wextra reach the host compiler through -Xcompiler (the project's add_compile_options are C/C++ ones).
target_compile_options(tilellm_core PRIVATE
                       $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra -lineinfo>)
target_include_directories(tilellm_core PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(tilellm_core PUBLIC CUDA::cudart_static ${CMAKE_DL_LIBS})
