// The Vulkan runtime's images (runtime.h: Image, alloc_image, upload_image, download_image): the weight
// matrices of --gpu-memory image and the KV cache of --kv-memory image, made, filled and read back.
#include <algorithm>
#include <cstring>

#include "backends/vulkan/error.h"
#include "backends/vulkan/runtime.h"

namespace tilellm::vulkan {

Image::~Image() {
  if (!dev_) return;
  vk.vkDestroyImageView(dev_, view_, nullptr);
  vk.vkDestroyImage(dev_, img_, nullptr);
  vk.vkFreeMemory(dev_, mem_, nullptr);
}

Image& Image::operator=(Image&& o) noexcept {
  if (this == &o) return *this;
  this->~Image();
  dev_ = o.dev_;
  img_ = o.img_;
  view_ = o.view_;
  mem_ = o.mem_;
  width_ = o.width_;
  height_ = o.height_;
  o.dev_ = nullptr;
  o.img_ = nullptr;
  o.view_ = nullptr;
  o.mem_ = nullptr;
  use_ = o.use_;
  o.width_ = o.height_ = 0;
  return *this;
}

Image Runtime::alloc_image(uint32_t width, uint32_t height, ImageUse use) {
  const bool kv = use == ImageUse::KvCache;
  if (!kv && !sampled_images_)
    fail("Vulkan: device {} cannot sample RGBA32UI images in shaders (the image weight path)", caps_.name);
  if (kv && !storage_kv_images_)
    fail("Vulkan: device {} has no RGBA16F storage images (the KV cache as an image)", caps_.name);
  const VkFormat format = kv ? VK_FORMAT_R16G16B16A16_SFLOAT : VK_FORMAT_R32G32B32A32_UINT;
  const uint64_t bytes = uint64_t(width) * height * (kv ? 8 : 16);
  if (width == 0 || height == 0 || width > caps_.image2d_max || height > caps_.image2d_max) {
    fail("Vulkan: an image of {} x {} texels exceeds the device's 2D image limit of {} x {} (profile {})",
         width, height, caps_.image2d_max, caps_.image2d_max, caps_.profile);
  }
  if (bytes > caps_.max_alloc_bytes) {
    fail("Vulkan: an image of {} bytes exceeds the device's largest allocation of {} bytes (profile {})",
         bytes, caps_.max_alloc_bytes, caps_.profile);
  }
  Image im;
  im.dev_ = dev_;
  im.width_ = width;
  im.height_ = height;
  im.use_ = use;
  ++allocations_;
  VkImageCreateInfo ii{};
  ii.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO;
  ii.imageType = VK_IMAGE_TYPE_2D;
  ii.format = format;
  ii.extent = {width, height, 1};
  ii.mipLevels = 1;
  ii.arrayLayers = 1;
  ii.samples = VK_SAMPLE_COUNT_1_BIT;
  ii.tiling = VK_IMAGE_TILING_OPTIMAL;
  ii.usage =
      kv ? VK_IMAGE_USAGE_STORAGE_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT
         : VK_IMAGE_USAGE_SAMPLED_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT;
  ii.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  ii.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
  check(vk.vkCreateImage(dev_, &ii, nullptr, &im.img_), "vkCreateImage");
  VkMemoryRequirements req;
  vk.vkGetImageMemoryRequirements(dev_, im.img_, &req);
  VkMemoryAllocateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mi.allocationSize = req.size;
  mi.memoryTypeIndex = memory_type(req.memoryTypeBits, false);
  const VkResult r = vk.vkAllocateMemory(dev_, &mi, nullptr, &im.mem_);
  if (r != VK_SUCCESS) {
    fail("Vulkan: allocating {} bytes of device memory for a {} x {} image failed: {} (device {})",
         uint64_t(req.size), width, height, result_name(r), caps_.name);
  }
  check(vk.vkBindImageMemory(dev_, im.img_, im.mem_, 0), "vkBindImageMemory");
  VkImageViewCreateInfo vi{};
  vi.sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO;
  vi.image = im.img_;
  vi.viewType = VK_IMAGE_VIEW_TYPE_2D;
  vi.format = format;
  vi.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  check(vk.vkCreateImageView(dev_, &vi, nullptr, &im.view_), "vkCreateImageView");
  // Into the one layout it keeps (recorded before any copy into it).
  begin();
  VkImageMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER;
  b.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                    VK_ACCESS_SHADER_WRITE_BIT;
  b.oldLayout = VK_IMAGE_LAYOUT_UNDEFINED;
  b.newLayout = VK_IMAGE_LAYOUT_GENERAL;
  b.srcQueueFamilyIndex = b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  b.image = im.img_;
  b.subresourceRange = vi.subresourceRange;
  vk.vkCmdPipelineBarrier(cur(), VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                          VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 0,
                          nullptr, 0, nullptr, 1, &b);
  return im;
}

void Runtime::upload_image(const Image& dst, uint32_t y0, uint32_t lines, const void* src) {
  if (uint64_t(y0) + lines > dst.height())
    fail("internal: Vulkan upload of image lines {} .. {} past an image of {}", y0, y0 + lines, dst.height());
  const size_t line_bytes = size_t(dst.width()) * dst.texel_bytes();
  if (line_bytes > ring_.bytes())
    fail("internal: a Vulkan image line of {} bytes exceeds the ring", line_bytes);
  const uint8_t* s = static_cast<const uint8_t*>(src);
  while (lines > 0) {
    ring_used_ = (ring_used_ + 15) / 16 * 16;
    if (ring_used_ + line_bytes > ring_.bytes()) submit_and_wait();
    capture_.replayable = false;
    const uint32_t n = uint32_t(std::min<size_t>(lines, (ring_.bytes() - ring_used_) / line_bytes));
    std::memcpy(static_cast<uint8_t*>(ring_.mapped()) + ring_used_, s, n * line_bytes);
    begin();
    VkBufferImageCopy c{};
    c.bufferOffset = ring_used_;
    c.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
    c.imageOffset = {0, int32_t(y0), 0};
    c.imageExtent = {dst.width(), n, 1};
    sync_before(VK_PIPELINE_STAGE_TRANSFER_BIT);
    vk.vkCmdCopyBufferToImage(cur(), ring_.get(), dst.img_, VK_IMAGE_LAYOUT_GENERAL, 1, &c);
    recorded(VK_PIPELINE_STAGE_TRANSFER_BIT);
    ring_used_ += n * line_bytes;
    s += n * line_bytes;
    y0 += n;
    lines -= n;
  }
}

void Runtime::download_image(const Image& src, uint32_t y0, uint32_t lines, void* dst) {
  if (uint64_t(y0) + lines > src.height())
    fail("internal: Vulkan read of image lines {} .. {} past an image of {}", y0, y0 + lines, src.height());
  if (capture_.active) spoil_capture();
  const size_t line_bytes = size_t(src.width()) * src.texel_bytes();
  if (line_bytes > readback_.bytes())
    fail("internal: a Vulkan image line of {} bytes exceeds the readback buffer", line_bytes);
  uint8_t* d = static_cast<uint8_t*>(dst);
  while (lines > 0) {
    const uint32_t n = uint32_t(std::min<size_t>(lines, readback_.bytes() / line_bytes));
    begin();
    VkBufferImageCopy c{};
    c.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
    c.imageOffset = {0, int32_t(y0), 0};
    c.imageExtent = {src.width(), n, 1};
    sync_before(VK_PIPELINE_STAGE_TRANSFER_BIT);
    vk.vkCmdCopyImageToBuffer(cmd_, src.img_, VK_IMAGE_LAYOUT_GENERAL, readback_.get(), 1, &c);
    recorded(VK_PIPELINE_STAGE_TRANSFER_BIT);
    submit_and_wait();
    std::memcpy(d, readback_.mapped(), n * line_bytes);
    d += n * line_bytes;
    y0 += n;
    lines -= n;
  }
}

}  // namespace tilellm::vulkan
