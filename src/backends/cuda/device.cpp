// CUDA device queries (device.h).
#include "backends/cuda/device.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>

#include "backends/cuda/error.h"
#include "base/error.h"

namespace tilellm::cuda {
namespace {

// The driver library the runtime will open, looked for once.
std::string driver_error() {
  static const std::string err = [] {
    const char* env = std::getenv("TILELLM_CUDA_DRIVER");
    const std::string lib = env && *env ? env : "libcuda.so.1";
    void* h = dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (!h) return fmt::format("the NVIDIA driver is not installed ({} could not be loaded)", lib);
    dlclose(h);
    return std::string();
  }();
  return err;
}

int attribute(cudaDeviceAttr a, int device) {
  int v = 0;
  check(cudaDeviceGetAttribute(&v, a, device), "cudaDeviceGetAttribute");
  return v;
}

}  // namespace

std::string version_string(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string unavailable() {
  static const std::string reason = [] {
    if (std::string e = driver_error(); !e.empty()) return e;
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver) {
      int driver = 0, runtime = 0;
      cudaDriverGetVersion(&driver);
      cudaRuntimeGetVersion(&runtime);
      return fmt::format(
          "the NVIDIA driver supports CUDA {} but this build's runtime is CUDA {}: update the driver",
          version_string(driver), version_string(runtime));
    }
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
      return std::string("no CUDA GPU on this machine");
    if (e != cudaSuccess)
      return fmt::format("the CUDA runtime could not start: {} ({})", cudaGetErrorName(e),
                         cudaGetErrorString(e));
    for (int d = 0; d < n; ++d) {
      if (attribute(cudaDevAttrComputeCapabilityMajor, d) >= 8) return std::string();
    }
    return fmt::format(
        "no CUDA GPU of compute capability 8.0 or later (the kernels' int8 tensor-core "
        "products and asynchronous copies need it); this machine has {}",
        n);
  }();
  return reason;
}

int device_count() {
  if (!unavailable().empty()) return 0;
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  return n;
}

Capabilities query_capabilities(int device) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  Capabilities c;
  c.name = p.name;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) c.pci_bus_id = bus;
  cudaDriverGetVersion(&c.driver_version);
  cudaRuntimeGetVersion(&c.runtime_version);
  c.cc_major = p.major;
  c.cc_minor = p.minor;
  c.sm_count = p.multiProcessorCount;
  c.warp_size = p.warpSize;
  c.max_threads_per_block = p.maxThreadsPerBlock;
  c.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  c.shared_per_block = p.sharedMemPerBlock;
  c.shared_per_block_optin = p.sharedMemPerBlockOptin;
  c.shared_per_sm = p.sharedMemPerMultiprocessor;
  c.regs_per_block = p.regsPerBlock;
  c.regs_per_sm = p.regsPerMultiprocessor;
  c.l2_bytes = size_t(p.l2CacheSize);
  c.clock_khz = attribute(cudaDevAttrClockRate, device);
  c.memory_clock_khz = attribute(cudaDevAttrMemoryClockRate, device);
  c.bus_width_bits = p.memoryBusWidth;
  c.theoretical_gbs = 2.0 * c.memory_clock_khz * 1e3 * (c.bus_width_bits / 8.0) / 1e9;
  c.total_memory = p.totalGlobalMem;
  c.integrated = p.integrated != 0;
  c.int8_mma = c.cp_async = p.major >= 8;
  return c;
}

std::string describe(const Capabilities& c) {
  constexpr double kMiB = 1024.0 * 1024.0;
  return fmt::format(
      "  compute capability: {}.{}\n"
      "  multiprocessors: {} (warp {}, {} threads a block, {} a multiprocessor)\n"
      "  shared memory: {} KiB a block ({} KiB opt-in), {} KiB a multiprocessor\n"
      "  registers: {} a block, {} a multiprocessor\n"
      "  L2 cache: {:.0f} MiB\n"
      "  clocks: SM {} MHz, memory {} MHz, bus {} bits: {:.0f} GB/s theoretical\n"
      "  memory: {:.0f} MiB{}\n"
      "  int8 tensor cores (mma.sync): {}, cp.async: {}\n"
      "  driver: CUDA {}, runtime: CUDA {}, PCI {}\n",
      c.cc_major, c.cc_minor, c.sm_count, c.warp_size, c.max_threads_per_block, c.max_threads_per_sm,
      c.shared_per_block / 1024, c.shared_per_block_optin / 1024, c.shared_per_sm / 1024, c.regs_per_block,
      c.regs_per_sm, double(c.l2_bytes) / kMiB, c.clock_khz / 1000, c.memory_clock_khz / 1000,
      c.bus_width_bits, c.theoretical_gbs, double(c.total_memory) / kMiB, c.integrated ? " (integrated)" : "",
      c.int8_mma ? "yes" : "no", c.cp_async ? "yes" : "no", version_string(c.driver_version),
      version_string(c.runtime_version), c.pci_bus_id);
}

}  // namespace tilellm::cuda
