// The backend registry: every backend this build has, found by name (--backend NAME) or by MNN's backend
// number (gemm-speed's positional backend), each saying whether it can run on this machine and why not, what
// devices it sees, which options of its own it takes, and making the Backend a session or a benchmark asks
// for. The session, the model and the tools know backends only through here (in the spirit of ggml-backend's
// registry -> device -> stream, kept small: the device is an index and the stream is the Backend).
//
// A backend registers itself with one line in its own folder,
//   TILELLM_REGISTER_BACKEND(opencl_entry);   // a function returning its BackendEntry
// run when the program starts (the engine library is linked whole, so no registration is dropped). A GPU
// backend loads its runtime library (libOpenCL.so.1, ...) when first asked, so one binary starts on any
// machine and lists what it cannot use and why.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/device_options.h"
#include "backends/modes.h"
#include "backends/program_cache.h"
#include "base/thread_pool.h"
#include "format/ggml_types.h"

namespace tilellm {

// One device of a backend, as `tilellm devices` lists it: its name; one line of what a benchmark row records
// beside it (driver and API version, or the CPU's instruction set; "key: value" pairs joined by " | "); and
// its capability struct as "  key: value" lines.
struct DeviceInfo {
  std::string name;
  std::string summary;
  std::string details;
  // The API implemented on the host CPU (lavapipe, PoCL's CPU device): a GPU backend's device that no GPU
  // is behind, which llama.cpp's -ngl does not pick.
  bool emulated = false;
};

// A backend's own options (its group of CLI flags, later its C API keys): each backend derives its typed
// struct from this, so that a session can carry it without knowing its type.
class BackendOptions {
 public:
  virtual ~BackendOptions() = default;
  // The flags and values these options were made from, defaults included ("--flag value" lines, in the
  // backend's order; make_backend_options): what a measurement kept across sessions (the --prefill auto
  // speeds) must tell apart, since an option may change a kernel's speed.
  std::string settings;
};

// One option of a backend's group. set() parses a value into the backend's options, throwing
// tilellm::Error that names the flag and the value; the CLI calls it with the given value, or with
// default_value when the flag is absent (so a default may depend on the environment, read in set()).
struct OptionSpec {
  std::string flag;  // "--cl-cache"
  std::string help;
  std::string default_value;
  std::vector<std::string> choices;  // the accepted words, for --help; empty: free text
  std::function<void(BackendOptions&, const std::string&)> set;
};

// What a session or a benchmark asks a backend for. The sizes bound the scratch a backend allocates once
// (nothing is allocated while ops run).
struct BackendParams {
  int device = 0;                       // index into the backend's devices()
  std::string device_profile = "none";  // GPU backends: clamp the device to a GPU family's published limits
  WeightsMode weights = WeightsMode::Native;
  ActivationMode activations = ActivationMode::Quantized;
  GpuMemory gpu_memory = GpuMemory::Buffer;
  KvMemory kv_memory = KvMemory::Buffer;
  bool profiling = false;      // time every kernel (Backend::kernel_times)
  bool self_check = true;      // GPU backends: check every kernel against the host backend on first use
  ThreadPool* pool = nullptr;  // the session's host threads (the host backend runs on them; required there)
  int64_t max_tokens = 64;     // most tokens in one op call (the session's batch)
  int64_t max_in_elems = 0;    // largest op input in floats (n_tok * widest activation)
  int64_t max_out_elems = 0;   // largest op output in floats (also covers the logits)
  int64_t max_width = 0;       // longest norm weight vector / RoPE table row, in floats
  // Geometry of the KV cache the cache ops will be given (kv_layers 0: none), and how many caches of it
  // (sequences of a BatchSession: each KvCache handed to the ops names its own by KvCache::seq()).
  int64_t kv_layers = 0, kv_ctx = 0, kv_dim = 0;
  int kv_seqs = 1;
  GgmlType kv_type = GgmlType::F16;
  // Host arrays a backend with memory of its own may keep there between ops (the session's activation
  // scratch; backends/backend.h). They must outlive the backend.
  using HostArray = DeviceOptions::HostArray;
  std::vector<HostArray> resident;
  const BackendOptions* options = nullptr;  // from this backend's make_options(); null: its library defaults
  // --degrade tile-mask=F: the fraction of each feed-forward gate/up matrix's row tiles for which a backend
  // that offers masking prepares a mask (Backend::has_tile_mask); 0: none.
  double tile_mask = 0;
};

// The session's part of a device backend's options (backends/device_options.h) from p.
void take_session(const BackendParams& p, DeviceOptions& o);

// What a numeric option takes besides "auto": whole numbers from lo to hi (only powers of two after
// powers_of_two()), and the word "off" after off_is(). The words store auto_value (0 unless auto_is()) and
// off_value.
struct NumberRange {
  NumberRange(long lo_, long hi_) : lo(lo_), hi(hi_) {}
  NumberRange powers_of_two() const {
    NumberRange r = *this;
    r.pow2 = true;
    return r;
  }
  NumberRange auto_is(int v) const {
    NumberRange r = *this;
    r.auto_value = v;
    return r;
  }
  NumberRange off_is(int v) const {
    NumberRange r = *this;
    r.off_value = v;
    return r;
  }
  long lo, hi;
  bool pow2 = false;
  int auto_value = 0;
  std::optional<int> off_value;
};
// An option of "auto" (the default), a number in `range` or "off" where the range takes it: set() passes
// store() the value (the words as the range says); anything else is refused, naming the flag, the value
// and what the option takes ("--cl-gemm-split: '9' is not auto, off or a number from 1 to 8").
OptionSpec number_option(std::string flag, std::string help, NumberRange range,
                         std::function<void(BackendOptions&, int)> store);
// An option of two words, `yes` and `no` (the default as yes_default says): set() passes store() whether
// it was `yes`; anything else is refused, naming the flag, the value and both words, the default first
// ("--vk-coopmat: 'x' is not auto or off").
OptionSpec switch_option(std::string flag, std::string help, std::string yes, std::string no,
                         bool yes_default, std::function<void(BackendOptions&, bool)> store);

// A backend's start-up in milliseconds: cold (from nothing: programs compiled, kernels self-checked) and
// warm (from what the first start cached); negative: not measured.
struct StartTimes {
  double cold_ms = -1;
  double warm_ms = -1;
};

// The cold and warm start of a backend with a program cache (backends/program_cache.h): start(cache) makes
// the backend with those cache options and returns whether it took its programs and verdict from the cache.
// Cold: the cache bypassed but rewritten (refresh), so that the warm start, with the cache on, finds the
// entry; no warm time when the cache is off or that start missed it.
StartTimes time_cold_and_warm_start(const ProgramCacheOptions& cache,
                                    const std::function<bool(const ProgramCacheOptions&)>& start);

// Memory-bandwidth probes of a backend's device for gemv-bw: what a plain read and a plain copy of a buffer
// reach there, measured beside the GEMV rows in the same run.
class MemoryProbe {
 public:
  virtual ~MemoryProbe() = default;
  // The last-level cache the probes assume, in bytes (buffers are sized past it), and the largest buffer
  // they can take.
  virtual size_t cache_bytes() const = 0;
  virtual size_t max_buffer_bytes() const = 0;
  // GB/s of one pure read of `bytes` bytes, and of one copy of them (read + write bytes counted). The
  // buffers are the probe's own, allocated on first use of a size.
  virtual double read_gbs(size_t bytes) = 0;
  virtual double copy_gbs(size_t bytes) = 0;
  // Evicts the cache (writes a buffer larger than it), so that what runs next reads from memory.
  virtual void flush() = 0;
};

struct BackendEntry {
  std::string name;   // --backend NAME
  int mnn_type = -1;  // MNN's backend number: 0 CPU, 1 Metal, 2 CUDA, 3 OpenCL, 7 Vulkan
  bool host = false;  // the host backend: the reference of every other, and where hybrid prefill runs
  // Whether it holds several sequence caches in its own memory (BackendParams::kv_seqs > 1), so that a
  // BatchSession runs on it (the host backend works on the host caches it is handed: always).
  bool multi_seq = false;
  std::string summary;  // one line: what it runs on
  // Prompt tokens per forward pass when the user names none (-b): a GPU's prompt GEMM fills its compute units
  // only with many tokens a pass (llama.cpp's n_ubatch is 512); the CPU's tiles are sized for 64.
  int64_t prompt_batch = 64;
  // Why this backend cannot run on this machine (one line), or empty when it can. May load its runtime
  // library on the first call.
  std::function<std::string()> unavailable;
  // Its devices, with the capability struct clamped by `profile` ("none": as queried).
  std::function<std::vector<DeviceInfo>(const std::string& profile)> devices;
  // Its own options: a fresh struct of library defaults, and the flags that set it.
  std::function<std::unique_ptr<BackendOptions>()> make_options;
  std::vector<OptionSpec> options;
  // The backend for a session or a benchmark. Throws tilellm::Error naming the cause when it cannot be made.
  std::function<std::unique_ptr<Backend>(const BackendParams&)> make;
  // Optional: cold and warm start times (bench --backend NAME).
  std::function<StartTimes(const BackendParams&)> measure_start;
  // Optional: the device's memory probes (gemv-bw).
  std::function<std::unique_ptr<MemoryProbe>(const BackendParams&)> make_probe;
};

// Adds an entry; used through TILELLM_REGISTER_BACKEND at start-up (and by tests). A second entry of the
// same name or MNN number replaces nothing: it is an internal error.
void register_backend(BackendEntry e);

// Every registered backend, the host backend first, then by MNN number.
std::vector<const BackendEntry*> backends();
const BackendEntry* find_backend(std::string_view name);
const BackendEntry* find_backend_mnn(int mnn_type);
const BackendEntry& host_backend();

// The entry named `name` when it is registered and can run here; else throws tilellm::Error saying which
// backends this build has and why `name` cannot be used (not in this build, or unavailable: the reason).
const BackendEntry& require_backend(std::string_view name);
// The same for an MNN backend number.
const BackendEntry& require_backend_mnn(int mnn_type);
// The names of the device (non-host) backends this build has, "opencl" or "opencl, vulkan" ("none" when it
// has none): what an error about a device-only option suggests.
std::string device_backend_names();
// The name MNN gives a backend number ("cpu", "metal", "cuda", "opencl", "vulkan"), or "type N".
std::string mnn_backend_name(int mnn_type);

// The device a command takes when none is named (--device not given): the first of `devs` that is not a GPU
// API emulated on the host CPU, else 0. A host with PoCL's CPU device or lavapipe beside a GPU lists the
// emulated one first on some machines (an H100 host's OpenCL device 0 is a CPU driver); llama.cpp's GPU
// backends skip those devices too.
int default_device(const std::vector<DeviceInfo>& devs);

// require_backend(name).make(p).
std::unique_ptr<Backend> make_backend(std::string_view name, const BackendParams& p);

// e's own options with the flags in `given` (flag -> value, e.g. {"--cl-cache", "off"}) set and every other
// flag at its default: what the CLI's group of e (and the C API's keys) produce. A flag e does not have is
// an error naming e's flags; null for a backend without options of its own.
std::shared_ptr<BackendOptions> make_backend_options(const BackendEntry& e,
                                                     const std::map<std::string, std::string>& given = {});

namespace registry_detail {
struct Registrar {
  explicit Registrar(BackendEntry (*entry)()) { register_backend(entry()); }
};
}  // namespace registry_detail

#define TILELLM_REGISTER_BACKEND(entry_fn)                                          \
  static const ::tilellm::registry_detail::Registrar tilellm_registrar_##entry_fn { \
    entry_fn                                                                        \
  }

}  // namespace tilellm
