// OpenCL devices: enumeration, the capability struct every kernel choice is made from, the device profiles
// that clamp it to real mobile GPUs' limits, and the runtime (context, queue, program builds, launches) with
// the seed's runtime guards:
//  - a program's source always ends with '\n';
//  - build options stay under 1024 bytes; constants go into a generated header prepended to the source;
//  - global sizes are rounded up to the kernel's preferred work-group multiple (the profile's, when one is
//    set), and kernels guard their tail items;
//  - every CL error is reported by name together with the call that failed (error.h).
// Kernel variants are picked from Capabilities only, never from vendor or device-name strings.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/kernel_time.h"

namespace tilellm::opencl {

// What the kernels may rely on, queried once per device and then clamped by the profile.
struct Capabilities {
  // Identification (printed, never used to choose a kernel).
  std::string platform, platform_version, name, vendor, device_version, driver_version, c_version;
  int cl_major = 1, cl_minor = 2;  // from CL_DEVICE_VERSION "OpenCL <major>.<minor> ..."

  bool cpu_device = false;  // CL_DEVICE_TYPE_CPU (PoCL's CPU device): the host's cores, no GPU
  uint32_t compute_units = 0;
  size_t max_work_group_size = 0;    // CL_DEVICE_MAX_WORK_GROUP_SIZE
  size_t wg_multiple = 1;            // preferred work-group size multiple (probe kernel, or the profile's)
  uint64_t local_mem_bytes = 0;      // CL_DEVICE_LOCAL_MEM_SIZE
  bool local_mem_dedicated = false;  // CL_LOCAL (on-chip) rather than CL_GLOBAL (emulated in memory)
  uint64_t global_mem_bytes = 0;
  uint64_t max_alloc_bytes = 0;  // CL_DEVICE_MAX_MEM_ALLOC_SIZE: the largest single buffer

  bool fp16 = false;  // cl_khr_fp16: half arithmetic (half storage through vload_half is core OpenCL 1.2)
  bool fp32_correctly_rounded_div_sqrt = false;  // may build with -cl-fp32-correctly-rounded-divide-sqrt

  // Subgroups: `subgroups` means the kernels may call sub_group_reduce_add/max (cl_khr_subgroups). The sizes
  // come from cl_intel_required_subgroup_size when present; 0 = not reported (the reductions do not need it).
  bool subgroups = false;
  uint32_t max_subgroups_per_wg = 0;  // OpenCL 2.1+/3.0 CL_DEVICE_MAX_NUM_SUB_GROUPS; 0 = none or not asked
  std::vector<size_t> subgroup_sizes;
  size_t max_subgroup_size = 0;

  bool images = false;  // CL_DEVICE_IMAGE_SUPPORT
  size_t image2d_max_width = 0, image2d_max_height = 0;

  // A dot product of four 8-bit integers with a 32-bit sum (the prompt products under --activations q8,
  // kernels/gemm_q8.cl): Khr, cl_khr_integer_dot_product; Ptx, the compiler takes PTX's dp4a as inline
  // assembly (NVIDIA's OpenCL: a probe build on GPU devices); None.
  enum class IntDot { None, Khr, Ptx };
  IntDot int_dot = IntDot::None;

