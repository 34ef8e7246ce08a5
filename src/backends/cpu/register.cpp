// The CPU backend's registry entry (backends/registry.h): MNN type 0, the host backend (the reference of
// every other backend, and where hybrid prefill runs), always available; one device, this CPU; one option of
// its own, --isa (the instruction set every CPU kernel family runs: base/cpu_isa.h).
#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/tiled_float.h"
#include "backends/cpu/tiled_weight.h"
#include "backends/registry.h"
#include "base/cpu_features.h"
#include "base/cpu_isa.h"
#include "base/cpu_set.h"
#include "base/error.h"

namespace tilellm {
namespace {

struct CpuOptions final : BackendOptions {
  std::string isa;  // empty: leave the running ISA as it is (the best, unless selected before)
};

std::vector<DeviceInfo> devices(const std::string& profile) {
  if (profile != "none") fail("--device-profile {} clamps a GPU: the cpu backend has none", profile);
  const CpuFeatures& f = cpu_features();
  DeviceInfo d;
  d.name = f.model.empty() ? "unknown CPU" : f.model;
  d.summary = fmt::format("isa: {}", cpu_isa_name(active_cpu_isa()));
  d.details = fmt::format(
      "  isa: {} (tiled matmul {}, float tiles {}; this CPU runs {})\n  hardware threads: {}\n  cpuset: {}\n"
      "  features: avx2+fma+f16c {}, avx-vnni {}, avx512 vnni {}, avx512 bf16 {}, neon {}, neon dotprod {}\n",
      cpu_isa_name(active_cpu_isa()), tiled_isa_name(), tiled_float_isa_name(GgmlType::F16),
      supported_cpu_isa_names(), std::thread::hardware_concurrency(), affinity_list(), f.avx2_fma_f16c,
      f.avx_vnni, f.avx512_vnni, f.avx512_bf16, f.neon, f.neon_dotprod);
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
  if (p.kv_memory != KvMemory::Buffer) {
    fail("--kv-memory {} places the KV cache in device memory: use it with a GPU backend (this build has {})",
         kv_memory_name(p.kv_memory), device_backend_names());
  }
  if (const auto* o = dynamic_cast<const CpuOptions*>(p.options); o && !o->isa.empty())
    select_cpu_isa(o->isa);
  auto b = std::make_unique<CpuBackend>(*p.pool, p.activations, p.max_in_elems, p.weights);
  if (p.tile_mask > 0) {
    if (p.tile_mask >= 1) fail("--degrade tile-mask={} must be a fraction below 1", p.tile_mask);
    b->set_tile_mask_fraction(p.tile_mask);
  }
  return b;
}

BackendEntry cpu_entry() {
  BackendEntry e;
  e.name = "cpu";
  e.mnn_type = 0;
  e.host = true;
  e.summary = "this CPU: SIMD kernels over weights repacked into tiles at load";
  e.devices = devices;
  e.make_options = [] { return std::make_unique<CpuOptions>(); };
  OptionSpec isa;
  isa.flag = "--isa";
  isa.help = "instruction set of the CPU kernels: best (the default), or one this CPU runs";
  isa.choices.push_back("best");
  for (int i = 0; i < kCpuIsas; ++i) {
    if (cpu_isa_supported(CpuIsa(i))) isa.choices.push_back(cpu_isa_name(CpuIsa(i)));
  }
  isa.set = [](BackendOptions& o, const std::string& v) {
    if (!v.empty() && v != "best" && !cpu_isa_supported_by_name(v))
      fail("--isa {}: not an instruction set this CPU runs ({})", v, supported_cpu_isa_names());
    static_cast<CpuOptions&>(o).isa = v;
  };
  e.options.push_back(std::move(isa));
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
