// Binding 0 of the shaders that read a weight matrix (through quants.glsl), and the only way they read it:
// tl_w(i), tl_w2(i), tl_w4(i), the i-th 4-, 8- and 16-byte unit of the device rows (backends/device_rows.h).
//
// By default the matrix is a storage buffer. With TL_IMAGE (the `<shader>_image` variants, --gpu-memory
// image: the seed's Tile-GEMM "Path C", weights read through the texture path) it is a 2D image of
// VK_FORMAT_R32G32B32A32_UINT texels, sampled with texelFetch (nearest, unfiltered: the bytes arrive as
// they were uploaded). Layout (VulkanBackend::make_weight_image): a matrix row of T 16-byte texels (its
// device bytes, zero-padded to a multiple of 128 bytes) takes L image lines of W = pc.img_width texels, so
// texel t of row r is at (t % W, r L + t / W). The including shader then passes pc.row_bytes = 16 W L (the
// row's whole span), so that its byte offsets r * row_bytes + k stay linear: unit i = offset / 16 is at
// (i % W, i / W) (common.glsl's tl_texel_coord). The including shader declares pc (with img_width) before
// including quants.glsl.
#ifdef TL_IMAGE
layout(binding = 0) uniform usampler2D wimg;
uvec4 tl_w4(uint i) { return texelFetch(wimg, tl_texel_coord(i, pc.img_width), 0); }
uvec2 tl_w2(uint i) {
  const uvec4 t = tl_w4(i >> 1);
  return (i & 1u) == 0u ? t.xy : t.zw;
}
uint tl_w(uint i) { return tl_w4(i >> 2)[i & 3u]; }
#else
layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 0) readonly buffer W2 { uvec2 w2[]; };
layout(std430, binding = 0) readonly buffer W4 { uvec4 w4[]; };
uvec4 tl_w4(uint i) { return w4[i]; }
uvec2 tl_w2(uint i) { return w2[i]; }
uint tl_w(uint i) { return w[i]; }
#endif