  std::string profile = "none";  // the device profile applied (see profiles())
};

// A device profile: the published limits of a GPU family. apply_profile() takes the minimum of each limit and
// the device's, turns off features the family lacks, and sets the work-group multiple to the family's, so the
// constrained kernel paths run (and are tested) on any OpenCL device. Numbers and sources: docs/OPENCL.md.
struct DeviceProfile {
  std::string_view name;
  uint64_t local_mem_bytes;
  size_t max_work_group_size;
  size_t wg_multiple;
  size_t max_subgroup_size;  // 0: the family has no cl_khr_subgroups
  bool fp16;
  uint64_t max_alloc_bytes;
  size_t image2d_max_width, image2d_max_height;
};

// "none" first (no clamping), then every GPU family profile.
const std::vector<DeviceProfile>& profiles();
// Throws tilellm::Error listing the known names for an unknown one.
const DeviceProfile& find_profile(std::string_view name);
void apply_profile(Capabilities& caps, const DeviceProfile& p);

struct DeviceRef {
  cl_platform_id platform;
  cl_device_id device;
};
// Every device of every platform, platforms in ICD order; index i is `--device i`. Empty when no OpenCL
// platform is installed (that is not an error here; opening a device is).
std::vector<DeviceRef> list_devices();
// Queries the capability struct of a device (including a probe kernel for the work-group multiple).
Capabilities query_capabilities(const DeviceRef& d);
// Human-readable, one "key: value" per line, for `tilellm devices`.
std::string describe(const Capabilities& caps);

// Owning handles for CL objects (release on destruction, move-only).
template <typename T, cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}
  ~Handle() {
    if (h_) Release(h_);
  }
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  T get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  T h_ = nullptr;
};
using MemHandle = Handle<cl_mem, clReleaseMemObject>;
using KernelHandle = Handle<cl_kernel, clReleaseKernel>;
using ProgramHandle = Handle<cl_program, clReleaseProgram>;

// A device buffer of `bytes` bytes.
struct Buffer {
  MemHandle mem;
  size_t bytes = 0;
  cl_mem get() const { return mem.get(); }
};

// A built kernel with the launch facts queried once: its preferred multiple (clamped to the profile's), the
// largest work-group it can run with on this device and the local memory it takes as compiled (its __local
// arrays and what the implementation adds; __local pointer arguments, such as the GEMM's tiles, come on top).
struct Kernel {
  KernelHandle handle;
  std::string name;
  size_t wg_multiple = 1;
  size_t max_wg = 1;
  size_t local_bytes = 0;
  bool on_cpu = false;  // failed the backend's self-check: its op runs on the CPU backend instead
  cl_kernel get() const { return handle.get(); }
};

// One device opened for compute: its context, one in-order queue, and the capability struct (profile
// applied). Programs are built from the embedded kernel sources (kernels.h).
class Runtime {
 public:
  // device: index into list_devices(); profile: a profiles() name. profiling: the queue records start and
  // end timestamps of every kernel (kernel_times()); each launch then creates an event, kept until the next
  // blocking call, so it costs a little time and memory per launch: it is off unless asked for.
  Runtime(int device, std::string_view profile, bool profiling = false);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Capabilities& caps() const { return caps_; }
  cl_context context() const { return context_; }
  cl_command_queue queue() const { return queue_; }

  // Builds one program from the op files `ops` (kernels/<op>.cl) behind the generated header and the shared
  // helpers (kernels/common.cl, quants.cl, gemm.cl). `extra_defines` are more "#define NAME VALUE" lines for
  // the generated header. Throws with the build log on failure. One program for many ops costs one compiler
  // invocation instead of one per op (the fixed cost dominates on PoCL and on mobile drivers alike).
  ProgramHandle build(const std::vector<std::string_view>& ops, const std::string& extra_defines = "") const;
  // The same for a source text not among the embedded files (`label` names it in errors): the self-check's
  // test hook builds a deliberately broken kernel this way.
  ProgramHandle build_source(std::string_view label, std::string_view body,
                             const std::string& extra_defines = "") const;
  // The steps of build() and build_source(), for the program binary cache (backends/program_cache.h): the op
  // files concatenated, the full source text compiled (generated header, helpers, then `body`), the build
  // options, a build from that text, a build from a binary this device's driver returned before (throws
  // tilellm::Error when the driver rejects it), and a built program's binary.
  static std::string op_sources(const std::vector<std::string_view>& ops);
  std::string program_text(std::string_view body, const std::string& extra_defines = "") const;
  std::string build_options() const;
  ProgramHandle build_text(std::string_view label, const std::string& text) const;
  ProgramHandle build_binary(std::string_view label, const std::vector<uint8_t>& binary) const;
  std::vector<uint8_t> program_binary(const ProgramHandle& program) const;
  Kernel kernel(const ProgramHandle& program, const char* name) const;

