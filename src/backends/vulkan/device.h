// Vulkan devices: enumeration, the capability struct every shader variant is chosen from, and the device
// profiles that clamp it to real mobile GPUs' published limits (numbers and sources: docs/VULKAN.md), so the
// constrained paths run and are tested on any Vulkan 1.1 device (lavapipe in CI). Variants are picked from
// Capabilities only, never from vendor or device-name strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/vulkan/loader.h"

namespace tilellm::vulkan {

// VK_KHR_cooperative_matrix's structures (Vulkan 1.3.255 headers; Debian bookworm's 1.3.239 lack them), with
// the registry's values, so that the query builds against either.
constexpr VkStructureType kCoopmatFeaturesType = VkStructureType(1000506000);
constexpr VkStructureType kCoopmatPropertiesType = VkStructureType(1000506001);
constexpr uint32_t kComponentFloat16 = 0, kComponentFloat32 = 1, kScopeSubgroup = 3;
struct CoopmatFeatures {
  VkStructureType sType = kCoopmatFeaturesType;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};
struct CoopmatProperties {
  VkStructureType sType = kCoopmatPropertiesType;
  void* pNext = nullptr;
  uint32_t MSize = 0, NSize = 0, KSize = 0;
  uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0;  // VkComponentTypeKHR
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0;  // VkScopeKHR
};

struct MemoryHeap {
  uint64_t bytes = 0;
  bool device_local = false;
  bool host_visible = false;  // some memory type of this heap is host-visible
};

// What the shaders may rely on, queried once per physical device, then clamped by the profile.
struct Capabilities {
  // Identification (printed, never used to choose a variant).
  std::string name, driver_name, driver_info, device_type;
  uint32_t api_version = 0, driver_version = 0, vendor_id = 0, device_id = 0;

  uint32_t subgroup_size = 0;                             // VkPhysicalDeviceSubgroupProperties::subgroupSize
  uint32_t min_subgroup_size = 0, max_subgroup_size = 0;  // size control (1.3 / EXT); 0: not reported
  bool subgroup_size_control = false;
  bool subgroup_arithmetic = false;  // subgroupAdd/Max in compute shaders (the reductions' subgroup path)
  bool subgroup_basic = false, subgroup_shuffle = false;
  uint32_t shared_memory_bytes = 0;  // maxComputeSharedMemorySize
  uint32_t max_invocations = 0;      // maxComputeWorkGroupInvocations
  uint32_t max_group_size[3] = {0, 0, 0};
  uint32_t max_group_count[3] = {0, 0, 0};
  bool storage16 = false;                // storageBuffer16BitAccess
  bool float16 = false;                  // shaderFloat16 (fp16 arithmetic)
  bool storage8 = false;                 // storageBuffer8BitAccess
  bool int8 = false;                     // shaderInt8
  bool integer_dot = false;              // shaderIntegerDotProduct (1.3 or VK_KHR_shader_integer_dot_product)
  bool integer_dot_accelerated = false;  // ...4x8BitPackedMixedSignednessAccelerated (printed only)
  bool coopmat_khr = false;              // VK_KHR_cooperative_matrix listed
  bool coopmat_nv2 = false;              // VK_NV_cooperative_matrix2 listed
  // The cooperativeMatrix feature, and the property list has a subgroup-scope 16 x 16 x 16 shape with fp16
  // A and B and fp32 C and result (shaders/matmul_coopmat.comp's; every NVIDIA, AMD RDNA3 and Intel Arc
  // driver that has the extension lists it).
  bool coopmat_f16 = false;
  uint64_t max_alloc_bytes = 0;    // maxMemoryAllocationSize
  uint64_t max_storage_range = 0;  // maxStorageBufferRange: the most bytes one binding may address
  uint32_t image2d_max = 0;        // maxImageDimension2D
  // The image formats of the image paths, with optimal tiling: RGBA32UI sampled in shaders (weights,
  // --gpu-memory image) and RGBA16F as a storage image (the KV cache, --kv-memory image).
  bool image_weights = false, image_kv = false;
  float timestamp_period_ns = 0;  // ns per timestamp tick
  bool timestamps = false;        // the compute queue writes timestamps (timestampValidBits > 0)
  std::vector<MemoryHeap> heaps;
  bool unified_memory = false;      // a device-local heap is host-visible (mobile SoCs, CPU drivers)
  uint64_t device_local_bytes = 0;  // the largest device-local heap

  std::string profile = "none";  // the device profile applied (profiles())
};

// A GPU family's published limits: apply_profile() takes the minimum of each limit and the device's and
// turns off what the family lacks. A zero subgroup size keeps the device's.
struct DeviceProfile {
  std::string_view name;
  uint32_t shared_memory_bytes;
  uint32_t max_invocations;
  uint32_t subgroup_size;  // the family's subgroup width the host logic must plan for (0: the device's)
  bool subgroup_arithmetic, storage16, float16, storage8, integer_dot, coopmat;
  uint64_t max_alloc_bytes;
  uint64_t max_storage_range;
  uint32_t image2d_max;  // maxImageDimension2D
};

// "none" first (no clamping), then the GPU families.
const std::vector<DeviceProfile>& profiles();
// Throws tilellm::Error listing the known names for an unknown one.
const DeviceProfile& find_profile(std::string_view name);
void apply_profile(Capabilities& caps, const DeviceProfile& p);

// The physical devices of the process's instance (empty when there is no instance: loader.h says why).
std::vector<VkPhysicalDevice> list_devices();
Capabilities query_capabilities(VkPhysicalDevice d);
// The queue family the runtime submits to: one with compute and without graphics where the device has it
// (a discrete GPU's compute engines, as other compute engines choose), else the first with compute;
// UINT32_MAX when none has compute.
uint32_t compute_queue_family(VkPhysicalDevice d);
// Whether the device lists the extension.
bool has_device_extension(VkPhysicalDevice d, std::string_view name);
// "  key: value" lines, for `tilellm devices`.
std::string describe(const Capabilities& c);
// "1.3.230"
std::string version_string(uint32_t v);

}  // namespace tilellm::vulkan
