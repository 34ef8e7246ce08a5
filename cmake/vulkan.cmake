# The Vulkan backend (src/backends/vulkan): built into tilellm_core when the Vulkan headers (vulkan/vulkan.h)
# and glslc are found (and TILELLM_WITH_VULKAN is on); else the engine builds without it (the registry then
# says so). The backend does not link libvulkan: it loads the loader at run time
# (src/backends/vulkan/loader.h), so the binary starts and runs the CPU path on a machine without Vulkan. Each
# shader (src/backends/vulkan/shaders/*.comp) is compiled to SPIR-V 1.3 (Vulkan 1.1) by glslc, twice when it
# has a subgroup path (TL_SUBGROUPS 0 and 1), again for the weight readers' and the KV shaders' image
# variants (TL_IMAGE, TL_KV_IMAGE), and embedded as word arrays (glslc -mfmt=num). Sets
# TILELLM_VULKAN.
option(TILELLM_WITH_VULKAN "Build the Vulkan backend when its headers and glslc are found" ON)
if(NOT TILELLM_WITH_VULKAN)
  message(STATUS "TILELLM_WITH_VULKAN is off: building without the Vulkan backend")
  set(TILELLM_VULKAN OFF)
  return()
endif()
find_path(TILELLM_VULKAN_INCLUDE_DIR vulkan/vulkan.h)
find_program(TILELLM_GLSLC glslc)
if(NOT TILELLM_VULKAN_INCLUDE_DIR OR NOT TILELLM_GLSLC)
  message(STATUS "Vulkan headers or glslc not found: building without the Vulkan backend")
  set(TILELLM_VULKAN OFF)
  return()
endif()
message(STATUS "Vulkan headers and glslc found (${TILELLM_GLSLC}): building the Vulkan backend")
set(TILELLM_VULKAN ON)

set(shader_dir ${CMAKE_SOURCE_DIR}/src/backends/vulkan/shaders)
file(GLOB TILELLM_VULKAN_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backends/vulkan/*.cpp)
file(GLOB TILELLM_VULKAN_SHADERS CONFIGURE_DEPENDS ${shader_dir}/*.comp)
file(GLOB TILELLM_VULKAN_INCLUDES CONFIGURE_DEPENDS ${shader_dir}/*.glsl)
set(spv_dir ${CMAKE_BINARY_DIR}/generated/spirv)
file(MAKE_DIRECTORY ${spv_dir})
set(spvs "")
set(spv_files "")
foreach(src ${TILELLM_VULKAN_SHADERS})
  get_filename_component(name ${src} NAME_WE)
  file(READ ${src} text)
  string(FIND "${text}" "tl_group_" has_sg)  # calls a reduction of common.glsl
  set(variants 0)
  if(NOT has_sg EQUAL -1)
    set(variants 0 1)
  endif()
  # Shaders with cooperative matrices (shaders/coopmat.glsl) skip glslc's optimizer, which in Debian
  # bookworm's spirv-tools does not know the capability and refuses the module.
  string(FIND "${text}" "coopmat.glsl" has_cm)
  set(opt -O)
  if(NOT has_cm EQUAL -1)
    set(opt "")
  endif()
  # Shaders that read a weight matrix through shaders/weights.glsl (their push constants carry img_width)
  # are compiled a second time with TL_IMAGE, as <name>_image: the matrix in a 2D image (--gpu-memory image).
  # Shaders that read or write the KV cache through shaders/kv.glsl are compiled a second time with
  # TL_KV_IMAGE, as <name>_kvimage: the cache in an RGBA16F storage image (--kv-memory image).
  string(FIND "${text}" "img_width" has_img)
  string(FIND "${text}" "kv.glsl" has_kv)
  set(memories buffer)
  if(NOT has_img EQUAL -1)
    list(APPEND memories image)
  endif()
  if(NOT has_kv EQUAL -1)
    list(APPEND memories kvimage)
  endif()
  foreach(mem ${memories})
    set(vname ${name})
    set(memdef "")
    if(mem STREQUAL "image")
      set(vname ${name}_image)
      set(memdef -DTL_IMAGE=1)
    elseif(mem STREQUAL "kvimage")
      set(vname ${name}_kvimage)
      set(memdef -DTL_KV_IMAGE=1)
    endif()
    foreach(sg ${variants})
      set(out ${spv_dir}/${vname}_${sg}.inc)
      add_custom_command(
        OUTPUT ${out}
        COMMAND ${TILELLM_GLSLC} --target-env=vulkan1.1 ${opt} -fshader-stage=compute -I ${shader_dir}
                -DTL_SUBGROUPS=${sg} ${memdef} -mfmt=num -o ${out} ${src}
        DEPENDS ${src} ${TILELLM_VULKAN_INCLUDES}
        COMMENT "glslc ${vname} (subgroups ${sg})"
        VERBATIM)
      list(APPEND spvs "${vname}|${sg}|${out}")
      list(APPEND spv_files ${out})
    endforeach()
  endforeach()
endforeach()
string(REPLACE ";" "|" spv_list "${spvs}")
set(TILELLM_VULKAN_EMBEDDED ${CMAKE_BINARY_DIR}/generated/vulkan_shaders.cpp)
add_custom_command(
  OUTPUT ${TILELLM_VULKAN_EMBEDDED}
  COMMAND ${CMAKE_COMMAND} "-DOUT=${TILELLM_VULKAN_EMBEDDED}" "-DSPVS=${spv_list}"
          -P ${CMAKE_SOURCE_DIR}/cmake/embed_spirv.cmake
  DEPENDS ${spv_files} ${CMAKE_SOURCE_DIR}/cmake/embed_spirv.cmake
  COMMENT "Embedding Vulkan shaders"
  VERBATIM)
target_sources(tilellm_core PRIVATE ${TILELLM_VULKAN_SOURCES} ${TILELLM_VULKAN_EMBEDDED})
target_include_directories(tilellm_core PUBLIC ${TILELLM_VULKAN_INCLUDE_DIR})
target_link_libraries(tilellm_core PUBLIC ${CMAKE_DL_LIBS})
