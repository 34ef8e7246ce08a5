#include "backend_args.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"

namespace tilellm::cli {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

}  // namespace

void add_backend_args(CLI::App* app, BackendArgs& a) {
  std::vector<std::string> names;
  std::string help = "where the model runs:";
  for (const BackendEntry* e : backends()) {
    names.push_back(e->name);
    help += " " + e->name + " (" + e->summary + ");";
  }
  help.back() = ' ';
  help += "see `tilellm devices` for what this machine can use";
  // Any name is taken here and checked when the session starts, so that a backend this build lacks (or one
  // this machine cannot run) gets an error saying why rather than a bare "not in the list".
  app->add_option("--backend", a.backend, help)->capture_default_str()->each([&a](const std::string&) {
    a.backend_given = true;
  });
  app->add_option("--n-gpu-layers", a.n_gpu_layers,
                  "llama.cpp's -ngl: any N > 0 runs the whole model on the first available GPU backend "
                  "(this engine offloads every layer or none), 0 on the CPU; --backend overrides it")
      ->check(CLI::Range(0, 1 << 20));
  app->add_option("--device", a.device,
                  "device index of the backend (see `tilellm devices`); default: its first device that is "
                  "not emulated on the CPU, else 0")
      ->check(CLI::NonNegativeNumber);
  // The profile names are checked by the backend that applies them, so a build without that backend still
  // parses the option and reports why it cannot use it.
  app->add_option("--device-profile", a.device_profile,
                  "GPU backends: clamp the device to a GPU family's limits: none, powervr-rogue, "
                  "mali-valhall, adreno-7xx (Vulkan also powervr-cxt, no-16bit)")
      ->capture_default_str();
  app->add_option("--prefill", a.prefill,
                  "device backends: where prompts run: gpu, cpu (the host's tiles; KV rows then go to the "
                  "device), or auto (where a prompt batch timed at the start ran faster; the speeds are kept "
                  "in the cache directory for later runs; run -v prints them)")
      ->check(CLI::IsMember({"gpu", "cpu", "auto"}))
      ->capture_default_str();
  app->add_option("--gpu-memory", a.gpu_memory,
                  "GPU backends: where weights live: buffer (default), or image (2D images read through the "
                  "texture path, for the formats the backend has image kernels for)")
      ->check(CLI::IsMember({"buffer", "image"}));
  app->add_option("--kv-memory", a.kv_memory,
                  "GPU backends: where the KV cache lives: buffer (default), or image (RGBA16F images, the "
                  "FB-KV as a texture; Vulkan, with --cache-type f16)")
      ->check(CLI::IsMember({"buffer", "image"}));
  add_backend_option_groups(app, a.given);
}

void add_backend_option_groups(CLI::App* app, std::map<std::string, std::string>& given) {
  for (const BackendEntry* e : backends()) {
    if (e->options.empty()) continue;
    const std::string group = e->name + " backend";
    for (const OptionSpec& spec : e->options) {
      // A command with a flag of that name already (gemv-bw's own --isa) keeps its own.
      if (app->get_option_no_throw(spec.flag)) continue;
      std::string h = spec.help;
      if (!spec.choices.empty()) h += " (" + join(spec.choices, ", ") + ")";
      app->add_option_function<std::string>(
             spec.flag, [&given, flag = spec.flag](const std::string& v) { given[flag] = v; }, h)
          ->group(group);
    }
  }
}

std::shared_ptr<BackendOptions> backend_options_from(const BackendEntry& chosen,
                                                     const std::map<std::string, std::string>& given) {
  for (const BackendEntry* e : backends()) {
    if (e == &chosen) continue;
    for (const OptionSpec& spec : e->options) {
      if (given.count(spec.flag))
        fail("{} is an option of the {} backend: use it with --backend {}", spec.flag, e->name, e->name);
    }
  }
  return make_backend_options(chosen, given);
}

