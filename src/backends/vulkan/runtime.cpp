// The Vulkan device runtime (runtime.h).
#include "backends/vulkan/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "backends/vulkan/error.h"
#include "backends/vulkan/shaders.h"
#include "backends/vulkan/spirv_coopmat.h"

namespace tilellm::vulkan {
namespace {

constexpr size_t kRingBytes = size_t(8) << 20;      // staged uploads between two submits
constexpr size_t kReadbackBytes = size_t(8) << 20;  // one download chunk
constexpr uint32_t kDescriptorSets = 2048;          // dispatches between two submits
constexpr uint32_t kBuffersPerSet = 8;
constexpr uint32_t kQueryPairs = 2048;

}  // namespace

Buffer::~Buffer() {
  if (!dev_) return;
  if (mapped_) vk.vkUnmapMemory(dev_, mem_);
  vk.vkDestroyBuffer(dev_, buf_, nullptr);
  vk.vkFreeMemory(dev_, mem_, nullptr);
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this == &o) return *this;
  this->~Buffer();
  dev_ = o.dev_;
  buf_ = o.buf_;
  mem_ = o.mem_;
  bytes_ = o.bytes_;
  mapped_ = o.mapped_;
  o.dev_ = nullptr;
  o.buf_ = nullptr;
  o.mem_ = nullptr;
  o.bytes_ = 0;
  o.mapped_ = nullptr;
  return *this;
}

