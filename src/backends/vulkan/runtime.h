// One Vulkan device opened for compute: the device and its compute queue, buffers, compute pipelines from
// the embedded SPIR-V (shaders.h), and one command buffer the ops record into and that is submitted only
// when the host must wait (a download, finish()). Every dispatch and copy is followed by a full memory
// barrier, so the recorded work runs as an in-order queue would.
//
// Memory: buffers, and images (the image weight path's and the KV cache's; runtime_images.cpp), are
// device-local (host-visible too where the device has such memory, e.g. unified memory); uploads are copied
// at record time into a host-visible staging ring and a copy from it recorded, so the caller's memory may
// change as soon as upload() returns; downloads record a copy into a host-visible readback buffer, submit,
// wait and copy out. Descriptor sets come from one pool reset after each submit. The ring, the readback
// buffer and the pool are fixed at construction: when one runs out, the recorded work is submitted and waited
// for, and it starts over (nothing is allocated while ops run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "backends/kernel_time.h"
#include "backends/vulkan/device.h"

namespace tilellm::vulkan {

class Runtime;

// A device buffer (move-only; freed by its destructor).
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  VkBuffer get() const { return buf_; }
  size_t bytes() const { return bytes_; }
  void* mapped() const { return mapped_; }  // host-visible buffers: their memory, mapped for their life

 private:
  friend class Runtime;
  VkDevice dev_ = nullptr;
  VkBuffer buf_ = nullptr;
  VkDeviceMemory mem_ = nullptr;
  size_t bytes_ = 0;
  void* mapped_ = nullptr;
};

// What an image holds: a weight matrix on the image path (--gpu-memory image; shaders/weights.glsl has its
// layout), VK_FORMAT_R32G32B32A32_UINT texels (16 bytes) sampled with texelFetch; or the FB-KV cache
// (--kv-memory image; shaders/kv.glsl), VK_FORMAT_R16G16B16A16_SFLOAT texels (four halves, 8 bytes) read and
// written as a storage image.
enum class ImageUse { Weights, KvCache };

// A 2D image of one of those kinds. Device-local, optimal tiling, kept in VK_IMAGE_LAYOUT_GENERAL from its
// creation on (copies, sampling and storage access all allow it). Move-only; freed by its destructor.
class Image {
 public:
  Image() = default;
  ~Image();
  Image(Image&& o) noexcept { *this = std::move(o); }
  Image& operator=(Image&& o) noexcept;
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;
  explicit operator bool() const { return img_ != nullptr; }
  VkImageView view() const { return view_; }
  uint32_t width() const { return width_; }
  uint32_t height() const { return height_; }
  ImageUse use() const { return use_; }
  size_t texel_bytes() const { return use_ == ImageUse::Weights ? 16 : 8; }
  size_t bytes() const { return size_t(width_) * height_ * texel_bytes(); }

 private:
  friend class Runtime;
  VkDevice dev_ = nullptr;
  VkImage img_ = nullptr;
  VkImageView view_ = nullptr;
  VkDeviceMemory mem_ = nullptr;
  uint32_t width_ = 0, height_ = 0;
  ImageUse use_ = ImageUse::Weights;
};

// Where a pipeline takes an image, if it does: the binding, and whether it is a storage image (the KV cache)
// or a sampled one (a weight matrix, through an immutable nearest sampler).
struct ImageBinding {
  int binding = -1;  // -1: no image
  bool storage = false;
};

// A compute pipeline: `n_buffers` storage buffers at bindings 0.. (one of them an Image instead where
// `image` says), `push_bytes` of push constants, the local size given as specialization constant 0 (x; the
// shaders' y and z are 1).
struct Pipeline {
  std::string name;  // the shader's name (shaders/<name>.comp), or "<name>+subgroups"
  VkPipeline pipeline = nullptr;
  VkPipelineLayout layout = nullptr;
  VkDescriptorSetLayout set_layout = nullptr;
  uint32_t n_buffers = 0, push_bytes = 0;
  uint32_t local_size = 1;
  ImageBinding image;
  bool on_cpu = false;  // failed the backend's self-check: its op runs on the host backend instead
  // The driver's statistics of the compiled pipeline (registers, memory, ...), read when profiling on a
  // device with VK_KHR_pipeline_executable_properties; empty otherwise.
  std::string driver_stats;
};

class Runtime {
 public:
  // device: index into list_devices(); profile: a profiles() name. profiling: every dispatch writes
  // timestamps before and after (kernel_times()).
  Runtime(int device, std::string_view profile, bool profiling = false);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Capabilities& caps() const { return caps_; }

