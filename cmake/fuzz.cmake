# The libFuzzer targets (tests/fuzz: fuzz_gguf, fuzz_tokenizer), made when TILELLM_FUZZ is on: a clang build
# of their own (tests/fuzz/run_fuzz.sh gives the sanitizers in CMAKE_CXX_FLAGS). They link only the layers
# they reach — base, format, tokenizer and the model's configuration and binding — compiled with the fuzzer's
# coverage instrumentation (fuzzer-no-link); the targets add libFuzzer's main.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TILELLM_FUZZ needs clang (libFuzzer): configure with CMAKE_CXX_COMPILER=clang++")
endif()
file(GLOB TILELLM_FUZZ_ENGINE CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/base/*.cpp
     ${CMAKE_SOURCE_DIR}/src/format/*.cpp ${CMAKE_SOURCE_DIR}/src/tokenizer/*.cpp)
add_library(tilellm_fuzz_engine STATIC ${TILELLM_FUZZ_ENGINE} ${CMAKE_SOURCE_DIR}/src/model/config.cpp
                                       ${CMAKE_SOURCE_DIR}/src/model/weights.cpp)
target_include_directories(tilellm_fuzz_engine PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(tilellm_fuzz_engine PUBLIC Threads::Threads fmt::fmt)
target_compile_options(tilellm_fuzz_engine PUBLIC -fsanitize=fuzzer-no-link)
foreach(target fuzz_gguf fuzz_tokenizer)
  add_executable(${target} ${CMAKE_SOURCE_DIR}/tests/fuzz/${target}.cpp)
  target_link_libraries(${target} PRIVATE tilellm_fuzz_engine)
  target_compile_definitions(${target} PRIVATE TILELLM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  target_link_options(${target} PRIVATE -fsanitize=fuzzer)
endforeach()
