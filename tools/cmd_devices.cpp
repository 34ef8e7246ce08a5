// `tilellm devices`: every backend of this build (backends/registry.h) with its MNN number, whether it can
// run here (and if not, why), and each of its devices with the capability struct its kernels are chosen
// from (optionally clamped by a device profile), so a user can pick --backend and --device; where a backend
// lists several, the one commands take without --device is marked.
#include <cstdio>
#include <memory>
#include <string>

#include "backends/registry.h"
#include "base/error.h"
#include "commands.h"

namespace tilellm::cli {

void register_devices(CLI::App& app) {
  auto profile = std::make_shared<std::string>("none");
  auto only = std::make_shared<std::string>();
  CLI::App* sub =
      app.add_subcommand("devices", "list the backends, their devices and the devices' capabilities");
  sub->add_option("--device-profile", *profile, "show GPU capabilities clamped by this profile")
      ->capture_default_str();
  sub->add_option("--backend", *only, "list this backend only");
  sub->callback([profile, only] {
    if (!only->empty() && !find_backend(*only)) require_backend(*only);  // says what this build has
    for (const BackendEntry* e : backends()) {
      if (!only->empty() && e->name != *only) continue;
      const std::string why = e->unavailable ? e->unavailable() : std::string();
      std::printf("backend %s (MNN type %d): %s\n", e->name.c_str(), e->mnn_type,
                  why.empty() ? e->summary.c_str() : ("unavailable: " + why).c_str());
      if (!why.empty() || !e->devices) continue;
      // A profile clamps GPUs only; the host backend is listed as it is. A profile one GPU backend does not
      // have (Vulkan's powervr-cxt for OpenCL) is said for that backend when all are listed.
      std::vector<DeviceInfo> devs;
      try {
        devs = e->devices(e->host ? std::string("none") : *profile);
      } catch (const Error& err) {
        if (!only->empty()) throw;
        std::printf("  (not listed: %s)\n", err.what());
        continue;
      }
      // Where there is a choice, the device commands take without --device (registry.h default_device).
      const size_t def = devs.size() > 1 ? size_t(default_device(devs)) : devs.size();
      for (size_t i = 0; i < devs.size(); ++i) {
        std::printf("  device %zu: %s%s\n%s", i, devs[i].name.c_str(),
                    i == def ? " (the default: taken without --device)" : "", devs[i].details.c_str());
      }
    }
  });
}

}  // namespace tilellm::cli
