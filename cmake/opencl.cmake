# The OpenCL backend (src/backends/opencl): built into tilellm_core when the OpenCL headers (CL/cl.h) are
# found (and TILELLM_WITH_OPENCL is on); else the engine builds without it (the registry then says so). The
# backend does not link libOpenCL: it loads the ICD loader at run time (src/backends/opencl/loader.h), so the
# binary starts and runs the CPU path on a machine without OpenCL. Its kernels
# (src/backends/opencl/kernels/*.cl) are embedded into the binary as string literals at build time. Sets
# TILELLM_OPENCL (ON when the backend is built).
option(TILELLM_WITH_OPENCL "Build the OpenCL backend when its headers are found" ON)
if(NOT TILELLM_WITH_OPENCL)
  message(STATUS "TILELLM_WITH_OPENCL is off: building without the OpenCL backend")
  set(TILELLM_OPENCL OFF)
  return()
endif()
find_path(TILELLM_OPENCL_INCLUDE_DIR CL/cl.h)
if(NOT TILELLM_OPENCL_INCLUDE_DIR)
  message(STATUS "OpenCL headers (CL/cl.h) not found: building without the OpenCL backend")
  set(TILELLM_OPENCL OFF)
  return()
endif()
message(STATUS "OpenCL headers found (${TILELLM_OPENCL_INCLUDE_DIR}): building the OpenCL backend")
set(TILELLM_OPENCL ON)

file(GLOB TILELLM_OPENCL_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backends/opencl/*.cpp)
file(GLOB TILELLM_OPENCL_KERNELS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backends/opencl/kernels/*.cl)
# "|"-joined: a ";" list would be split into separate command arguments.
string(REPLACE ";" "|" TILELLM_OPENCL_KERNEL_LIST "${TILELLM_OPENCL_KERNELS}")
set(TILELLM_OPENCL_EMBEDDED ${CMAKE_BINARY_DIR}/generated/opencl_kernels.cpp)
add_custom_command(
  OUTPUT ${TILELLM_OPENCL_EMBEDDED}
  COMMAND ${CMAKE_COMMAND} "-DOUT=${TILELLM_OPENCL_EMBEDDED}" "-DKERNELS=${TILELLM_OPENCL_KERNEL_LIST}"
          -P ${CMAKE_SOURCE_DIR}/cmake/embed_opencl_kernels.cmake
  DEPENDS ${TILELLM_OPENCL_KERNELS} ${CMAKE_SOURCE_DIR}/cmake/embed_opencl_kernels.cmake
  COMMENT "Embedding OpenCL kernels"
  VERBATIM)
target_sources(tilellm_core PRIVATE ${TILELLM_OPENCL_SOURCES} ${TILELLM_OPENCL_EMBEDDED})
target_include_directories(tilellm_core PUBLIC ${TILELLM_OPENCL_INCLUDE_DIR})
# 3.0 headers, so the 3.0 capability queries compile; the code calls only OpenCL 1.2 entry points (hence the
# deprecated-1.2 switch: clCreateCommandQueue is the one a 1.2 device has) and treats a
# query the device does not know as "absent", so it runs on 1.2 devices.
target_compile_definitions(tilellm_core PUBLIC CL_TARGET_OPENCL_VERSION=300 CL_USE_DEPRECATED_OPENCL_1_2_APIS)
target_link_libraries(tilellm_core PUBLIC ${CMAKE_DL_LIBS})
