// The OpenCL backend's registry entry (backends/registry.h): MNN type 3, available when the OpenCL ICD loader
// loads (loader.h) and lists a device; its own options --cl-cache (the program binary cache),
// --cl-gemm-tile (the prompt GEMM's tile), --cl-gemm-split (split K of the prompt products),
// --cl-matvec-unroll (the decode products' loads per round), --cl-matvec-items (their work-group size),
// --cl-flush (launches between submissions of the queue) and
// --cl-int-gemm (the prompt products in integers), --cl-int-matvec (decode's);
// the factory, the start-time measurement of `bench` and the memory probes of `gemv-bw`.

#include "backends/opencl/bandwidth.h"
#include "backends/opencl/device.h"
#include "backends/opencl/loader.h"
#include "backends/opencl/opencl_backend.h"
#include "backends/registry.h"
#include "base/error.h"

namespace tilellm {
namespace {

struct OpenclOptions final : BackendOptions {
  ProgramCacheOptions cache;  // library default: off (a backend a test or a library makes touches no disk)
  int gemm_split = OpenclBackendOptions{}.gemm_split;
  int matvec_unroll = OpenclBackendOptions{}.matvec_unroll;
  int matvec_items = OpenclBackendOptions{}.matvec_items;
  int flush_every = OpenclBackendOptions{}.flush_every;
  bool int_gemm = OpenclBackendOptions{}.int_gemm;
  bool int_matvec = OpenclBackendOptions{}.int_matvec;
  std::string gemm_tile;  // empty: auto
};

// --cl-cache as cache options (program_cache.h parse_cache_option); $TILELLM_CL_CACHE when empty.
ProgramCacheOptions parse_cl_cache(const std::string& cl_cache) {
  return parse_cache_option(cl_cache, "--cl-cache", "TILELLM_CL_CACHE");
}

std::string unavailable() {
  if (!opencl::library_error().empty()) return opencl::library_error();
  if (opencl::list_devices().empty())
    return "no OpenCL device (the ICD loader found no driver, or the driver lists no device)";
  return {};
}

std::vector<DeviceInfo> devices(const std::string& profile) {
  const opencl::DeviceProfile& prof = opencl::find_profile(profile);
  std::vector<DeviceInfo> out;
  for (const opencl::DeviceRef& d : opencl::list_devices()) {
    opencl::Capabilities caps = opencl::query_capabilities(d);
    opencl::apply_profile(caps, prof);
    out.push_back({caps.name,
                   fmt::format("platform: {} | driver: {} | {} | profile: {}", caps.platform,
                               caps.driver_version, caps.device_version, caps.profile),
                   opencl::describe(caps), caps.cpu_device});
  }
  return out;
}

OpenclBackendOptions backend_options(const BackendParams& p) {
  OpenclBackendOptions g;
  take_session(p, g);
  g.profile = p.device_profile;
  g.memory = p.gpu_memory;
  g.activations = p.activations;
  if (const auto* o = dynamic_cast<const OpenclOptions*>(p.options)) {
    g.cache = o->cache;
    g.gemm_split = o->gemm_split;
    g.gemm_tile = o->gemm_tile;
    g.matvec_unroll = o->matvec_unroll;
    g.matvec_items = o->matvec_items;
    g.flush_every = o->flush_every;
    g.int_gemm = o->int_gemm;
    g.int_matvec = o->int_matvec;
  }
  return g;
}

// The device computes the float path (exact weights, float32 activations), except the block formats'
// products (prompt and decode) under --activations q8 on a device with an integer dot product
// (OpenclBackendOptions).
std::unique_ptr<Backend> make(const BackendParams& p) {
  if (p.kv_memory == KvMemory::Image)
    fail(
        "OpenCL backend: --kv-memory image is not available on this backend (it holds the KV cache in "
        "buffers)");
  return std::make_unique<OpenclBackend>(backend_options(p));
}

// The backend as a session makes it, but sized only for the self-check and with no KV cache or resident
// arrays: what is timed is opening the device, making the programs and the self-check (or its cached
// verdict), not allocations that scale with the model. Cold: the cache bypassed but written, so the warm
// start finds the entry.
StartTimes measure_start(const BackendParams& p) {
  OpenclBackendOptions g = backend_options(p);
  g.kv_layers = 0;
  g.resident.clear();
  g.profiling = false;
  g.max_tokens = 4;
  g.max_in_elems = g.max_out_elems = 4096;
  g.max_width = 64;
  return time_cold_and_warm_start(g.cache, [&g](const ProgramCacheOptions& c) {
    g.cache = c;
    OpenclBackend be(g);
    return be.programs_from_cache() && be.verdict_from_cache();
  });
}

BackendEntry opencl_entry() {
  BackendEntry e;
  e.name = "opencl";
  e.multi_seq = true;
  e.mnn_type = 3;
  // A pass of 64 tokens leaves the prompt GEMM's tiles too few to fill a large GPU: on the H200, 7B Q4_0
  // pp512 ran 541 / 950 / 1149 / 1257 t/s at 64 / 128 / 256 / 512 tokens a pass (docs/PERF.md 2026-12-04).
  e.prompt_batch = 512;
  e.summary = "any OpenCL 1.2+ device: weights and KV cache in device memory";
  e.unavailable = unavailable;
  e.devices = devices;
  e.make_options = [] { return std::make_unique<OpenclOptions>(); };
  OptionSpec cache;
  cache.flag = "--cl-cache";
  cache.help =
      "program binary and self-check cache: on (default; $TILELLM_CACHE_DIR, else "
      "$XDG_CACHE_HOME/tilellm/opencl, else ~/.cache/tilellm/opencl), off, refresh (rebuild and re-check "
      "now), or a directory; $TILELLM_CL_CACHE sets the default";
  cache.set = [](BackendOptions& o, const std::string& v) {
    static_cast<OpenclOptions&>(o).cache = parse_cl_cache(v);
  };
  e.options.push_back(std::move(cache));
  OptionSpec tile;
  tile.flag = "--cl-gemm-tile";
  tile.help =
      "the prompt GEMM's tile, rows x tokens a work-group (x2: the tiles held twice, one barrier a block): "
      "auto (the largest that fits the device) or one of the choices";
  tile.default_value = "auto";
  tile.choices.push_back("auto");
  for (const OpenclBackend::GemmTiles& g : OpenclBackend::gemm_tile_choices())
    tile.choices.push_back(g.name());
  tile.set = [](BackendOptions& o, const std::string& v) {
    auto& c = static_cast<OpenclOptions&>(o);
    if (v != "auto" && !OpenclBackend::gemm_tile_named(v)) {
      std::string names;
      for (const OpenclBackend::GemmTiles& g : OpenclBackend::gemm_tile_choices())
        names.append(" ").append(g.name());
      fail("--cl-gemm-tile: '{}' is not auto or a tile of the GEMM:{}", v, names);
    }
    c.gemm_tile = v == "auto" ? "" : v;
  };
  e.options.push_back(std::move(tile));
  e.options.push_back(number_option(
      "--cl-gemm-split",
      "split the K loop of a prompt product into as many slices as keep its work-groups within N per "
      "compute unit (where that is 2 or more): auto (N = 3), off, or N from 1 to 8",
      NumberRange(1, 8).auto_is(OpenclBackendOptions{}.gemm_split).off_is(0),
      [](BackendOptions& o, int n) { static_cast<OpenclOptions&>(o).gemm_split = n; }));
  e.options.push_back(number_option(
      "--cl-matvec-unroll",
      "half blocks of a row a decode product's work-item loads before it converts any: auto (the format's "
      "own loop: the 4-bit formats one ahead) or N from 1 to 8",
      NumberRange(1, 8), [](BackendOptions& o, int n) { static_cast<OpenclOptions&>(o).matvec_unroll = n; }));
  e.options.push_back(number_option(
      "--cl-matvec-items",
      "work-items of a decode product's work-group: auto (64; 128 for rows of 8192 inputs and more) or a "
      "power of two from 16 to 256",
      NumberRange(16, 256).powers_of_two(),
      [](BackendOptions& o, int n) { static_cast<OpenclOptions&>(o).matvec_items = n; }));
  e.options.push_back(number_option(
      "--cl-flush",
      "submit the queued kernels to the device every N launches: auto (off), off (only when the host "
      "waits for a result) or N from 1 to 64",
      NumberRange(1, 64).auto_is(OpenclBackendOptions{}.flush_every).off_is(0),
      [](BackendOptions& o, int n) { static_cast<OpenclOptions&>(o).flush_every = n; }));
  e.options.push_back(switch_option(
      "--cl-int-gemm",
      "the prompt products of the block formats in 8-bit integers with the device's dot product "
      "(cl_khr_integer_dot_product, or NVIDIA's dp4a) under --activations q8: on (the default, where the "
      "device has one) or off (the float GEMM)",
      "on", "off", true, [](BackendOptions& o, bool on) { static_cast<OpenclOptions&>(o).int_gemm = on; }));
  e.options.push_back(switch_option(
      "--cl-int-matvec",
      "decode's products of those formats in integers too, over the input rounded to 8 bits per block of "
      "32, where --cl-int-gemm is on: on (the default) or off (the float products)",
      "on", "off", true, [](BackendOptions& o, bool on) { static_cast<OpenclOptions&>(o).int_matvec = on; }));
  e.make = make;
  e.measure_start = measure_start;
  e.make_probe = [](const BackendParams& p) { return opencl::make_memory_probe(p.device, p.device_profile); };
  return e;
}

}  // namespace

TILELLM_REGISTER_BACKEND(opencl_entry);

}  // namespace tilellm
