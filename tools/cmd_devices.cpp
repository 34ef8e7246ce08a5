// `tilellm devices`: lists every OpenCL device with its capability struct, as the OpenCL backend sees it
// (optionally clamped by a device profile), so a user can pick --device and see which kernel paths apply.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "format/error.h"
#ifdef TILELLM_HAVE_OPENCL
#include "backends/opencl/device.h"
#endif

namespace tilellm::cli {

void register_devices(CLI::App& app) {
  auto profile = std::make_shared<std::string>("none");
  CLI::App* sub = app.add_subcommand("devices", "list the OpenCL devices and their capabilities");
  sub->add_option("--device-profile", *profile, "show the capabilities clamped by this profile")
      ->capture_default_str();
  sub->callback([profile] {
#ifdef TILELLM_HAVE_OPENCL
    const opencl::DeviceProfile& prof = opencl::find_profile(*profile);
    const auto devs = opencl::list_devices();
    if (devs.empty()) {
      std::printf("no OpenCL devices (no OpenCL driver (ICD) is installed, or it lists no device)\n");
      return;
    }
    for (size_t i = 0; i < devs.size(); ++i) {
      opencl::Capabilities caps = opencl::query_capabilities(devs[i]);
      opencl::apply_profile(caps, prof);
      std::printf("device %zu:\n%s", i, opencl::describe(caps).c_str());
    }
#else
    (void)profile;
    fail(
        "this build has no OpenCL backend (CMake found no OpenCL headers and ICD loader when configuring "
        "it)");
#endif
  });
}

}  // namespace tilellm::cli
