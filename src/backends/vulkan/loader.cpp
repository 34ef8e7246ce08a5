// The Vulkan loader opened at run time and the process's instance (see loader.h).
#include "backends/vulkan/loader.h"

#include <dlfcn.h>

#include <cstdlib>

#include "backends/vulkan/error.h"

namespace tilellm::vulkan {

Api vk;

namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    const char* env = std::getenv("TILELLM_VULKAN_LIBRARY");
    const std::string name = env && *env ? env : "libvulkan.so.1";
    l.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!l.handle) {
      const char* why = dlerror();
      l.error = name + " could not be loaded (" + (why ? why : "unknown reason") +
                "): install the Vulkan loader and a driver (Debian: libvulkan1 and e.g. mesa-vulkan-drivers)";
      return l;
    }
    vk.vkGetInstanceProcAddr =
        reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(l.handle, "vkGetInstanceProcAddr"));
    if (!vk.vkGetInstanceProcAddr) {
      l.error = name + " has no vkGetInstanceProcAddr: not a Vulkan loader";
      return l;
    }
#define TL_VK_LOAD_GLOBAL(fn) vk.fn = reinterpret_cast<PFN_##fn>(vk.vkGetInstanceProcAddr(nullptr, #fn));
    TL_VK_GLOBAL_FUNCTIONS(TL_VK_LOAD_GLOBAL)
#undef TL_VK_LOAD_GLOBAL
    if (!vk.vkCreateInstance) l.error = name + " has no vkCreateInstance: not a Vulkan loader";
    return l;
  }();
  return lib;
}

struct Instance {
  VkInstance handle = nullptr;
  std::string error;
};

const Instance& the_instance() {
  static const Instance inst = [] {
    Instance in;
    if (!library_error().empty()) {
      in.error = library_error();
      return in;
    }
    uint32_t version = VK_API_VERSION_1_0;
    if (vk.vkEnumerateInstanceVersion) vk.vkEnumerateInstanceVersion(&version);
    if (version < VK_API_VERSION_1_1) {
      in.error = fmt::format("the Vulkan loader supports API {}.{}; TileLLM needs 1.1",
                             VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
      return in;
    }
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "tilellm";
    app.pEngineName = "tilellm";
    app.apiVersion = version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_1;
    VkInstanceCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ci.pApplicationInfo = &app;
    const VkResult r = vk.vkCreateInstance(&ci, nullptr, &in.handle);
    if (r != VK_SUCCESS) {
      in.handle = nullptr;
      in.error = fmt::format("vkCreateInstance failed: {} ({})", result_name(r), int(r));
      return in;
    }
#define TL_VK_LOAD_INSTANCE(fn) vk.fn = reinterpret_cast<PFN_##fn>(vk.vkGetInstanceProcAddr(in.handle, #fn));
    TL_VK_INSTANCE_FUNCTIONS(TL_VK_LOAD_INSTANCE)
#undef TL_VK_LOAD_INSTANCE
    // Every function the backend calls must exist (a 1.1 loader has them all).
    std::string missing;
#define TL_VK_CHECK_LOADED(fn) \
  if (!vk.fn) missing += missing.empty() ? #fn : ", " #fn;
    TL_VK_INSTANCE_FUNCTIONS(TL_VK_CHECK_LOADED)
#undef TL_VK_CHECK_LOADED
    if (!missing.empty()) {
      in.error = "the Vulkan loader lacks " + missing;
      in.handle = nullptr;
    }
    return in;
  }();
  return inst;
}

}  // namespace

const std::string& library_error() {
  return library().error;
}

VkInstance instance() {
  return the_instance().handle;
}

const std::string& instance_error() {
  return the_instance().error;
}

}  // namespace tilellm::vulkan
