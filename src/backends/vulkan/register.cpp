// The Vulkan backend's registry entry (backends/registry.h): MNN type 7, available when the Vulkan loader
// loads (loader.h), an instance can be made and it lists a Vulkan 1.1 device; its own options --vk-subgroups,
// --vk-coopmat, --vk-matvec and --vk-cache (the pipeline cache on disk); the factory, the start-time
// measurement of `bench` (cold and warm) and the memory probes of `gemv-bw`.
#include <cstdio>

#include "backends/registry.h"
#include "backends/vulkan/bandwidth.h"
#include "backends/vulkan/device.h"
#include "backends/vulkan/loader.h"
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {
namespace {

struct VulkanOptions final : BackendOptions {
  bool subgroups = true;      // the subgroup reductions where the device has them
  bool coopmat = true;        // prompts on cooperative matrices where the device has them
  ProgramCacheOptions cache;  // library default: off (a backend a test or a library makes touches no disk)
  uint32_t matvec_rows = 0, matvec_parts = 0, matvec_local = 0, matvec_unroll = 0, matvec_groups = 0;
};

// "auto", or ROWSxPARTSxLOCALxUNROLL[xGROUPS] (e.g. 4x2x64x4): the decode matvec's shape.
void set_matvec(VulkanOptions& o, const std::string& v) {
  if (v == "auto") {
    o.matvec_rows = o.matvec_parts = o.matvec_local = o.matvec_unroll = o.matvec_groups = 0;
    return;
  }
  unsigned r = 0, p = 0, l = 0, u = 0, g = 0;
  char tail = 0;
  const int got = std::sscanf(v.c_str(), "%ux%ux%ux%ux%u%c", &r, &p, &l, &u, &g, &tail);
  if ((got != 4 && got != 5) || r < 1 || r > 8 || p < 1 || p > 8 || (p & (p - 1)) != 0 || l < 1 || l > 1024 ||
      (l & (l - 1)) != 0 || u < 1 || u > 4 || (got == 5 && g < 1))
    fail(
        "--vk-matvec: '{}' is not auto or ROWSxPARTSxLOCALxUNROLL[xGROUPS] (rows 1-8, parts 1/2/4/8, local a "
        "power of two up to 1024, unroll 1-4, groups at least 1)",
        v);
  o.matvec_rows = r, o.matvec_parts = p, o.matvec_local = l, o.matvec_unroll = u, o.matvec_groups = g;
}

std::string unavailable() {
  if (!vulkan::library_error().empty()) return vulkan::library_error();
  if (!vulkan::instance()) return vulkan::instance_error();
  if (vulkan::list_devices().empty())
    return "no Vulkan 1.1 device (the loader found no driver, or none lists a device)";
  return {};
}

std::vector<DeviceInfo> devices(const std::string& profile) {
  const vulkan::DeviceProfile& prof = vulkan::find_profile(profile);
  std::vector<DeviceInfo> out;
  for (VkPhysicalDevice d : vulkan::list_devices()) {
    vulkan::Capabilities caps = vulkan::query_capabilities(d);
    vulkan::apply_profile(caps, prof);
    out.push_back({caps.name,
                   fmt::format("driver: {} {} | Vulkan {} | profile: {}", caps.driver_name, caps.driver_info,
                               vulkan::version_string(caps.api_version), caps.profile),
                   vulkan::describe(caps), caps.device_type == "CPU"});
  }
  return out;
}

VulkanBackendOptions backend_options(const BackendParams& p) {
  VulkanBackendOptions g;
  take_session(p, g);
  g.profile = p.device_profile;
  g.memory = p.gpu_memory;
  g.kv_memory = p.kv_memory;
  g.activations = p.activations;
  if (const auto* o = dynamic_cast<const VulkanOptions*>(p.options)) {
    g.subgroups = o->subgroups;
    g.coopmat = o->coopmat;
    g.cache = o->cache;
    g.matvec_rows = o->matvec_rows, g.matvec_parts = o->matvec_parts;
    g.matvec_local = o->matvec_local, g.matvec_unroll = o->matvec_unroll, g.matvec_groups = o->matvec_groups;
  }
  return g;
}

std::unique_ptr<Backend> make(const BackendParams& p) {
  return std::make_unique<VulkanBackend>(backend_options(p));
}

// Opening the device, building the pipelines and the self-check (or its cached verdict), sized only for
// the self-check. Cold: the cache bypassed but written, so the warm start finds the entry.
StartTimes measure_start(const BackendParams& p) {
  VulkanBackendOptions g = backend_options(p);
  g.kv_layers = 0;
  g.resident.clear();
  g.profiling = false;
  g.max_tokens = 4;
  g.max_in_elems = g.max_out_elems = 4096;
  g.max_width = 64;
  return time_cold_and_warm_start(g.cache, [&g](const ProgramCacheOptions& c) {
    g.cache = c;
    VulkanBackend be(g);
    return be.pipelines_from_cache() && be.verdict_from_cache();
  });
}

BackendEntry vulkan_entry() {
  BackendEntry e;
  e.name = "vulkan";
  e.multi_seq = true;
  e.mnn_type = 7;
  e.prompt_batch = 512;  // cooperative-matrix tiles of 64 tokens: 8 of them a pass (docs/PERF.md)
  e.summary = "any Vulkan 1.1+ device: weights and KV cache in device memory";
  e.unavailable = unavailable;
  e.devices = devices;
  e.make_options = [] { return std::make_unique<VulkanOptions>(); };
  e.options.push_back(switch_option(
      "--vk-subgroups",
      "reductions through subgroup operations where the device has them (auto), or shared memory only (off)",
      "auto", "off", true,
      [](BackendOptions& o, bool on) { static_cast<VulkanOptions&>(o).subgroups = on; }));
  e.options.push_back(switch_option(
      "--vk-coopmat",
      "prompts on cooperative matrices (fp16 tensor-core products with fp32 sums) where the device lists "
      "them (auto), or on the float tiles everywhere (off)",
      "auto", "off", true, [](BackendOptions& o, bool on) { static_cast<VulkanOptions&>(o).coopmat = on; }));
  OptionSpec mv;
  mv.flag = "--vk-matvec";
  mv.help =
      "the decode matvec's work-group: ROWSxPARTSxLOCALxUNROLL[xGROUPS] (rows a group, parts a block of 32 "
      "weights is split into, invocations, parts each loads at once, and optionally the most groups a "
      "dispatch has, each then taking several row groups), or auto (4x2x64x4); the integer matvec of "
      "--activations q8 takes ROWS, LOCAL and GROUPS (auto: 2 rows, 64 invocations)";
  mv.default_value = "auto";
  mv.set = [](BackendOptions& o, const std::string& v) { set_matvec(static_cast<VulkanOptions&>(o), v); };
  e.options.push_back(std::move(mv));
  OptionSpec cache;
  cache.flag = "--vk-cache";
  cache.help =
      "pipeline and self-check cache: on (default; $TILELLM_CACHE_DIR, else $XDG_CACHE_HOME/tilellm/vulkan, "
      "else ~/.cache/tilellm/vulkan), off, refresh (rebuild and re-check now), or a directory; "
      "$TILELLM_VK_CACHE sets the default";
  cache.set = [](BackendOptions& o, const std::string& v) {
    static_cast<VulkanOptions&>(o).cache = parse_cache_option(v, "--vk-cache", "TILELLM_VK_CACHE");
  };
  e.options.push_back(std::move(cache));
  e.make = make;
  e.measure_start = measure_start;
  e.make_probe = [](const BackendParams& p) { return vulkan::make_memory_probe(p.device, p.device_profile); };
  return e;
}

}  // namespace

TILELLM_REGISTER_BACKEND(vulkan_entry);

}  // namespace tilellm
