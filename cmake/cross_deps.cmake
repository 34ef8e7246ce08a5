# Dependencies of a cross build (included by CMakeLists.txt when CMAKE_CROSSCOMPILING).
#
# The host's Debian packages ship fmt, nlohmann-json and CLI11 headers that do not depend on the target
# architecture, and GoogleTest's sources (libgtest-dev, /usr/src/googletest); their compiled libraries are
# for the host only. So a cross build uses the three as header-only libraries (fmt with FMT_HEADER_ONLY) and
# compiles GoogleTest itself, instead of installing foreign-architecture packages.
#
# The headers are exposed through a directory of links to exactly these three folders (and xxhash.h):
# putting the host's /usr/include itself on the include path would let host C library headers shadow the
# target's.
set(TILELLM_HOST_INCLUDE_DIR /usr/include CACHE PATH "Host headers of fmt, nlohmann-json and CLI11")
set(TILELLM_HOST_GTEST_SOURCE_DIR /usr/src/googletest CACHE PATH "GoogleTest sources (Debian libgtest-dev)")

set(_tilellm_dep_headers ${CMAKE_BINARY_DIR}/host-headers)
file(MAKE_DIRECTORY ${_tilellm_dep_headers})
foreach(dir fmt nlohmann CLI)
  if(NOT EXISTS ${TILELLM_HOST_INCLUDE_DIR}/${dir})
    message(FATAL_ERROR "cross build: ${TILELLM_HOST_INCLUDE_DIR}/${dir} not found (install libfmt-dev, "
                        "nlohmann-json3-dev and libcli11-dev)")
  endif()
  file(CREATE_LINK ${TILELLM_HOST_INCLUDE_DIR}/${dir} ${_tilellm_dep_headers}/${dir} SYMBOLIC)
endforeach()
# xxHash, used header-only (XXH_INLINE_ALL) by the session files (runtime/session_state.cpp).
if(NOT EXISTS ${TILELLM_HOST_INCLUDE_DIR}/xxhash.h)
  message(FATAL_ERROR "cross build: ${TILELLM_HOST_INCLUDE_DIR}/xxhash.h not found (install libxxhash-dev)")
endif()
file(CREATE_LINK ${TILELLM_HOST_INCLUDE_DIR}/xxhash.h ${_tilellm_dep_headers}/xxhash.h SYMBOLIC)

add_library(tilellm_fmt INTERFACE)
target_include_directories(tilellm_fmt SYSTEM INTERFACE ${_tilellm_dep_headers})
target_compile_definitions(tilellm_fmt INTERFACE FMT_HEADER_ONLY=1)
add_library(fmt::fmt ALIAS tilellm_fmt)

add_library(tilellm_json INTERFACE)
target_include_directories(tilellm_json SYSTEM INTERFACE ${_tilellm_dep_headers})
add_library(nlohmann_json::nlohmann_json ALIAS tilellm_json)

add_library(tilellm_cli11 INTERFACE)
target_include_directories(tilellm_cli11 SYSTEM INTERFACE ${_tilellm_dep_headers})
add_library(CLI11::CLI11 ALIAS tilellm_cli11)

if(TILELLM_BUILD_TESTS)
  if(NOT EXISTS ${TILELLM_HOST_GTEST_SOURCE_DIR}/CMakeLists.txt)
    message(FATAL_ERROR "cross build: GoogleTest sources not found in ${TILELLM_HOST_GTEST_SOURCE_DIR} "
                        "(install libgtest-dev)")
  endif()
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory(${TILELLM_HOST_GTEST_SOURCE_DIR} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  # GCC 12 reports a false -Wrestrict inside libstdc++'s string concatenation as inlined into gtest.cc (GCC
  # bug 105329); the warning is about the compiler, not this code, and would hide real ones.
  target_compile_options(gtest PRIVATE -Wno-restrict)
  if(NOT TARGET GTest::gtest)  # GoogleTest 1.11 and later define these aliases themselves
    add_library(GTest::gtest ALIAS gtest)
    add_library(GTest::gtest_main ALIAS gtest_main)
  endif()
endif()