  Buffer alloc(size_t bytes, bool host_visible = false);
  // Whether the device samples VK_FORMAT_R32G32B32A32_UINT images in shaders (the image weight path), and
  // reads and writes VK_FORMAT_R16G16B16A16_SFLOAT storage images (the KV cache as an image).
  bool sampled_images() const { return sampled_images_; }
  bool storage_kv_images() const { return storage_kv_images_; }
  // A width x height image (within caps().image2d_max and max_alloc_bytes: a clear error otherwise).
  Image alloc_image(uint32_t width, uint32_t height, ImageUse use = ImageUse::Weights);
  // Staged upload of image lines [y0, y0 + lines), `src` holding them whole (width texels a line).
  void upload_image(const Image& dst, uint32_t y0, uint32_t lines, const void* src);
  // Blocking read of image lines [y0, y0 + lines) into dst (as upload_image lays them out).
  void download_image(const Image& src, uint32_t y0, uint32_t lines, void* dst);
  // The pipeline of embedded shader `shader` (its SPIR-V; subgroups: the variant with the subgroup
  // reductions), `extra` specialization constants at ids 1.. after the local size.
  // The pipeline cache the following pipelines are made through, seeded with `initial` (a previous run's
  // pipeline_cache_data(); empty: a cold cache). True when the driver took the data.
  bool use_pipeline_cache(const std::vector<uint8_t>& initial);
  std::vector<uint8_t> pipeline_cache_data() const;
  // image: the binding that takes an Image (the `_image` and `_kvimage` variants), counted in n_buffers.
  Pipeline pipeline(std::string_view shader, bool subgroups, uint32_t n_buffers, uint32_t push_bytes,
                    uint32_t local_size, const std::vector<uint32_t>& extra = {}, ImageBinding image = {});
  // A pipeline from SPIR-V words given here (the self-check's test hook builds a broken shader this way).
  Pipeline pipeline_from(std::string_view name, const std::vector<uint32_t>& spirv, uint32_t n_buffers,
                         uint32_t push_bytes, uint32_t local_size, const std::vector<uint32_t>& extra = {},
                         ImageBinding image = {});
  void destroy(Pipeline& p);
  // The driver's statistics of a pipeline made with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR.
  std::string pipeline_statistics(VkPipeline pipeline) const;

