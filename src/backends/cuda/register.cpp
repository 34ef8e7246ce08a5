// The CUDA backend's registry entry (backends/registry.h): MNN type 2, available when the NVIDIA driver and
// a GPU of compute capability 8.0 or later are there (device.h says how each absence is reported); its own
// options --cuda-attn-splits, --cuda-fp16-gemm, --cuda-fuse-rope and --cuda-fuse-norm; the factory, the
// start-time measurement of `bench` and the memory probes of `gemv-bw`.
#include <chrono>

#include "backends/cuda/bandwidth.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device.h"
#include "backends/registry.h"
#include "base/error.h"

namespace tilellm {
namespace {

struct CudaOptions final : BackendOptions {
  int attention_splits = 0;  // 0: auto (32)
  bool fuse_qkv_rope = false;
  bool fuse_norm = false;
  CudaBackendOptions::HalfGemm half_gemm = CudaBackendOptions::HalfGemm::All;
};

// CUDA devices are taken as they are: the GPU-family profiles of the OpenCL and Vulkan backends clamp
// limits that mobile GPUs lack, which says nothing about an NVIDIA GPU.
void check_profile(const std::string& profile) {
  if (profile != "none")
    fail(
        "the CUDA backend has no device profiles (got --device-profile {}); they clamp OpenCL and Vulkan "
        "devices",
        profile);
}

std::vector<DeviceInfo> devices(const std::string& profile) {
  check_profile(profile);
  std::vector<DeviceInfo> out;
  for (int d = 0; d < cuda::device_count(); ++d) {
    const cuda::Capabilities c = cuda::query_capabilities(d);
    out.push_back({c.name,
                   fmt::format("driver: CUDA {} | runtime: CUDA {} | compute capability: {}.{} | SMs: {}",
                               cuda::version_string(c.driver_version),
                               cuda::version_string(c.runtime_version), c.cc_major, c.cc_minor, c.sm_count),
                   cuda::describe(c), false});
  }
  return out;
}

CudaBackendOptions backend_options(const BackendParams& p) {
  check_profile(p.device_profile);
  CudaBackendOptions g;
  take_session(p, g);
  g.activations = p.activations;
  if (const auto* o = dynamic_cast<const CudaOptions*>(p.options)) {
    g.attention_splits = o->attention_splits;
    g.half_gemm = o->half_gemm;
    g.fuse_qkv_rope = o->fuse_qkv_rope;
    g.fuse_norm = o->fuse_norm;
  }
  return g;
}

std::unique_ptr<Backend> make(const BackendParams& p) {
  if (p.gpu_memory == GpuMemory::Image)
    fail("CUDA backend: --gpu-memory image is not available on this backend (it holds weights in buffers)");
  if (p.kv_memory == KvMemory::Image)
    fail(
        "CUDA backend: --kv-memory image is not available on this backend (it holds the KV cache in "
        "buffers)");
  return std::make_unique<CudaBackend>(backend_options(p));
}

// Opening the device and the self-check, sized only for the self-check. CUDA keeps no program cache of its
// own (the kernels are machine code for sm_90, PTX JIT-compiled by the driver elsewhere, which caches it).
StartTimes measure_start(const BackendParams& p) {
  CudaBackendOptions g = backend_options(p);
  g.kv_layers = 0;
  g.resident.clear();
  g.profiling = false;
  g.max_tokens = 8;
  g.max_in_elems = g.max_out_elems = 4096;
  g.max_width = 512;
  const auto t0 = std::chrono::steady_clock::now();
  { CudaBackend be(g); }
  StartTimes t;
  t.cold_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

BackendEntry cuda_entry() {
  BackendEntry e;
  e.name = "cuda";
  e.mnn_type = 2;
  e.prompt_batch = 512;  // the prompt GEMM's tiles are 64 tokens: 8 of them a pass fill the SMs
  e.multi_seq = true;    // a BatchSession's caches side by side in the one KV allocation
  e.summary =
      "NVIDIA GPUs (compute capability 8.0+): weights and KV cache in device memory, int8 tensor cores";
  e.unavailable = cuda::unavailable;
  e.devices = devices;
  e.make_options = [] { return std::make_unique<CudaOptions>(); };
  e.options.push_back(number_option(
      "--cuda-attn-splits",
      fmt::format("blocks each head's keys are split over in decode attention, each taking at least 16 keys: "
                  "auto (16) or a number 1-{}",
                  cuda::kMaxAttnSplits),
      NumberRange(1, cuda::kMaxAttnSplits),
      [](BackendOptions& o, int n) { static_cast<CudaOptions&>(o).attention_splits = n; }));
  OptionSpec hg;
  hg.flag = "--cuda-fp16-gemm";
  hg.help =
      "prompt products of 32+ tokens on cuBLAS's fp16 GEMM (where libcublas loads): all (every format but "
      "F32), f16 (over F16 weights only) or off (the int8 kernel)";
  hg.default_value = "all";
  hg.choices = {"all", "f16", "off"};
  hg.set = [](BackendOptions& o, const std::string& v) {
    auto& c = static_cast<CudaOptions&>(o);
    using H = CudaBackendOptions::HalfGemm;
    if (v == "f16")
      c.half_gemm = H::F16;
    else if (v == "all")
      c.half_gemm = H::All;
    else if (v == "off")
      c.half_gemm = H::Off;
    else
      fail("--cuda-fp16-gemm: '{}' is not f16, all or off", v);
  };
  e.options.push_back(std::move(hg));
  e.options.push_back(switch_option(
      "--cuda-fuse-rope",
      "decode's RoPE and KV write in the q/k/v product's launch where its rows stream in pairs (norm RoPE, "
      "7B-sized layers): on, or off (a launch of their own)",
      "on", "off", false,
      [](BackendOptions& o, bool on) { static_cast<CudaOptions&>(o).fuse_qkv_rope = on; }));
  e.options.push_back(switch_option(
      "--cuda-fuse-norm",
      "decode's residual add and RMSNorm carried by the products around them (the product before adds, "
      "the one after forms the norm in its launch): on, or off (a launch of their own)",
      "on", "off", false, [](BackendOptions& o, bool on) { static_cast<CudaOptions&>(o).fuse_norm = on; }));
  e.make = make;
  e.measure_start = measure_start;
  e.make_probe = [](const BackendParams& p) {
    check_profile(p.device_profile);
    return cuda::make_memory_probe(p.device);
  };
  return e;
}

}  // namespace

TILELLM_REGISTER_BACKEND(cuda_entry);

}  // namespace tilellm
