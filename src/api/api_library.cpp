// The C API's library information: version, build, and the backend registry's backends and devices.
// What a backend says of itself (availability, devices) is asked once, the first time anyone asks, and kept:
// the strings handed out must stay valid, and asking may load a GPU runtime.
#include <map>

#include "api/api_internal.h"
#include "backends/registry.h"
#include "base/cpu_isa.h"
#include "build_commit.h"

namespace tilellm::api {
namespace {

#define TILELLM_STR2(x) #x
#define TILELLM_STR(x) TILELLM_STR2(x)
constexpr const char* kVersion = TILELLM_STR(TILELLM_VERSION_MAJOR) "." TILELLM_STR(
    TILELLM_VERSION_MINOR) "." TILELLM_STR(TILELLM_VERSION_PATCH);

struct BackendFacts {
  std::string unavailable;
  std::vector<DeviceInfo> devices;
};

// A backend's facts, asked on first use and kept (the registry's entries never move after start-up).
const BackendFacts& facts(const BackendEntry& e) {
  static std::mutex mu;
  static std::map<std::string, BackendFacts> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(e.name);
  if (it == known.end()) {
    BackendFacts f;
    f.unavailable = e.unavailable ? e.unavailable() : std::string();
    if (f.unavailable.empty()) f.devices = e.devices("none");
    it = known.emplace(e.name, std::move(f)).first;
  }
  return it->second;
}

}  // namespace

const std::vector<DeviceInfo>& backend_devices(const BackendEntry& e) {
  return facts(e).devices;
}

}  // namespace tilellm::api

using namespace tilellm;
using namespace tilellm::api;

extern "C" {

const char* tilellm_version(void) {
  return kVersion;
}

const char* tilellm_build_info(void) {
  static const std::string info = [] {
    std::string compiler;
#if defined(__clang__)
    compiler = fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
    compiler = fmt::format("gcc {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
    compiler = "an unknown compiler";
#endif
    return fmt::format("tilellm {} (commit {}, {}, CPU isa {})", kVersion, TILELLM_BUILD_COMMIT, compiler,
                       cpu_isa_name(active_cpu_isa()));
  }();
  return info.c_str();
}

int32_t tilellm_backend_count(void) {
  return int32_t(backends().size());
}

tilellm_status tilellm_backend_get_info(int32_t index, tilellm_backend_info* out) {
  return guard("tilellm_backend_get_info", TILELLM_ERR_BACKEND, [&] {
    need(out, "out");
    const std::vector<const BackendEntry*> all = backends();
    if (index < 0 || size_t(index) >= all.size())
      raise(TILELLM_ERR_INVALID_ARGUMENT, "backend index {} (this build has {} backends)", index, all.size());
    const BackendEntry& e = *all[size_t(index)];
    const BackendFacts& f = facts(e);
    out->name = e.name.c_str();
    out->mnn_type = e.mnn_type;
    out->is_host = e.host;
    out->summary = e.summary.c_str();
    out->available = f.unavailable.empty();
    out->unavailable = f.unavailable.c_str();
    out->n_devices = int32_t(f.devices.size());
  });
}

tilellm_status tilellm_device_get_info(const char* backend, int32_t device, tilellm_device_info* out) {
  return guard("tilellm_device_get_info", TILELLM_ERR_BACKEND, [&] {
    need(backend, "backend");
    need(out, "out");
    const BackendEntry* e = find_backend(backend);
    if (!e) require_backend(backend);  // throws: not in this build, with the reason
    const BackendFacts& f = facts(*e);
    if (!f.unavailable.empty())
      raise(TILELLM_ERR_BACKEND, "backend {} cannot run on this machine: {}", backend, f.unavailable);
    if (device < 0 || size_t(device) >= f.devices.size())
      raise(TILELLM_ERR_INVALID_ARGUMENT, "backend {} has {} device(s); there is no device {}", backend,
            f.devices.size(), device);
    const DeviceInfo& d = f.devices[size_t(device)];
    out->name = d.name.c_str();
    out->summary = d.summary.c_str();
    out->details = d.details.c_str();
    out->emulated = d.emulated;
  });
}

}  // extern "C"