Runtime::Runtime(int device, std::string_view profile, bool profiling) : profiling_(profiling) {
  if (!instance()) fail("Vulkan: {}", instance_error());
  const std::vector<VkPhysicalDevice> devs = list_devices();
  if (devs.empty()) fail("Vulkan: no Vulkan 1.1 device (the loader found no driver, or none lists a device)");
  if (device < 0 || size_t(device) >= devs.size())
    fail("Vulkan: device {} does not exist (this machine has {}: tilellm devices lists them)", device,
         devs.size());
  phys_ = devs[size_t(device)];
  caps_ = query_capabilities(phys_);
  apply_profile(caps_, find_profile(profile));
  vk.vkGetPhysicalDeviceMemoryProperties(phys_, &mem_);

  family_ = compute_queue_family(phys_);
  if (family_ == UINT32_MAX) fail("Vulkan: device {} has no compute queue", caps_.name);
  if (profiling_ && !caps_.timestamps)
    fail("Vulkan: device {}'s compute queue writes no timestamps (--profile needs them)", caps_.name);

  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  // Profiling asks the driver for its statistics of every pipeline (registers, spills) where it offers
  // them: what bench --profile prints beside the kernel times.
  const char* exts[4];
  uint32_t n_ext = 0;
  void* features = nullptr;  // the chain of feature structs, each put in front
  const char* stats_ext = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pe{};
  pe.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  pe.pipelineExecutableInfo = VK_TRUE;
  if (profiling_ && has_device_extension(phys_, stats_ext) &&
      vk.vkGetInstanceProcAddr(instance(), "vkGetPipelineExecutableStatisticsKHR")) {
    exts[n_ext++] = stats_ext;
    pe.pNext = features;
    features = &pe;
    pipeline_stats_ = true;
  }
  // The decode matvec's integer path (shaders/matvec_q8.comp) uses OpSDot/OpSUDot: the feature is enabled
  // where the (profile-clamped) capabilities have it; before 1.3 it is an extension.
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  dot.shaderIntegerDotProduct = VK_TRUE;
  if (caps_.integer_dot) {
    if (caps_.api_version < VK_API_VERSION_1_3)
      exts[n_ext++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    dot.pNext = features;
    features = &dot;
  }
  // The prompt GEMM on cooperative matrices (shaders/matmul_coopmat.comp): the extension, its feature and
  // fp16 arithmetic (the matrices' and the shared tiles' type), where the capabilities have them.
  CoopmatFeatures cm;
  cm.cooperativeMatrix = VK_TRUE;
  VkPhysicalDeviceShaderFloat16Int8Features f16{};
  f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  f16.shaderFloat16 = VK_TRUE;
  if (caps_.coopmat_f16) {
    exts[n_ext++] = "VK_KHR_cooperative_matrix";
    if (caps_.api_version < VK_API_VERSION_1_2) exts[n_ext++] = VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME;
    cm.pNext = features;
    f16.pNext = &cm;
    features = &f16;
  }
  di.pNext = features;
  di.enabledExtensionCount = n_ext;
  di.ppEnabledExtensionNames = n_ext ? exts : nullptr;
  check(vk.vkCreateDevice(phys_, &di, nullptr, &dev_), "vkCreateDevice");
  vk.vkGetDeviceQueue(dev_, family_, 0, &queue_);

  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = family_;
  check(vk.vkCreateCommandPool(dev_, &pi, nullptr, &cmd_pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = cmd_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check(vk.vkAllocateCommandBuffers(dev_, &ai, &cmd_), "vkAllocateCommandBuffers");
  check(vk.vkAllocateCommandBuffers(dev_, &ai, &capture_.cmd), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  check(vk.vkCreateFence(dev_, &fi, nullptr, &fence_), "vkCreateFence");

  const VkDescriptorPoolSize ps[3] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kDescriptorSets * kBuffersPerSet},
                                      {VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, kDescriptorSets},
                                      {VK_DESCRIPTOR_TYPE_STORAGE_IMAGE, kDescriptorSets}};
  VkDescriptorPoolCreateInfo dpi{};
  dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  dpi.maxSets = kDescriptorSets;
  dpi.poolSizeCount = 3;
  dpi.pPoolSizes = ps;
  check(vk.vkCreateDescriptorPool(dev_, &dpi, nullptr, &desc_pool_), "vkCreateDescriptorPool");
  desc_sets_left_ = kDescriptorSets;
  check(vk.vkCreateDescriptorPool(dev_, &dpi, nullptr, &capture_.pool), "vkCreateDescriptorPool");
  capture_.sets_left = kDescriptorSets;

  // The image paths' formats (Capabilities: both mandatory in Vulkan 1.1, queried anyway).
  sampled_images_ = caps_.image_weights && caps_.image2d_max >= 8;
  storage_kv_images_ = caps_.image_kv && caps_.image2d_max >= 8;
  VkSamplerCreateInfo sci{};
  sci.sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO;
  sci.magFilter = sci.minFilter = VK_FILTER_NEAREST;
  sci.mipmapMode = VK_SAMPLER_MIPMAP_MODE_NEAREST;
  sci.addressModeU = sci.addressModeV = sci.addressModeW = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE;
  sci.unnormalizedCoordinates = VK_FALSE;  // texelFetch takes integer coordinates and no sampling state
  check(vk.vkCreateSampler(dev_, &sci, nullptr, &sampler_), "vkCreateSampler");

  if (profiling_) {
    VkQueryPoolCreateInfo qpi{};
    qpi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    qpi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qpi.queryCount = 2 * kQueryPairs;
    check(vk.vkCreateQueryPool(dev_, &qpi, nullptr, &queries_), "vkCreateQueryPool");
    timed_.reserve(kQueryPairs);
    ts_.reserve(2 * kQueryPairs);
  }
  ring_ = alloc(kRingBytes, true);
  readback_ = alloc(kReadbackBytes, true);
  step_in_ = alloc(kStepInputBytes, true);
  capture_readback_ = alloc(kReadbackBytes, true);
  capture_.deferred.reserve(16);
}

Runtime::~Runtime() {
  if (!dev_) return;
  vk.vkDeviceWaitIdle(dev_);
  ring_ = Buffer();
  readback_ = Buffer();
  step_in_ = Buffer();
  capture_readback_ = Buffer();
  vk.vkDestroyDescriptorPool(dev_, capture_.pool, nullptr);
  if (queries_) vk.vkDestroyQueryPool(dev_, queries_, nullptr);
  if (pipeline_cache_) vk.vkDestroyPipelineCache(dev_, pipeline_cache_, nullptr);
  vk.vkDestroyDescriptorPool(dev_, desc_pool_, nullptr);
  vk.vkDestroySampler(dev_, sampler_, nullptr);
  vk.vkDestroyFence(dev_, fence_, nullptr);
  vk.vkDestroyCommandPool(dev_, cmd_pool_, nullptr);
  vk.vkDestroyDevice(dev_, nullptr);
}

uint32_t Runtime::memory_type(uint32_t bits, bool host_visible) const {
  // Preference: host-visible buffers want host-coherent memory (device-local too when there is such);
  // device buffers want device-local memory, and where that is also host-visible (unified memory) it is
  // the same memory either way.
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags dl = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  std::vector<VkMemoryPropertyFlags> want =
      host_visible ? std::vector<VkMemoryPropertyFlags>{hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, hv}
                   : std::vector<VkMemoryPropertyFlags>{dl, 0};
  for (VkMemoryPropertyFlags w : want) {
    for (uint32_t t = 0; t < mem_.memoryTypeCount; ++t) {
      if ((bits & (1u << t)) && (mem_.memoryTypes[t].propertyFlags & w) == w) return t;
    }
  }
  fail("Vulkan: device {} has no {} memory type for a buffer", caps_.name,
       host_visible ? "host-visible" : "device");
}

Buffer Runtime::alloc(size_t bytes, bool host_visible) {
  // Whole 16-byte units: the shaders read 32-bit words (and the copies 16-byte units), so the last
  // bytes of a buffer whose size is not a multiple of 4 (an F16 row of odd length) stay addressable.
  bytes = std::max<size_t>((bytes + 15) / 16 * 16, 16);
  if (bytes > caps_.max_alloc_bytes) {
    fail("Vulkan: a buffer of {} bytes exceeds the device's largest allocation of {} bytes (profile {})",
         bytes, caps_.max_alloc_bytes, caps_.profile);
  }
  Buffer b;
  b.dev_ = dev_;
  b.bytes_ = bytes;
  ++allocations_;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vk.vkCreateBuffer(dev_, &bi, nullptr, &b.buf_), "vkCreateBuffer");
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(dev_, b.buf_, &req);
  VkMemoryAllocateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mi.allocationSize = req.size;
  mi.memoryTypeIndex = memory_type(req.memoryTypeBits, host_visible);
  const VkResult r = vk.vkAllocateMemory(dev_, &mi, nullptr, &b.mem_);
  if (r != VK_SUCCESS) {
    fail("Vulkan: allocating {} bytes of {} memory failed: {} (device {})", bytes,
         host_visible ? "host-visible" : "device", result_name(r), caps_.name);
  }
  check(vk.vkBindBufferMemory(dev_, b.buf_, b.mem_, 0), "vkBindBufferMemory");
  if (host_visible) check(vk.vkMapMemory(dev_, b.mem_, 0, VK_WHOLE_SIZE, 0, &b.mapped_), "vkMapMemory");
  return b;
}

bool Runtime::use_pipeline_cache(const std::vector<uint8_t>& initial) {
  if (pipeline_cache_) vk.vkDestroyPipelineCache(dev_, pipeline_cache_, nullptr);
  pipeline_cache_ = nullptr;
  VkPipelineCacheCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  ci.initialDataSize = initial.size();
  ci.pInitialData = initial.empty() ? nullptr : initial.data();
  // A driver ignores data it did not write (the header names vendor, device and cache UUID); one that
  // refuses it outright gets an empty cache instead.
  if (vk.vkCreatePipelineCache(dev_, &ci, nullptr, &pipeline_cache_) == VK_SUCCESS) return !initial.empty();
  ci.initialDataSize = 0;
  ci.pInitialData = nullptr;
  check(vk.vkCreatePipelineCache(dev_, &ci, nullptr, &pipeline_cache_), "vkCreatePipelineCache");
  return false;
}

std::vector<uint8_t> Runtime::pipeline_cache_data() const {
  if (!pipeline_cache_) return {};
  size_t n = 0;
  check(vk.vkGetPipelineCacheData(dev_, pipeline_cache_, &n, nullptr), "vkGetPipelineCacheData");
  std::vector<uint8_t> data(n);
  check(vk.vkGetPipelineCacheData(dev_, pipeline_cache_, &n, data.data()), "vkGetPipelineCacheData");
  data.resize(n);
  return data;
}

Pipeline Runtime::pipeline(std::string_view shader, bool subgroups, uint32_t n_buffers, uint32_t push_bytes,
                           uint32_t local_size, const std::vector<uint32_t>& extra, ImageBinding image) {
  const ShaderCode* code = find_shader(shader, subgroups);
  if (!code) {
    fail("internal: no embedded Vulkan shader '{}'{}", shader, subgroups ? " with subgroup reductions" : "");
  }
  // glslang 11's cooperative-matrix types made valid (spirv_coopmat.h); other shaders pass unchanged.
  const std::vector<uint32_t> words =
      resolve_cooperative_matrix_types(std::vector<uint32_t>(code->words, code->words + code->n_words));
  return pipeline_from(subgroups ? std::string(shader) + "+subgroups" : std::string(shader), words, n_buffers,
                       push_bytes, local_size, extra, image);
}

Pipeline Runtime::pipeline_from(std::string_view name, const std::vector<uint32_t>& spirv, uint32_t n_buffers,
                                uint32_t push_bytes, uint32_t local_size, const std::vector<uint32_t>& extra,
                                ImageBinding image) {
  if (n_buffers > kBuffersPerSet) fail("internal: Vulkan pipeline {} binds {} buffers", name, n_buffers);
  Pipeline p;
  p.name = std::string(name);
  p.n_buffers = n_buffers;
  p.push_bytes = push_bytes;
  p.local_size = local_size;
  p.image = image;
  if (image.binding >= int(n_buffers))
    fail("internal: Vulkan pipeline {} has its image past its bindings", name);
  std::vector<VkDescriptorSetLayoutBinding> binds(n_buffers);
  for (uint32_t i = 0; i < n_buffers; ++i) {
    binds[i] = {};
    binds[i].binding = i;
    binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    binds[i].descriptorCount = 1;
    binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  if (image.binding >= 0) {
    VkDescriptorSetLayoutBinding& b = binds[size_t(image.binding)];
    b.descriptorType =
        image.storage ? VK_DESCRIPTOR_TYPE_STORAGE_IMAGE : VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER;
    if (!image.storage) b.pImmutableSamplers = &sampler_;
  }
  VkDescriptorSetLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  li.bindingCount = n_buffers;
  li.pBindings = binds.data();
  check(vk.vkCreateDescriptorSetLayout(dev_, &li, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pli{};
  pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p.set_layout;
  pli.pushConstantRangeCount = push_bytes ? 1 : 0;
  pli.pPushConstantRanges = &pr;
  check(vk.vkCreatePipelineLayout(dev_, &pli, nullptr, &p.layout), "vkCreatePipelineLayout");

  VkShaderModuleCreateInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  si.codeSize = spirv.size() * 4;
  si.pCode = spirv.data();
  VkShaderModule mod = nullptr;
  check(vk.vkCreateShaderModule(dev_, &si, nullptr, &mod), "vkCreateShaderModule");
  std::vector<uint32_t> values = {local_size};
  values.insert(values.end(), extra.begin(), extra.end());
  std::vector<VkSpecializationMapEntry> entries(values.size());
  for (uint32_t i = 0; i < values.size(); ++i) entries[i] = {i, 4 * i, 4};
  VkSpecializationInfo spec{uint32_t(entries.size()), entries.data(), values.size() * 4, values.data()};
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &spec;
  ci.layout = p.layout;
  if (pipeline_stats_) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  const VkResult r = vk.vkCreateComputePipelines(dev_, pipeline_cache_, 1, &ci, nullptr, &p.pipeline);
  vk.vkDestroyShaderModule(dev_, mod, nullptr);
  if (r != VK_SUCCESS) {
    destroy(p);
    fail("Vulkan: building the pipeline of shader {} failed: {} ({})", name, result_name(r), int(r));
  }
  if (pipeline_stats_) p.driver_stats = pipeline_statistics(p.pipeline);
  return p;
}

std::string Runtime::pipeline_statistics(VkPipeline pipeline) const {
  const auto get = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vk.vkGetInstanceProcAddr(instance(), "vkGetPipelineExecutableStatisticsKHR"));
  VkPipelineExecutableInfoKHR ei{};
  ei.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR;
  ei.pipeline = pipeline;
  ei.executableIndex = 0;  // a compute pipeline's one stage
  uint32_t n = 0;
  if (get(dev_, &ei, &n, nullptr) != VK_SUCCESS || n == 0) return {};
  std::vector<VkPipelineExecutableStatisticKHR> st(n);
  for (VkPipelineExecutableStatisticKHR& x : st)
    x.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
  if (get(dev_, &ei, &n, st.data()) != VK_SUCCESS) return {};
  std::string out;
  for (uint32_t i = 0; i < n; ++i) {
    const VkPipelineExecutableStatisticKHR& x = st[i];
    std::string v;
    switch (x.format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        v = x.value.b32 ? "yes" : "no";
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        v = std::to_string(x.value.i64);
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        v = std::to_string(x.value.u64);
        break;
      default:
        v = fmt::format("{:g}", x.value.f64);
        break;
    }
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", x.name, v);
  }
  return out;
}

void Runtime::destroy(Pipeline& p) {
  if (p.pipeline) vk.vkDestroyPipeline(dev_, p.pipeline, nullptr);
  if (p.layout) vk.vkDestroyPipelineLayout(dev_, p.layout, nullptr);
  if (p.set_layout) vk.vkDestroyDescriptorSetLayout(dev_, p.set_layout, nullptr);
  p.pipeline = nullptr;
  p.layout = nullptr;
  p.set_layout = nullptr;
}

void Runtime::begin() {
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  if (capture_.active) {
    if (capture_.recording) return;
    check(vk.vkBeginCommandBuffer(capture_.cmd, &bi), "vkBeginCommandBuffer");
    capture_.recording = true;
    return;
  }
  if (recording_) return;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vk.vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
  if (profiling_) vk.vkCmdResetQueryPool(cmd_, queries_, 0, 2 * kQueryPairs);
  recording_ = true;
}

namespace {

// The accesses a barrier makes available (the writes of the source stages) or visible (everything the
// destination stages do).
VkAccessFlags writes_of(VkPipelineStageFlags st) {
  return (st & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT ? VK_ACCESS_SHADER_WRITE_BIT : 0) |
         (st & VK_PIPELINE_STAGE_TRANSFER_BIT ? VK_ACCESS_TRANSFER_WRITE_BIT : 0);
}
VkAccessFlags accesses_of(VkPipelineStageFlags st) {
  return (st & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT
                                                    : 0) |
         (st & VK_PIPELINE_STAGE_TRANSFER_BIT ? VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT
                                              : 0) |
         (st & VK_PIPELINE_STAGE_HOST_BIT ? VK_ACCESS_HOST_READ_BIT : 0);
}

void record_barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkPipelineStageFlags dst) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = writes_of(src);
  mb.dstAccessMask = accesses_of(dst);
  vk.vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

}  // namespace

void Runtime::sync_before(VkPipelineStageFlags stage) {
  if (pending_src_ == 0) return;
  record_barrier(cur(), pending_src_, stage);
  pending_src_ = 0;
}

void Runtime::recorded(VkPipelineStageFlags stage) {
  (independent_ ? group_src_ : pending_src_) |= stage;
}

void Runtime::end_commands(VkCommandBuffer cb) {
  // A span of independent dispatches cut by a submission goes on in the next command buffer (behind this
  // barrier), still without barriers between its dispatches.
  pending_src_ |= group_src_;
  group_src_ = 0;
  if (pending_src_ != 0) {
    record_barrier(
        cb, pending_src_,
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT);
  }
  pending_src_ = 0;
  check(vk.vkEndCommandBuffer(cb), "vkEndCommandBuffer");
}

void Runtime::dispatch(const Pipeline& p, std::initializer_list<const Buffer*> buffers, const void* push,
                       uint32_t gx, uint32_t gy, uint32_t gz) {
  dispatch_with(p, nullptr, buffers, push, gx, gy, gz);
}

void Runtime::dispatch(const Pipeline& p, const Image& image, std::initializer_list<const Buffer*> buffers,
                       const void* push, uint32_t gx, uint32_t gy, uint32_t gz) {
  dispatch_with(p, &image, buffers, push, gx, gy, gz);
}

void Runtime::dispatch_with(const Pipeline& p, const Image* image,
                            std::initializer_list<const Buffer*> buffers, const void* push, uint32_t gx,
                            uint32_t gy, uint32_t gz) {
  const size_t bound = buffers.size() + (image ? 1 : 0);
  if (bound != p.n_buffers || (image != nullptr) != (p.image.binding >= 0)) {
    fail("internal: Vulkan pipeline {} takes {} bindings{}, given {}{}", p.name, p.n_buffers,
         p.image.binding >= 0 ? " (an image among them)" : "", bound, image ? " (an image among them)" : "");
  }
  if (gx == 0 || gy == 0 || gz == 0) return;
  if (gx > caps_.max_group_count[0] || gy > caps_.max_group_count[1] || gz > caps_.max_group_count[2]) {
    fail("Vulkan: {} needs {} x {} x {} work-groups, over the device's {} x {} x {}", p.name, gx, gy, gz,
         caps_.max_group_count[0], caps_.max_group_count[1], caps_.max_group_count[2]);
  }
  if (capture_.active && capture_.sets_left == 0) spoil_capture();
  if (!capture_.active && (desc_sets_left_ == 0 || (profiling_ && timed_.size() == kQueryPairs)))
    submit_and_wait();
  begin();
  VkDescriptorSetAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorPool = capture_.active ? capture_.pool : desc_pool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &p.set_layout;
  VkDescriptorSet set = nullptr;
  check(vk.vkAllocateDescriptorSets(dev_, &ai, &set), "vkAllocateDescriptorSets");
  --(capture_.active ? capture_.sets_left : desc_sets_left_);
  VkDescriptorBufferInfo infos[kBuffersPerSet];
  VkWriteDescriptorSet writes[kBuffersPerSet];
  uint32_t i = 0;
  VkDescriptorImageInfo image_info{};
  if (image) {
    image_info = {nullptr, image->view(), VK_IMAGE_LAYOUT_GENERAL};  // a sampler is the layout's
    writes[0] = {};
    writes[0].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[0].dstSet = set;
    writes[0].dstBinding = uint32_t(p.image.binding);
    writes[0].descriptorCount = 1;
    writes[0].descriptorType =
        p.image.storage ? VK_DESCRIPTOR_TYPE_STORAGE_IMAGE : VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER;
    writes[0].pImageInfo = &image_info;
    i = 1;
  }
  uint32_t binding = 0;
  for (const Buffer* b : buffers) {
    if (int(binding) == p.image.binding) ++binding;
    infos[i] = {b->get(), 0, std::min<VkDeviceSize>(b->bytes(), caps_.max_storage_range)};
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = binding++;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    ++i;
  }
  vk.vkUpdateDescriptorSets(dev_, i, writes, 0, nullptr);
  const VkCommandBuffer cb = cur();
  vk.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vk.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (p.push_bytes) vk.vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, push);
  sync_before(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
  size_t t = 0;
  // Profiling times the ordinary recording only (a capture is not made while profiling: the backend's
  // choice).
  if (profiling_ && !capture_.active) {
    auto it =
        std::find_if(times_.begin(), times_.end(), [&p](const KernelTime& k) { return k.name == p.name; });
    if (it == times_.end()) {
      times_.push_back({p.name, 0, 0, p.driver_stats});
      it = times_.end() - 1;
    }
    t = size_t(it - times_.begin());
    // Written once the commands before it (the last dispatch, behind the barrier) have finished their
    // compute stage: a top-of-pipe stamp would be written before the barrier waits, and charge the previous
    // dispatch's tail to this one.
    vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, queries_, 2 * uint32_t(timed_.size()));
  }
  vk.vkCmdDispatch(cb, gx, gy, gz);
  if (profiling_ && !capture_.active) {
    vk.vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                           2 * uint32_t(timed_.size()) + 1);
    timed_.push_back(t);
  }
  recorded(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
}

void Runtime::end_independent() {
  independent_ = false;
  pending_src_ |= group_src_;
  group_src_ = 0;
}

void Runtime::upload(const Buffer& dst, size_t offset, const void* src, size_t bytes) {
  if (offset + bytes > dst.bytes())
    fail("internal: Vulkan upload of {} bytes at {} past a buffer of {}", bytes, offset, dst.bytes());
  const uint8_t* s = static_cast<const uint8_t*>(src);
  while (bytes > 0) {
    // Copies start at 16-byte offsets of the ring (the copy alignment every device accepts).
    ring_used_ = (ring_used_ + 15) / 16 * 16;
    if (ring_used_ >= ring_.bytes()) submit_and_wait();
    // A staged upload inside a capture is this step's data: the capture still runs it, but cannot be
    // replayed (the ring holds other bytes by then).
    capture_.replayable = false;
    const size_t n = std::min(bytes, ring_.bytes() - ring_used_);
    std::memcpy(static_cast<uint8_t*>(ring_.mapped()) + ring_used_, s, n);
    begin();
    VkBufferCopy c{ring_used_, offset, n};
    sync_before(VK_PIPELINE_STAGE_TRANSFER_BIT);
    vk.vkCmdCopyBuffer(cur(), ring_.get(), dst.get(), 1, &c);
    recorded(VK_PIPELINE_STAGE_TRANSFER_BIT);
    ring_used_ += n;
    s += n;
    offset += n;
    bytes -= n;
  }
}

void Runtime::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes) {
  if (bytes == 0) return;
  if (src_offset + bytes > src.bytes() || dst_offset + bytes > dst.bytes())
    fail("internal: Vulkan copy of {} bytes outside its buffers", bytes);
  begin();
  VkBufferCopy c{src_offset, dst_offset, bytes};
  sync_before(VK_PIPELINE_STAGE_TRANSFER_BIT);
  vk.vkCmdCopyBuffer(cur(), src.get(), dst.get(), 1, &c);
  recorded(VK_PIPELINE_STAGE_TRANSFER_BIT);
}

