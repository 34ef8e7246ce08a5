// Vulkan device enumeration, capabilities and profiles (device.h).
#include "backends/vulkan/device.h"

#include <algorithm>
#include <cstring>

#include "backends/vulkan/error.h"

namespace tilellm::vulkan {

const std::vector<DeviceProfile>& profiles() {
  // name, shared memory, invocations, subgroup, subgroup arithmetic, 16-bit storage, fp16 arithmetic,
  // 8-bit storage, integer dot, cooperative matrix, max allocation, max storage range, 2D image side.
  // Sources: docs/VULKAN.md.
  static const std::vector<DeviceProfile> kProfiles = {
      {"none", UINT32_MAX, UINT32_MAX, 0, true, true, true, true, true, true, UINT64_MAX, UINT64_MAX,
       UINT32_MAX},
      {"powervr-cxt", 32768, 512, 128, true, true, false, true, false, false, uint64_t(2) << 30,
       uint64_t(1) << 30, 8192},
      {"powervr-rogue", 4096, 512, 32, false, true, false, false, false, false, uint64_t(256) << 20,
       uint64_t(128) << 20, 8192},
      {"mali-valhall", 32768, 512, 16, true, true, true, true, true, false, uint64_t(1) << 30,
       uint64_t(1) << 30, 65536},
      {"adreno-7xx", 32768, 1024, 64, true, true, true, true, true, false, uint64_t(1) << 30,
       uint64_t(1) << 30, 16384},
      {"no-16bit", UINT32_MAX, UINT32_MAX, 0, true, false, false, false, false, false, UINT64_MAX, UINT64_MAX,
       UINT32_MAX},
  };
  return kProfiles;
}

const DeviceProfile& find_profile(std::string_view name) {
  std::string known;
  for (const DeviceProfile& p : profiles()) {
    if (p.name == name) return p;
    known += known.empty() ? "" : ", ";
    known += p.name;
  }
  fail("unknown Vulkan device profile '{}' (known: {})", name, known);
}

void apply_profile(Capabilities& c, const DeviceProfile& p) {
  c.profile = std::string(p.name);
  c.shared_memory_bytes = std::min(c.shared_memory_bytes, p.shared_memory_bytes);
  c.max_invocations = std::min(c.max_invocations, p.max_invocations);
  for (uint32_t& g : c.max_group_size) g = std::min(g, c.max_invocations);
  if (p.subgroup_size) {
    c.subgroup_size = p.subgroup_size;
    c.min_subgroup_size = c.max_subgroup_size = p.subgroup_size;
    c.subgroup_size_control = false;
  }
  c.subgroup_arithmetic = c.subgroup_arithmetic && p.subgroup_arithmetic;
  c.storage16 = c.storage16 && p.storage16;
  c.float16 = c.float16 && p.float16;
  c.storage8 = c.storage8 && p.storage8;
  c.int8 = c.int8 && p.storage8;
  c.integer_dot = c.integer_dot && p.integer_dot;
  c.integer_dot_accelerated = c.integer_dot_accelerated && c.integer_dot;
  c.coopmat_khr = c.coopmat_khr && p.coopmat;
  c.coopmat_nv2 = c.coopmat_nv2 && p.coopmat;
  c.coopmat_f16 = c.coopmat_f16 && p.coopmat && p.float16;
  c.max_alloc_bytes = std::min(c.max_alloc_bytes, p.max_alloc_bytes);
  c.max_storage_range = std::min(c.max_storage_range, p.max_storage_range);
  c.image2d_max = std::min(c.image2d_max, p.image2d_max);
}

std::vector<VkPhysicalDevice> list_devices() {
  VkInstance inst = instance();
  if (!inst) return {};
  uint32_t n = 0;
  if (vk.vkEnumeratePhysicalDevices(inst, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkPhysicalDevice> v(n);
  if (vk.vkEnumeratePhysicalDevices(inst, &n, v.data()) != VK_SUCCESS) return {};
  v.resize(n);
  // Only devices of Vulkan 1.1 or later (the shaders are SPIR-V 1.3).
  std::erase_if(v, [](VkPhysicalDevice d) {
    VkPhysicalDeviceProperties p;
    vk.vkGetPhysicalDeviceProperties(d, &p);
    return p.apiVersion < VK_API_VERSION_1_1;
  });
  return v;
}

std::string version_string(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

namespace {

std::vector<std::string> device_extensions(VkPhysicalDevice d) {
  uint32_t n = 0;
  vk.vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> e(n);
  vk.vkEnumerateDeviceExtensionProperties(d, nullptr, &n, e.data());
  std::vector<std::string> names;
  for (uint32_t i = 0; i < n; ++i) names.emplace_back(e[i].extensionName);
  return names;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

// Whether the cooperative-matrix property list has the shape matmul_coopmat.comp uses (device.h).
bool coopmat_f16_listed(VkPhysicalDevice d) {
  using Fn = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, CoopmatProperties*);
  const auto fn = reinterpret_cast<Fn>(
      vk.vkGetInstanceProcAddr(instance(), "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!fn) return false;
  uint32_t n = 0;
  if (fn(d, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<CoopmatProperties> ps(n);
  if (fn(d, &n, ps.data()) != VK_SUCCESS) return false;
  for (const CoopmatProperties& p : ps) {
    if (p.MSize == 16 && p.NSize == 16 && p.KSize == 16 && p.AType == kComponentFloat16 &&
        p.BType == kComponentFloat16 && p.CType == kComponentFloat32 && p.ResultType == kComponentFloat32 &&
        p.scope == kScopeSubgroup && !p.saturatingAccumulation)
      return true;
  }
  return false;
}

}  // namespace

bool has_device_extension(VkPhysicalDevice d, std::string_view name) {
  for (const std::string& e : device_extensions(d)) {
    if (e == name) return true;
  }
  return false;
}

uint32_t compute_queue_family(VkPhysicalDevice d) {
  uint32_t nq = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> q(nq);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, q.data());
  uint32_t any = UINT32_MAX;
  for (uint32_t i = 0; i < nq; ++i) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (!(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) return i;
    if (any == UINT32_MAX) any = i;
  }
  return any;
}

Capabilities query_capabilities(VkPhysicalDevice d) {
  Capabilities c;
  const std::vector<std::string> ext = device_extensions(d);
  auto has = [&ext](const char* name) { return std::find(ext.begin(), ext.end(), name) != ext.end(); };

  VkPhysicalDeviceProperties props;
  vk.vkGetPhysicalDeviceProperties(d, &props);
  const bool v12 = props.apiVersion >= VK_API_VERSION_1_2, v13 = props.apiVersion >= VK_API_VERSION_1_3;

  VkPhysicalDeviceSubgroupProperties sub{};
  sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceMaintenance3Properties m3{};
  m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  sub.pNext = &m3;
  VkPhysicalDeviceSubgroupSizeControlProperties ssc{};
  ssc.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
  VkPhysicalDeviceDriverProperties drv{};
  drv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceShaderIntegerDotProductProperties idp{};
  idp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES;
  const bool dot_listed = v13 || has(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  void** tail = &m3.pNext;
  if (dot_listed) {
    *tail = &idp;
    tail = &idp.pNext;
  }
  const bool size_control = v13 || has(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  if (size_control) {
    *tail = &ssc;
    tail = &ssc.pNext;
  }
  if (v12 || has(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME)) {
    *tail = &drv;
    tail = &drv.pNext;
  }
  VkPhysicalDeviceProperties2 p2{};
  p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  p2.pNext = &sub;
  vk.vkGetPhysicalDeviceProperties2(d, &p2);

  c.name = props.deviceName;
  c.device_type = type_name(props.deviceType);
  c.api_version = props.apiVersion;
  c.driver_version = props.driverVersion;
  c.vendor_id = props.vendorID;
  c.device_id = props.deviceID;
  c.driver_name = drv.driverName;
  c.driver_info = drv.driverInfo;
  c.subgroup_size = sub.subgroupSize;
  const bool compute_subgroups = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  c.subgroup_basic = compute_subgroups && (sub.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
  c.subgroup_arithmetic = compute_subgroups && (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  c.subgroup_shuffle = compute_subgroups && (sub.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  if (size_control) {
    c.min_subgroup_size = ssc.minSubgroupSize;
    c.max_subgroup_size = ssc.maxSubgroupSize;
  }
  const VkPhysicalDeviceLimits& L = props.limits;
  c.shared_memory_bytes = L.maxComputeSharedMemorySize;
  c.max_invocations = L.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    c.max_group_size[i] = L.maxComputeWorkGroupSize[i];
    c.max_group_count[i] = L.maxComputeWorkGroupCount[i];
  }
  c.max_alloc_bytes = m3.maxMemoryAllocationSize;
  c.max_storage_range = L.maxStorageBufferRange;
  c.image2d_max = L.maxImageDimension2D;
  VkFormatProperties fp{};
  vk.vkGetPhysicalDeviceFormatProperties(d, VK_FORMAT_R32G32B32A32_UINT, &fp);
  c.image_weights = (fp.optimalTilingFeatures & VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT) != 0;
  vk.vkGetPhysicalDeviceFormatProperties(d, VK_FORMAT_R16G16B16A16_SFLOAT, &fp);
  c.image_kv = (fp.optimalTilingFeatures & VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT) != 0;
  c.timestamp_period_ns = L.timestampPeriod;

  // Features: 16-bit storage (1.1), fp16 / int8 arithmetic and 8-bit storage (1.2 or their extensions),
  // subgroup size control (1.3 or EXT).
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceShaderFloat16Int8Features f16{};
  f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  VkPhysicalDevice8BitStorageFeatures s8{};
  s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  VkPhysicalDeviceSubgroupSizeControlFeatures sscf{};
  sscf.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  VkPhysicalDeviceShaderIntegerDotProductFeatures idf{};
  idf.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2.pNext = &s16;
  void** ftail = &s16.pNext;
  if (v12 || has(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) {
    *ftail = &f16;
    ftail = &f16.pNext;
  }
  if (v12 || has(VK_KHR_8BIT_STORAGE_EXTENSION_NAME)) {
    *ftail = &s8;
    ftail = &s8.pNext;
  }
  if (size_control) {
    *ftail = &sscf;
    ftail = &sscf.pNext;
  }
  if (dot_listed) {
    *ftail = &idf;
    ftail = &idf.pNext;
  }
  CoopmatFeatures cmf;
  if (has("VK_KHR_cooperative_matrix")) {
    *ftail = &cmf;
    ftail = &cmf.pNext;
  }
  vk.vkGetPhysicalDeviceFeatures2(d, &f2);
  c.storage16 = s16.storageBuffer16BitAccess;
  c.float16 = f16.shaderFloat16;
  c.int8 = f16.shaderInt8;
  c.storage8 = s8.storageBuffer8BitAccess;
  c.subgroup_size_control = sscf.subgroupSizeControl && sscf.computeFullSubgroups;
  c.integer_dot = dot_listed && idf.shaderIntegerDotProduct;
  c.integer_dot_accelerated = c.integer_dot && idp.integerDotProduct4x8BitPackedMixedSignednessAccelerated;
  c.coopmat_khr = has("VK_KHR_cooperative_matrix");
  c.coopmat_nv2 = has("VK_NV_cooperative_matrix2");
  c.coopmat_f16 = c.coopmat_khr && cmf.cooperativeMatrix && c.float16 && coopmat_f16_listed(d);

  const uint32_t family = compute_queue_family(d);
  if (family != UINT32_MAX) {
    uint32_t nq = 0;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> q(nq);
    vk.vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, q.data());
    c.timestamps = q[family].timestampValidBits > 0;
  }

  VkPhysicalDeviceMemoryProperties mem;
  vk.vkGetPhysicalDeviceMemoryProperties(d, &mem);
  c.heaps.resize(mem.memoryHeapCount);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
    c.heaps[h].bytes = mem.memoryHeaps[h].size;
    c.heaps[h].device_local = mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    if (c.heaps[h].device_local) c.device_local_bytes = std::max(c.device_local_bytes, c.heaps[h].bytes);
  }
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
    const VkMemoryType& mt = mem.memoryTypes[t];
    if (mt.propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
      c.heaps[mt.heapIndex].host_visible = true;
      if (c.heaps[mt.heapIndex].device_local && c.heaps[mt.heapIndex].bytes == c.device_local_bytes)
        c.unified_memory = true;
    }
  }
  return c;
}

std::string describe(const Capabilities& c) {
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  std::string s;
  s += fmt::format("  name: {} ({})\n", c.name, c.device_type);
  s += fmt::format("  api: {} | driver: {} {} ({})\n", version_string(c.api_version), c.driver_name,
                   c.driver_info, c.driver_version);
  s += fmt::format("  vendor id: 0x{:04x} | device id: 0x{:04x}\n", c.vendor_id, c.device_id);
  s += fmt::format("  profile: {}\n", c.profile);
  s += fmt::format("  subgroup size: {} (size control: {}, range {}..{})\n", c.subgroup_size,
                   yes(c.subgroup_size_control), c.min_subgroup_size, c.max_subgroup_size);
  s += fmt::format("  subgroup operations in compute: basic {}, arithmetic {}, shuffle {}\n",
                   yes(c.subgroup_basic), yes(c.subgroup_arithmetic), yes(c.subgroup_shuffle));
  s += fmt::format("  shared memory: {} bytes\n", c.shared_memory_bytes);
  s += fmt::format("  max work-group: {} invocations, size {} x {} x {}, count {} x {} x {}\n",
                   c.max_invocations, c.max_group_size[0], c.max_group_size[1], c.max_group_size[2],
                   c.max_group_count[0], c.max_group_count[1], c.max_group_count[2]);
  s += fmt::format("  16-bit storage: {} | fp16 arithmetic: {} | 8-bit storage: {} | int8: {}\n",
                   yes(c.storage16), yes(c.float16), yes(c.storage8), yes(c.int8));
  s += fmt::format(
      "  integer dot product: {} (4x8-bit packed, mixed signs, accelerated: {}) | cooperative "
      "matrix: KHR {} (16x16x16 fp16 with fp32 sums: {}), NV2 {}\n",
      yes(c.integer_dot), yes(c.integer_dot_accelerated), yes(c.coopmat_khr), yes(c.coopmat_f16),
      yes(c.coopmat_nv2));
  s += fmt::format("  max allocation: {} MiB | max storage buffer range: {} MiB | image 2D: {}\n",
                   c.max_alloc_bytes >> 20, c.max_storage_range >> 20, c.image2d_max);
  s += fmt::format("  images: RGBA32UI sampled (weights): {} | RGBA16F storage (KV cache): {}\n",
                   yes(c.image_weights), yes(c.image_kv));
  s += fmt::format("  timestamps: {} ({} ns a tick)\n", yes(c.timestamps), c.timestamp_period_ns);
  for (size_t h = 0; h < c.heaps.size(); ++h) {
    s += fmt::format("  memory heap {}: {} MiB{}{}\n", h, c.heaps[h].bytes >> 20,
                     c.heaps[h].device_local ? ", device-local" : "",
                     c.heaps[h].host_visible ? ", host-visible" : "");
  }
  s += fmt::format("  unified memory (device-local and host-visible): {}", yes(c.unified_memory));
  return s;
}

}  // namespace tilellm::vulkan
