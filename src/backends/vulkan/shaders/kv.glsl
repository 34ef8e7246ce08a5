// The FB-KV cache as the KV shaders (kv_store, rope_kv_store, attention) read and write it, and the only way
// they do: [layer][K|V][pos < n_ctx][kv_dim] elements, element e addressed from the start of the binding.
// The including shader defines TL_KV_BINDING (its binding), TL_KV_READONLY (1: it only reads) and TL_KV_DIM
// (an expression of its push constants: kv_dim), and declares TL_KV_F16 first.
//
// By default a storage buffer of 32-bit words (TL_KV_F16 1: two halves a word; 0: floats). With TL_KV_IMAGE
// (the `<shader>_kvimage` variants, --kv-memory image: the seed's FB-KV as an RGBA16F image) an RGBA16F
// storage image: four halves a texel, each position's row of kv_dim elements one image line of kv_dim / 4
// texels, so element e is channel e % 4 of texel e / 4 at (t % W, t / W) (common.glsl's tl_texel_coord).
// Only halves there (the host checks the cache type), written four at a time: every invocation of a writing
// shader owns whole texels.
//   tl_kv(e)        element e as a float
//   tl_kv16(i)      elements 8i .. 8i + 7 (halves) or 4i .. 4i + 3 (floats) as the 16 bytes a buffer holds
//   tl_kv_put4(e, v) elements e .. e + 3 (e % 4 == 0)
//   tl_kv_put2(e, a, b) elements e, e + 1 (e even; buffers only)
#if TL_KV_READONLY
#define TL_KV_ACCESS readonly
#else
#define TL_KV_ACCESS
#endif
#ifdef TL_KV_IMAGE
layout(binding = TL_KV_BINDING, rgba16f) uniform TL_KV_ACCESS image2D kvimg;
vec4 tl_kv_quad(uint t) { return imageLoad(kvimg, tl_texel_coord(t, (TL_KV_DIM) / 4u)); }
float tl_kv(uint e) { return tl_kv_quad(e >> 2)[e & 3u]; }
uvec4 tl_kv16(uint i) {
  const vec4 a = tl_kv_quad(2u * i), b = tl_kv_quad(2u * i + 1u);
  // Half -> float -> half is exact: the words are the buffer's.
  return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}
#if !TL_KV_READONLY
// Rounded to halves by packHalf2x16 first, as the buffer path rounds them: a store's own conversion to a
// 16-bit format may round toward zero (the spec allows it; lavapipe does), and the values it then gets are
// already halves, stored exactly.
void tl_kv_put4(uint e, vec4 v) {
  const vec4 h = vec4(unpackHalf2x16(packHalf2x16(v.xy)), unpackHalf2x16(packHalf2x16(v.zw)));
  imageStore(kvimg, tl_texel_coord(e >> 2, (TL_KV_DIM) / 4u), h);
}
#endif
#else
layout(std430, binding = TL_KV_BINDING) TL_KV_ACCESS buffer C { uint cache[]; };
layout(std430, binding = TL_KV_BINDING) TL_KV_ACCESS buffer C4 { uvec4 cache4[]; };
float tl_kv(uint e) {
  if (TL_KV_F16 == 1u) return unpackHalf2x16(cache[e >> 1] >> ((e & 1u) * 16u)).x;
  return uintBitsToFloat(cache[e]);
}
uvec4 tl_kv16(uint i) { return cache4[i]; }
#if !TL_KV_READONLY
void tl_kv_put2(uint e, float a, float b) {
  if (TL_KV_F16 == 1u) {
    cache[e / 2u] = packHalf2x16(vec2(a, b));
  } else {
    cache[e] = floatBitsToUint(a);
    cache[e + 1u] = floatBitsToUint(b);
  }
}
void tl_kv_put4(uint e, vec4 v) {
  tl_kv_put2(e, v.x, v.y);
  tl_kv_put2(e + 2u, v.z, v.w);
}
#endif
#endif