void Runtime::fill(const Buffer& dst, size_t offset, size_t bytes, uint32_t word) {
  if (bytes == 0) return;
  begin();
  sync_before(VK_PIPELINE_STAGE_TRANSFER_BIT);
  vk.vkCmdFillBuffer(cur(), dst.get(), offset, bytes, word);
  recorded(VK_PIPELINE_STAGE_TRANSFER_BIT);
}

void Runtime::download_deferred(const Buffer& src, size_t offset, void* dst, size_t bytes) {
  if (!capture_.active || capture_.readback_used + bytes > capture_readback_.bytes())
    return download(src, offset, dst, bytes);
  begin();
  VkBufferCopy c{offset, capture_.readback_used, bytes};
  sync_before(VK_PIPELINE_STAGE_TRANSFER_BIT);
  vk.vkCmdCopyBuffer(cur(), src.get(), capture_readback_.get(), 1, &c);
  recorded(VK_PIPELINE_STAGE_TRANSFER_BIT);
  capture_.deferred.push_back({capture_.readback_used, bytes, dst});
  capture_.readback_used = (capture_.readback_used + bytes + 15) / 16 * 16;
}

void Runtime::download(const Buffer& src, size_t offset, void* dst, size_t bytes) {
  if (capture_.active) spoil_capture();
  uint8_t* d = static_cast<uint8_t*>(dst);
  while (bytes > 0) {
    const size_t n = std::min(bytes, readback_.bytes());
    begin();
    VkBufferCopy c{offset, 0, n};
    sync_before(VK_PIPELINE_STAGE_TRANSFER_BIT);
    vk.vkCmdCopyBuffer(cmd_, src.get(), readback_.get(), 1, &c);
    recorded(VK_PIPELINE_STAGE_TRANSFER_BIT);
    submit_and_wait();
    std::memcpy(d, readback_.mapped(), n);
    d += n;
    offset += n;
    bytes -= n;
  }
}