  Buffer alloc(size_t bytes, cl_mem_flags flags = CL_MEM_READ_WRITE, const void* init = nullptr) const;
  // Non-blocking write (the queue is in order; the host data must live until the next finish()/read).
  void write(const Buffer& b, size_t offset, const void* src, size_t bytes) const;
  // Blocking write: returns once every earlier command and this write have finished (src may change then).
  void write_now(const Buffer& b, size_t offset, const void* src, size_t bytes) const;
  // Blocking read: returns once every earlier command has finished and the data is on the host.
  void read(const Buffer& b, size_t offset, void* dst, size_t bytes) const;
  // Device-to-device copy, enqueued (nothing waits for it).
  void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes) const;
  void finish() const;

  // Enqueues a kernel over a `dims`-dimensional range. local == nullptr: the device picks the work-group
  // and each global size is rounded up to the kernel's preferred multiple (the kernel guards the tail).
  // With local sizes, each global size is rounded up to a multiple of its local size.
  void launch(const Kernel& k, int dims, const size_t* global, const size_t* local) const;
  // Submits the queued commands every `launches` launches (clFlush); 0: only when a blocking call waits
  // for them. A driver may hold queued kernels until then, so the host's enqueueing of a decode step does
  // not overlap the device's work on it (--cl-flush).
  void set_flush_every(int launches) { flush_every_ = launches; }
  // Launches enqueued and flushes issued since the runtime was made.
  uint64_t launches() const { return launches_; }
  uint64_t flushes() const { return flushes_; }
  // As launch, but false where the driver refuses the launch for its resources (CL_OUT_OF_RESOURCES) although
  // every limit it reports allows it; any other failure throws.
  bool try_launch(const Kernel& k, int dims, const size_t* global, const size_t* local) const;

  // With profiling: per kernel name, the launches and device time since the last reset, in the order the
  // kernels first ran (finishes the queue first). Without: empty.
  std::vector<KernelTime> kernel_times() const;
  void reset_kernel_times() const;

  // The generated header every program starts with (exposed for tests of the guards).
  std::string generated_header(const std::string& extra_defines) const;

 private:
  DeviceRef dev_{};
  Capabilities caps_;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  bool profiling_ = false;
  int flush_every_ = 0;
  mutable int since_flush_ = 0;  // launches since the last flush
  mutable uint64_t launches_ = 0, flushes_ = 0;
  // Profiling: events of launches not yet read (read at blocking calls, when they have completed), and the
  // totals so far.
  struct PendingLaunch {
    cl_event event;
    const std::string* kernel;  // the Kernel's name (kernels live as long as the runtime's users)
  };
  mutable std::vector<PendingLaunch> pending_;
  mutable std::vector<KernelTime> times_;
  void collect_times() const;
  // launch's work: the enqueue's status (the rounding and the work-group check throw as launch documents).
  cl_int enqueue(const Kernel& k, int dims, const size_t* global, const size_t* local) const;
};

// Sets kernel argument i (a cl_mem, a scalar, or local memory of `bytes` bytes).
void set_arg(const Kernel& k, cl_uint i, size_t size, const void* value);
template <typename T>
void set_arg(const Kernel& k, cl_uint i, const T& v) {
  set_arg(k, i, sizeof(T), &v);
}
inline void set_arg(const Kernel& k, cl_uint i, const Buffer& b) {
  cl_mem m = b.get();
  set_arg(k, i, sizeof(cl_mem), &m);
}
inline void set_local_arg(const Kernel& k, cl_uint i, size_t bytes) {
  set_arg(k, i, bytes, nullptr);
}
// A __global pointer argument left null (a kernel's optional buffer; OpenCL 1.2 allows a null buffer).
inline void set_null_arg(const Kernel& k, cl_uint i) {
  const cl_mem m = nullptr;
  set_arg(k, i, sizeof(cl_mem), &m);
}

}  // namespace tilellm::opencl
