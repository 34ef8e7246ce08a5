// The CPU backend's registry entry (backends/registry.h): MNN type 0, the host backend (the reference of
// every other backend, and where hybrid prefill runs), always available; one device, this CPU.
#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/tiled_float.h"
#include "backends/cpu/tiled_weight.h"
#include "backends/registry.h"
#include "base/cpu_features.h"
#include "base/cpu_set.h"
#include "base/error.h"

namespace tilellm {
namespace {

std::vector<DeviceInfo> devices(const std::string& profile) {
  if (profile != "none") fail("--device-profile {} clamps a GPU: the cpu backend has none", profile);
  const CpuFeatures& f = cpu_features();
  DeviceInfo d;
  d.name = f.model.empty() ? "unknown CPU" : f.model;
  d.summary = fmt::format("isa: {} (tiles {}, float tiles {})", best_isa_name(), tiled_isa_name(),
                          tiled_float_isa_name(GgmlType::F32));
  d.details = fmt::format(
      "  isa: {} (tiled matmul {}, float tiles {})\n  hardware threads: {}\n  cpuset: {}\n"
      "  features: avx2+fma+f16c {}, avx-vnni {}, avx512 vnni {}, avx512 bf16 {}, neon {}, neon dotprod {}\n",
      best_isa_name(), tiled_isa_name(), tiled_float_isa_name(GgmlType::F16),
      std::thread::hardware_concurrency(), affinity_list(), f.avx2_fma_f16c, f.avx_vnni, f.avx512_vnni,
      f.avx512_bf16, f.neon, f.neon_dotprod);
  return {d};
}

std::unique_ptr<Backend> make(const BackendParams& p) {
  if (!p.pool) fail("internal: the cpu backend needs the session's thread pool");
  if (p.device != 0) fail("the cpu backend has one device, 0 (asked for device {})", p.device);
  if (p.device_profile != "none") {
    fail(
        "--device-profile {} clamps a GPU to a family's limits: use it with a GPU backend (this build has "
        "{})",
        p.device_profile, device_backend_names());
  }
  if (p.gpu_memory != GpuMemory::Buffer) {
    fail("--gpu-memory {} places weights in device memory: use it with a GPU backend (this build has {})",
         gpu_memory_name(p.gpu_memory), device_backend_names());
  }
  return std::make_unique<CpuBackend>(*p.pool, p.activations, p.max_in_elems, p.weights);
}

BackendEntry cpu_entry() {
  BackendEntry e;
  e.name = "cpu";
  e.mnn_type = 0;
  e.host = true;
  e.summary = "this CPU: SIMD kernels over weights repacked into tiles at load";
  e.devices = devices;
  e.make = make;
  e.make_probe = [](const BackendParams& p) -> std::unique_ptr<MemoryProbe> {
    if (!p.pool) fail("internal: the cpu memory probe needs a thread pool");
    return make_cpu_memory_probe(*p.pool);
  };
  return e;
}

}  // namespace

TILELLM_REGISTER_BACKEND(cpu_entry);

}  // namespace tilellm