void Runtime::finish() {
  if (capture_.active) return spoil_capture();
  if (recording_) submit_and_wait();
}

namespace {

// Submits one command buffer and waits for it; adds the time blocked in the wait to waited_ns.
void submit_one(VkQueue q, VkDevice dev, VkFence fence, VkCommandBuffer cmd, uint64_t& waited_ns) {
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  check(vk.vkQueueSubmit(q, 1, &si, fence), "vkQueueSubmit");
  const auto t0 = std::chrono::steady_clock::now();
  check(vk.vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  waited_ns += uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  check(vk.vkResetFences(dev, 1, &fence), "vkResetFences");
}

}  // namespace

void Runtime::submit_and_wait() {
  if (capture_.active) return spoil_capture();
  if (!recording_) begin();
  end_commands(cmd_);
  recording_ = false;
  submit_one(queue_, dev_, fence_, cmd_, waited_ns_);
  check(vk.vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  check(vk.vkResetDescriptorPool(dev_, desc_pool_, 0), "vkResetDescriptorPool");
  desc_sets_left_ = kDescriptorSets;
  ring_used_ = 0;
  if (profiling_ && !timed_.empty()) {
    std::vector<uint64_t>& ts = ts_;
    ts.resize(2 * timed_.size());
    check(vk.vkGetQueryPoolResults(dev_, queries_, 0, uint32_t(ts.size()), ts.size() * 8, ts.data(), 8,
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
    for (size_t i = 0; i < timed_.size(); ++i) {
      KernelTime& k = times_[timed_[i]];
      ++k.calls;
      k.ns += double(ts[2 * i + 1] - ts[2 * i]) * caps_.timestamp_period_ns;
    }
    timed_.clear();
  }
}

void Runtime::begin_capture() {
  finish();  // what was recorded before runs before the capture
  drop_capture();
  capture_.active = true;
  capture_.replayable = true;
  capture_.recording = false;
  capture_.readback_used = 0;
  capture_.deferred.clear();
}

// Submits the capture's recording as ordinary work and delivers its deferred downloads; the capture ends
// without being kept and recording continues in the ordinary command buffer.
void Runtime::spoil_capture() {
  capture_.replayable = false;
  end_capture();
}

bool Runtime::end_capture() {
  if (!capture_.active) return false;
  capture_.active = false;
  if (capture_.recording) {
    end_commands(capture_.cmd);
    capture_.recording = false;
    submit_one(queue_, dev_, fence_, capture_.cmd, waited_ns_);
    ring_used_ = 0;  // the capture's staged uploads have been read
  }
  for (const Deferred& d : capture_.deferred)
    std::memcpy(d.dst, static_cast<const uint8_t*>(capture_readback_.mapped()) + d.readback_offset, d.bytes);
  capture_.kept = capture_.replayable;
  if (!capture_.kept) drop_capture();
  return capture_.kept;
}

void Runtime::drop_capture() {
  if (capture_.active) fail("internal: Vulkan capture dropped while recording");
  capture_.kept = false;
  capture_.deferred.clear();
  check(vk.vkResetCommandBuffer(capture_.cmd, 0), "vkResetCommandBuffer");
  check(vk.vkResetDescriptorPool(dev_, capture_.pool, 0), "vkResetDescriptorPool");
  capture_.sets_left = kDescriptorSets;
}

void Runtime::replay() {
  if (!capture_.kept) fail("internal: Vulkan replay without a kept capture");
  finish();
  submit_one(queue_, dev_, fence_, capture_.cmd, waited_ns_);
  for (const Deferred& d : capture_.deferred)
    std::memcpy(d.dst, static_cast<const uint8_t*>(capture_readback_.mapped()) + d.readback_offset, d.bytes);
}

void Runtime::set_deferred_destination(size_t k, void* dst) {
  if (k >= capture_.deferred.size())
    fail("internal: Vulkan capture has {} deferred downloads, not {}", capture_.deferred.size(), k + 1);
  capture_.deferred[k].dst = dst;
}

void Runtime::step_input(size_t slot_offset, const void* src, size_t bytes, const Buffer& dst,
                         size_t offset) {
  if (!capture_.active) return upload(dst, offset, src, bytes);
  if (slot_offset + bytes > step_in_.bytes())
    fail("internal: Vulkan step input of {} bytes at {}", bytes, slot_offset);
  std::memcpy(static_cast<uint8_t*>(step_in_.mapped()) + slot_offset, src, bytes);
  begin();
  VkBufferCopy c{slot_offset, offset, bytes};
  sync_before(VK_PIPELINE_STAGE_TRANSFER_BIT);
  vk.vkCmdCopyBuffer(cur(), step_in_.get(), dst.get(), 1, &c);
  recorded(VK_PIPELINE_STAGE_TRANSFER_BIT);
}

void Runtime::set_step_input(size_t slot_offset, const void* src, size_t bytes) {
  if (slot_offset + bytes > step_in_.bytes())
    fail("internal: Vulkan step input of {} bytes at {}", bytes, slot_offset);
  std::memcpy(static_cast<uint8_t*>(step_in_.mapped()) + slot_offset, src, bytes);
}

std::vector<KernelTime> Runtime::kernel_times() {
  if (!profiling_) return {};
  finish();
  std::vector<KernelTime> v;
  for (const KernelTime& k : times_) {
    if (k.calls) v.push_back(k);
  }
  return v;
}

void Runtime::reset_kernel_times() {
  finish();
  for (KernelTime& k : times_) k.calls = 0, k.ns = 0;
}

}  // namespace tilellm::vulkan
