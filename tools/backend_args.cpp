#include "backend_args.h"

#include <cstdlib>

#include "format/error.h"

namespace tilellm::cli {

void add_backend_args(CLI::App* app, BackendArgs& a) {
  app->add_option("--backend", a.backend,
                  "where the model runs: cpu, or opencl (weights and KV on the device)")
      ->check(CLI::IsMember({"cpu", "opencl"}))
      ->capture_default_str();
  app->add_option("--device", a.device, "OpenCL device index (see `tilellm devices`)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  // The names are checked when the backend starts (backends/opencl/device.h lists them), so a build without
  // OpenCL still parses the option and reports why it cannot use it.
  app->add_option(
         "--device-profile", a.device_profile,
         "OpenCL: clamp the device to a GPU family's limits: none, powervr-rogue, mali-valhall, adreno-7xx")
      ->capture_default_str();
  app->add_option("--prefill", a.prefill,
                  "OpenCL: where prompts run: gpu, cpu (the CPU's tiles; KV rows then go to the device), or "
                  "auto (cpu for batches of 16 tokens or more)")
      ->check(CLI::IsMember({"gpu", "cpu", "auto"}))
      ->capture_default_str();
  app->add_option("--gpu-memory", a.gpu_memory,
                  "OpenCL: where weights live: buffer (default), or image (2D images read through the "
                  "texture path, for F16/Q4_0/Q4_1/Q8_0 weights that fit the device's image limits)")
      ->check(CLI::IsMember({"buffer", "image"}));
  app->add_option("--cl-cache", a.cl_cache,
                  "OpenCL: program binary and self-check cache: on (default; $TILELLM_CACHE_DIR, else "
                  "$XDG_CACHE_HOME/tilellm/opencl, else ~/.cache/tilellm/opencl), off, refresh (rebuild and "
                  "re-check now), or a directory; $TILELLM_CL_CACHE sets the default");
}

opencl::ProgramCacheOptions program_cache_options(const std::string& cl_cache) {
  using Mode = opencl::ProgramCacheOptions::Mode;
  std::string v = cl_cache;
  const char* where = "--cl-cache";
  if (v.empty()) {
    const char* e = std::getenv("TILELLM_CL_CACHE");
    v = e && *e ? e : "on";
    where = "TILELLM_CL_CACHE";
  }
  opencl::ProgramCacheOptions c;
  if (v == "on" || v == "1") {
    c.mode = Mode::On;
  } else if (v == "off" || v == "0") {
    c.mode = Mode::Off;
  } else if (v == "refresh") {
    c.mode = Mode::Refresh;
  } else if (v.find('/') != std::string::npos || v == ".") {
    c.mode = Mode::On;
    c.dir = v;
  } else {
    // A bare word is more likely a mistyped mode than a directory in the working directory.
    fail("{}: '{}' is not on, off, refresh or a directory (write ./{} for one here)", where, v, v);
  }
  return c;
}

void apply_backend_args(const BackendArgs& a, SessionOptions& o) {
  o.backend = a.backend == "opencl" ? BackendKind::OpenCL : BackendKind::Cpu;
  o.device = a.device;
  o.device_profile = a.device_profile;
  o.prefill = a.prefill == "cpu"    ? PrefillMode::Cpu
              : a.prefill == "auto" ? PrefillMode::Auto
                                    : PrefillMode::Gpu;
  o.program_cache = program_cache_options(a.cl_cache);
  if (!a.gpu_memory.empty() && a.backend != "opencl")
    fail("--gpu-memory {} applies to a GPU backend: use it with --backend opencl", a.gpu_memory);
  o.gpu_memory = a.gpu_memory == "image" ? GpuMemory::Image : GpuMemory::Buffer;
}

std::string backend_label(const BackendArgs& a) {
  if (a.backend != "opencl") return a.backend;
  std::string s = "opencl:" + std::to_string(a.device);
  if (a.device_profile != "none") s += ":" + a.device_profile;
  s += a.gpu_memory == "image" ? "+image" : "+buffer";  // the weights' memory mode
  if (a.prefill != "gpu") s += "+prefill-" + a.prefill;
  return s;
}

}  // namespace tilellm::cli
