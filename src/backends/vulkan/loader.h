// The Vulkan runtime, loaded when first used: the binary does not link libvulkan, so it starts on a machine
// without a Vulkan loader, runs everything else there, and lists this backend as unavailable with the
// reason. Every entry point the backend calls is a function pointer in `vk` (below), resolved with
// vkGetInstanceProcAddr once the library is open (global functions), once an instance exists (instance
// functions) and once a device exists (device functions; resolved through the instance, so one table
// serves every device of the process).
//
// The library is libvulkan.so.1 (the Khronos loader every Linux Vulkan driver plugs into); the environment
// variable TILELLM_VULKAN_LIBRARY names another file instead (tests point it at a path that does not exist
// to run as a machine without Vulkan would).
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace tilellm::vulkan {

// The entry points the backend uses (X-macro: TL_VK_GLOBAL / TL_VK_INSTANCE / TL_VK_DEVICE lists).
#define TL_VK_GLOBAL_FUNCTIONS(X) \
  X(vkCreateInstance)             \
  X(vkEnumerateInstanceVersion)   \
  X(vkEnumerateInstanceExtensionProperties)

#define TL_VK_INSTANCE_FUNCTIONS(X)           \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkDestroyDevice)                          \
  X(vkGetDeviceQueue)                         \
  X(vkCreateBuffer)                           \
  X(vkDestroyBuffer)                          \
  X(vkGetBufferMemoryRequirements)            \
  X(vkAllocateMemory)                         \
  X(vkFreeMemory)                             \
  X(vkBindBufferMemory)                       \
  X(vkCreateImage)                            \
  X(vkDestroyImage)                           \
  X(vkGetImageMemoryRequirements)             \
  X(vkBindImageMemory)                        \
  X(vkCreateImageView)                        \
  X(vkDestroyImageView)                       \
  X(vkCreateSampler)                          \
  X(vkDestroySampler)                         \
  X(vkGetPhysicalDeviceFormatProperties)      \
  X(vkCmdCopyBufferToImage)                   \
  X(vkCmdCopyImageToBuffer)                   \
  X(vkMapMemory)                              \
  X(vkUnmapMemory)                            \
  X(vkCreateShaderModule)                     \
  X(vkDestroyShaderModule)                    \
  X(vkCreateDescriptorSetLayout)              \
  X(vkDestroyDescriptorSetLayout)             \
  X(vkCreatePipelineLayout)                   \
  X(vkDestroyPipelineLayout)                  \
  X(vkCreateComputePipelines)                 \
  X(vkDestroyPipeline)                        \
  X(vkCreatePipelineCache)                    \
  X(vkDestroyPipelineCache)                   \
  X(vkGetPipelineCacheData)                   \
  X(vkCreateDescriptorPool)                   \
  X(vkDestroyDescriptorPool)                  \
  X(vkResetDescriptorPool)                    \
  X(vkAllocateDescriptorSets)                 \
  X(vkUpdateDescriptorSets)                   \
  X(vkCreateCommandPool)                      \
  X(vkDestroyCommandPool)                     \
  X(vkAllocateCommandBuffers)                 \
  X(vkBeginCommandBuffer)                     \
  X(vkEndCommandBuffer)                       \
  X(vkResetCommandBuffer)                     \
  X(vkCmdBindPipeline)                        \
  X(vkCmdBindDescriptorSets)                  \
  X(vkCmdPushConstants)                       \
  X(vkCmdDispatch)                            \
  X(vkCmdPipelineBarrier)                     \
  X(vkCmdCopyBuffer)                          \
  X(vkCmdFillBuffer)                          \
  X(vkCmdResetQueryPool)                      \
  X(vkCmdWriteTimestamp)                      \
  X(vkCreateQueryPool)                        \
  X(vkDestroyQueryPool)                       \
  X(vkGetQueryPoolResults)                    \
  X(vkCreateFence)                            \
  X(vkDestroyFence)                           \
  X(vkResetFences)                            \
  X(vkWaitForFences)                          \
  X(vkQueueSubmit)                            \
  X(vkDeviceWaitIdle)

struct Api {
#define TL_VK_MEMBER(name) PFN_##name name = nullptr;
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  TL_VK_GLOBAL_FUNCTIONS(TL_VK_MEMBER)
  TL_VK_INSTANCE_FUNCTIONS(TL_VK_MEMBER)
#undef TL_VK_MEMBER
};

// The process's table. Global functions are set once the library loads; instance functions by
// instance() below.
extern Api vk;

// Loads the library on the first call; "" when it is loaded, else one line saying why it could not be.
const std::string& library_error();

// The process's one VkInstance (Vulkan 1.1), created on first use with the instance functions resolved;
// null with `error` set when the library is missing or instance creation fails (the reason in one line).
VkInstance instance();
const std::string& instance_error();

}  // namespace tilellm::vulkan