namespace {

// A device backend's devices (their capabilities clamped by `profile`), or empty for the host backend, an
// unavailable one, or one whose devices cannot be listed (the session that follows names the cause).
std::vector<DeviceInfo> listed_devices(const BackendEntry& e, const std::string& profile = "none") {
  if (e.host || !e.devices || (e.unavailable && !e.unavailable().empty())) return {};
  try {
    return e.devices(profile);
  } catch (const Error&) {
    return {};
  }
}

// -ngl N without --backend: the first available GPU backend (in the order cuda, vulkan, opencl, then any
// other) with a device that is a GPU (not the API emulated on the CPU), or the CPU with a note saying why.
std::string backend_for_ngl(int n) {
  if (n == 0) return "cpu";
  std::vector<const BackendEntry*> gpus;
  for (const char* name : {"cuda", "vulkan", "opencl"}) {
    if (const BackendEntry* e = find_backend(name)) gpus.push_back(e);
  }
  for (const BackendEntry* e : backends()) {
    if (!e->host && std::find(gpus.begin(), gpus.end(), e) == gpus.end()) gpus.push_back(e);
  }
  std::string why;
  for (const BackendEntry* e : gpus) {
    std::string u = e->unavailable ? e->unavailable() : std::string();
    if (u.empty()) {
      const std::vector<DeviceInfo> devs = e->devices("none");
      if (devs.empty())
        u = "no device";
      else if (devs[size_t(default_device(devs))].emulated)
        u = devs.size() == 1 ? fmt::format("device 0 ({}) runs on the CPU", devs[0].name)
                             : fmt::format("its {} devices run on the CPU", devs.size());
    }
    if (u.empty()) {
      std::fprintf(stderr,
                   "-ngl %d: the whole model runs on the %s backend (every layer or none is offloaded)\n", n,
                   e->name.c_str());
      return e->name;
    }
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", e->name, u);
  }
  std::fprintf(stderr, "-ngl %d ignored: no GPU backend is available (%s); running on the CPU\n", n,
               why.empty() ? "this build has none" : why.c_str());
  return "cpu";
}

// The backend the options choose: --backend, or what -ngl picks when --backend is not given.
const std::string& chosen_backend(const BackendArgs& a) {
  if (a.n_gpu_layers < 0 || a.backend_given) return a.backend;
  if (a.ngl_backend.empty()) a.ngl_backend = backend_for_ngl(a.n_gpu_layers);
  return a.ngl_backend;
}

}  // namespace

void apply_backend_args(const BackendArgs& a, SessionOptions& o) {
  o.backend = chosen_backend(a);
  o.device = chosen_device(a);
  o.device_profile = a.device_profile;
  o.prefill = a.prefill == "cpu"    ? PrefillMode::Cpu
              : a.prefill == "auto" ? PrefillMode::Auto
                                    : PrefillMode::Gpu;
  o.gpu_memory = a.gpu_memory == "image" ? GpuMemory::Image : GpuMemory::Buffer;
  o.kv_memory = a.kv_memory == "image" ? KvMemory::Image : KvMemory::Buffer;
  const BackendEntry* chosen = find_backend(o.backend);
  // An unknown name fails with the reason when the session starts.
  if (chosen) o.backend_options = backend_options_from(*chosen, a.given);
}

std::string backend_label(const BackendArgs& a) {
  const std::string& name = chosen_backend(a);
  const BackendEntry* e = find_backend(name);
  if (e && e->host) return name;
  std::string s = name + ":" + std::to_string(chosen_device(a));
  if (a.device_profile != "none") s += ":" + a.device_profile;
  s += a.gpu_memory == "image" ? "+image" : "+buffer";  // the weights' memory mode
  if (a.kv_memory == "image") s += "+kv-image";
  if (a.prefill != "gpu") s += "+prefill-" + a.prefill;
  return s;
}

int chosen_device(const BackendArgs& a) {
  if (a.device >= 0) return a.device;
  if (a.default_device < 0) {
    const BackendEntry* e = find_backend(chosen_backend(a));
    const std::vector<DeviceInfo> devs = e ? listed_devices(*e) : std::vector<DeviceInfo>();
    a.default_device = default_device(devs);
    if (a.default_device > 0)
      std::fprintf(
          stderr,
          "%s device %d (%s): its first device that is not emulated on the CPU (--device N picks another)\n",
          e->name.c_str(), a.default_device, devs[size_t(a.default_device)].name.c_str());
  }
  return a.default_device;
}

std::string device_name(const BackendArgs& a) {
  const BackendEntry* e = find_backend(chosen_backend(a));
  if (!e) return {};
  const std::vector<DeviceInfo> devs = listed_devices(*e, a.device_profile);
  const int d = chosen_device(a);
  return size_t(d) < devs.size() ? devs[size_t(d)].name : std::string();
}

int64_t default_prompt_batch(const std::string& backend) {
  const BackendEntry* e = find_backend(backend);
  return e ? e->prompt_batch : BackendEntry{}.prompt_batch;
}

}  // namespace tilellm::cli
