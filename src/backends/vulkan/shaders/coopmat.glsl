// Cooperative matrices (SPV_KHR_cooperative_matrix) for a shader compiled by a glslc that knows no GLSL
// extension for them (Debian bookworm's glslang 11.13 has GL_EXT_spirv_intrinsics but not
// GL_KHR_cooperative_matrix): the types and the four instructions are declared through spirv_type and
// spirv_instruction. glslang 11 writes a spirv_type's parameters as literal words, while
// OpTypeCooperativeMatrixKHR takes ids (a component type, then constants for scope, rows, columns and use);
// spirv_coopmat.h rewrites those literals into ids when the pipeline is built. The first parameter names
// the component type by its float width (16 or 32). Only 16 x 16 x 16 subgroup-scope matrices are used:
// A 16 x 16 fp16 (use 0), B 16 x 16 fp16 (use 1), C / the result 16 x 16 fp32 (use 2); the device lists the
// shape (Capabilities::coopmat_f16).
//
// A shader including this is compiled without glslc's -O (cmake/vulkan.cmake): the optimizer of the same
// Debian release does not know the capability and refuses the module.
//
// Shaders call the operations through the TL_CM_* macros, which name the array and the index apart: A and B
// are loaded from shared arrays of f16vec4 (place and stride in f16vec4s, 16-byte aligned), C stored into any
// float array (shared or a buffer; place and stride in floats, 16-byte aligned). TL_CM_EMULATE 1 (a test
// build, tests/vulkan) replaces them by plain GLSL over the same arrays, so the tiling around them runs and
// is checked on a device without cooperative matrices (lavapipe). The emulation reads A from `tl_a` and B
// from `tl_b`, which the including shader declares before this file; each invocation of a subgroup holds
// elements lane, lane + S, ... (S the subgroup size, >= 8) of a C matrix, and products of fp16 values are
// summed in fp32 as the hardware does.
// (The including shader enables GL_EXT_shader_explicit_arithmetic_types_float16 before its shared arrays.)

// The memory layouts of OpCooperativeMatrixLoadKHR / StoreKHR: element (i, j) at i * stride + j (row
// major) or j * stride + i (column major); the stride counts elements of the pointer's type.
const uint tl_cm_row_major = 0u;
const uint tl_cm_column_major = 1u;

#if TL_CM_EMULATE
struct tl_cm_a {
  uint at, layout_, stride;
};
struct tl_cm_b {
  uint at, layout_, stride;
};
struct tl_cm_c {
  float v[32];  // elements lane + k S, k < 256 / S
};
uint tl_cm_offset(uint i, uint j, uint layout_, uint stride) {
  return layout_ == tl_cm_row_major ? i * stride + j : j * stride + i;
}
tl_cm_c tl_cm_fill_c(float x) {
  tl_cm_c c;
  for (uint k = 0; k < 32u; ++k) c.v[k] = x;
  return c;
}
// Element e of a matrix whose place and stride count f16vec4s of tl_a / tl_b.
float tl_cm_a_at(tl_cm_a a, uint i, uint x) {
  const uint e = 4u * a.at + tl_cm_offset(i, x, a.layout_, 4u * a.stride);
  return float(tl_a[e / 4u][e % 4u]);
}
float tl_cm_b_at(tl_cm_b b, uint x, uint j) {
  const uint e = 4u * b.at + tl_cm_offset(x, j, b.layout_, 4u * b.stride);
  return float(tl_b[e / 4u][e % 4u]);
}
tl_cm_c tl_cm_mul_add(tl_cm_a a, tl_cm_b b, tl_cm_c c) {
  for (uint e = gl_SubgroupInvocationID, k = 0; e < 256u; e += gl_SubgroupSize, ++k) {
    const uint i = e / 16u, j = e % 16u;
    float s = c.v[k];
    for (uint x = 0; x < 16u; ++x) s += tl_cm_a_at(a, i, x) * tl_cm_b_at(b, x, j);
    c.v[k] = s;
  }
  return c;
}
#define TL_CM_LOAD_A(arr, at, layout_, stride) tl_cm_a(at, layout_, stride)
#define TL_CM_LOAD_B(arr, at, layout_, stride) tl_cm_b(at, layout_, stride)
#define TL_CM_STORE_C(arr, at, m, layout_, stride)                                                \
  for (uint tl_e = gl_SubgroupInvocationID, tl_k = 0; tl_e < 256u; tl_e += gl_SubgroupSize, ++tl_k) \
  arr[(at) + tl_cm_offset(tl_e / 16u, tl_e % 16u, layout_, stride)] = m.v[tl_k]
#else
#extension GL_EXT_spirv_intrinsics : require

#define TL_CM_TYPE(width, use)                                                                        \
  spirv_type(extensions = ["SPV_KHR_cooperative_matrix"], capabilities = [6022], id = 4456, width, 3, \
             16, 16, use)
#define tl_cm_a TL_CM_TYPE(16, 0)
#define tl_cm_b TL_CM_TYPE(16, 1)
#define tl_cm_c TL_CM_TYPE(32, 2)
#define TL_CM_OP(op) spirv_instruction(extensions = ["SPV_KHR_cooperative_matrix"], capabilities = [6022], id = op)

TL_CM_OP(4457) tl_cm_a tl_cm_load_a(spirv_by_reference f16vec4 p, uint layout_, uint stride);
TL_CM_OP(4457) tl_cm_b tl_cm_load_b(spirv_by_reference f16vec4 p, uint layout_, uint stride);
TL_CM_OP(4458) void tl_cm_store_c(spirv_by_reference float p, tl_cm_c m, uint layout_, uint stride);
// C + A B
TL_CM_OP(4459) tl_cm_c tl_cm_mul_add(tl_cm_a a, tl_cm_b b, tl_cm_c c);
// Every element of a C matrix equal to v (OpCompositeConstruct with one scalar).
spirv_instruction(id = 80) tl_cm_c tl_cm_fill_c(float v);
#define TL_CM_LOAD_A(arr, at, layout_, stride) tl_cm_load_a(arr[at], layout_, stride)
#define TL_CM_LOAD_B(arr, at, layout_, stride) tl_cm_load_b(arr[at], layout_, stride)
#define TL_CM_STORE_C(arr, at, m, layout_, stride) tl_cm_store_c(arr[at], m, layout_, stride)
#endif