  // Records a dispatch of groups (gx, gy, gz) with the buffers bound whole (each range clamped to the
  // device's maxStorageBufferRange) and `push` as the push constants (p.push_bytes bytes).
  void dispatch(const Pipeline& p, std::initializer_list<const Buffer*> buffers, const void* push,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  // The same for a pipeline that takes an image (Pipeline::image): `image` at its binding, the buffers at
  // the other bindings in order.
  void dispatch(const Pipeline& p, const Image& image, std::initializer_list<const Buffer*> buffers,
                const void* push, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  // Inside a span of independent dispatches (none reads what another of the span writes: the products of
  // q, k and v from one input), the barriers between them are left out, so their work overlaps; the barrier
  // before the next command after the span orders the whole span before it.
  void begin_independent() { independent_ = true; }
  void end_independent();
  // Staged upload (recorded; src may change once it returns), device copy (recorded), fill of 32-bit words.
  void upload(const Buffer& dst, size_t offset, const void* src, size_t bytes);
  void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes);
  void fill(const Buffer& dst, size_t offset, size_t bytes, uint32_t word);
  // Blocking read: submits what is recorded, waits, and copies the bytes out.
  void download(const Buffer& src, size_t offset, void* dst, size_t bytes);
  // The same, except inside a capture: there the bytes arrive when the capture ends (or is replayed).
  void download_deferred(const Buffer& src, size_t offset, void* dst, size_t bytes);
  bool profiling() const { return profiling_; }
  // Submits what is recorded and waits for it.
  void finish();

  // Capture: the recording between begin_capture() and end_capture() goes into a command buffer and a
  // descriptor pool of its own, so that it can be submitted again (replay()) without recording anew. The
  // captured work is submitted once by end_capture() (it is that step's work) and kept when it is
  // replayable: nothing inside it read the host's memory at record time (no staged upload) nor forced a
  // submission (a blocking download, a full pool). Downloads inside a capture are deferred: their copy is
  // recorded and the bytes land in host memory when end_capture() or replay() returns. Inputs that change
  // between replays go through step_input(): bytes written into a persistent host-visible buffer, copied
  // to the device by a recorded copy that each replay repeats (rewrite them with set_step_input()).
  void begin_capture();
  bool capturing() const { return capture_.active; }
  // Ends the capture, submits it and waits; true when it was kept for replay.
  bool end_capture();
  bool has_capture() const { return capture_.kept; }
  void drop_capture();
  // Submits the kept capture again and waits; the deferred downloads land at the pointers set last.
  void replay();
  // Deferred downloads of the capture, in order: where replay() copies download k (set by the op that
  // made it, each step).
  size_t deferred_downloads() const { return capture_.deferred.size(); }
  // Time the host has spent blocked waiting for submitted work, since the runtime was made.
  uint64_t waited_ns() const { return waited_ns_; }
  void set_deferred_destination(size_t k, void* dst);
  // The step-input buffer ([kStepInputBytes] host-visible): `bytes` at `slot_offset` from src, and a
  // recorded copy of them into dst at offset.
  void step_input(size_t slot_offset, const void* src, size_t bytes, const Buffer& dst, size_t offset);
  void set_step_input(size_t slot_offset, const void* src, size_t bytes);
  static constexpr size_t kStepInputBytes = 4096;
  // Buffers allocated so far (tests: nothing is allocated while a decode step runs).
  uint64_t allocations() const { return allocations_; }

  // With profiling: per pipeline name, the dispatches and device time since the last reset (finishes
  // first). Without: empty.
  std::vector<KernelTime> kernel_times();
  void reset_kernel_times();

 private:
  void begin();  // starts recording when not yet
  VkCommandBuffer cur() const { return capture_.active ? capture_.cmd : cmd_; }
  // A capture that has to submit in its middle (a blocking download, a full ring or pool) becomes ordinary
  // recorded work: submitted now, not kept.
  void spoil_capture();
  // Barriers are recorded lazily, each with the stages it has to order: a command records the stage it ran
  // in (recorded) and the next command the stage it runs in (sync_before), which emits one barrier from the
  // stages not yet waited for to that stage alone. Only the end of a command buffer (end_commands) also
  // orders them before the host and every later command, whatever it is. A barrier with the host or
  // transfer stages among its destinations costs a compute -> compute one more on some drivers; inside a
  // decode step nearly every barrier is compute -> compute.
  void sync_before(VkPipelineStageFlags stage);
  void recorded(VkPipelineStageFlags stage);
  void end_commands(VkCommandBuffer cb);
  void dispatch_with(const Pipeline& p, const Image* image, std::initializer_list<const Buffer*> buffers,
                     const void* push, uint32_t gx, uint32_t gy, uint32_t gz);
  void submit_and_wait();
  uint32_t memory_type(uint32_t bits, bool host_visible) const;

  Capabilities caps_;
  VkPhysicalDevice phys_ = nullptr;
  VkDevice dev_ = nullptr;
  VkQueue queue_ = nullptr;
  uint32_t family_ = 0;
  VkCommandPool cmd_pool_ = nullptr;
  VkCommandBuffer cmd_ = nullptr;
  VkFence fence_ = nullptr;
  VkDescriptorPool desc_pool_ = nullptr;
  VkSampler sampler_ = nullptr;  // nearest, clamp to edge: every image binding's immutable sampler
  bool sampled_images_ = false, storage_kv_images_ = false;
  uint32_t desc_sets_left_ = 0;
  bool recording_ = false;
  bool independent_ = false;
  // Stages of the commands recorded since the last barrier (pending_src_), and of the current span of
  // independent dispatches (group_src_, joined to pending_src_ when the span ends).
  VkPipelineStageFlags pending_src_ = 0, group_src_ = 0;
  Buffer ring_, readback_;  // host-visible: staged uploads; downloads
  size_t ring_used_ = 0;
  uint64_t allocations_ = 0;
  bool profiling_ = false;
  VkQueryPool queries_ = nullptr;
  uint32_t queries_used_ = 0;
  std::vector<size_t> timed_;  // per query pair since the last submit: its index in times_
  std::vector<KernelTime> times_;
  bool pipeline_stats_ = false;  // profiling, and the device reports pipeline statistics
  std::vector<uint64_t> ts_;     // [2 * kQueryPairs] timestamps read back
  VkPhysicalDeviceMemoryProperties mem_{};
  struct Deferred {
    size_t readback_offset, bytes;
    void* dst;
  };
  struct Capture {
    VkCommandBuffer cmd = nullptr;
    VkDescriptorPool pool = nullptr;
    bool active = false, kept = false, replayable = false, recording = false;
    uint32_t sets_left = 0;
    size_t readback_used = 0;
    std::vector<Deferred> deferred;
  } capture_;
  uint64_t waited_ns_ = 0;
  VkPipelineCache pipeline_cache_ = nullptr;
  Buffer step_in_, capture_readback_;  // host-visible: step inputs; deferred downloads
};

}  // namespace tilellm::vulkan
