// CUDA devices: whether this machine can run the backend (and why not), and the capability struct each
// device is described by and the kernels are chosen from (never from the device's name).
//
// The binary links the CUDA runtime statically; the runtime opens the NVIDIA driver (libcuda.so.1) on its
// first call. unavailable() first looks for the driver itself (dlopen), so that a machine without one gets
// "the NVIDIA driver (libcuda.so.1) is not installed" rather than the runtime's "insufficient driver";
// TILELLM_CUDA_DRIVER names another file to look for (the tests point it at a missing path to run as a
// machine without the driver). Then: a driver older than the runtime, or no CUDA GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tilellm::cuda {

struct Capabilities {
  // Identification (printed, never used to choose a kernel).
  std::string name, pci_bus_id;
  int driver_version = 0, runtime_version = 0;  // 1000 * major + 10 * minor

  int cc_major = 0, cc_minor = 0;  // compute capability
  int sm_count = 0;                // multiprocessors
  int warp_size = 32;
  int max_threads_per_block = 0, max_threads_per_sm = 0;
  size_t shared_per_block = 0;        // without opt-in (48 KiB)
  size_t shared_per_block_optin = 0;  // the most a kernel may ask for (cudaFuncSetAttribute)
  size_t shared_per_sm = 0;
  int regs_per_block = 0, regs_per_sm = 0;
  size_t l2_bytes = 0;
  int clock_khz = 0;         // peak SM clock
  int memory_clock_khz = 0;  // peak memory clock
  int bus_width_bits = 0;
  double theoretical_gbs = 0;  // 2 x memory clock x bus width (double data rate), GB/s
  size_t total_memory = 0;
  bool integrated = false;  // shares the host's memory (Jetson)
  // What the kernels need: int8 tensor-core products and asynchronous copies (compute capability 8.0).
  bool int8_mma = false, cp_async = false;
};

// Why the backend cannot run on this machine (one line), or empty when it can.
std::string unavailable();
int device_count();
Capabilities query_capabilities(int device);
// "  key: value" lines, for `tilellm devices`.
std::string describe(const Capabilities& c);
// "13.0" from 13000.
std::string version_string(int v);

}  // namespace tilellm::cuda
