// OpenCL device enumeration, capability queries, device profiles and the runtime guards (see device.h).
#include "backends/opencl/device.h"

#include <CL/cl_ext.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "backends/opencl/error.h"
#include "backends/opencl/kernels.h"
#include "base/error.h"

namespace tilellm::opencl {
namespace {

// Build options must stay below this many bytes (some mobile drivers truncate or reject longer strings, the
// seed's runtime-guard checklist); constants travel in the generated header instead.
constexpr size_t kMaxBuildOptions = 1024;

std::string device_string(cl_device_id d, cl_device_info what, const char* call) {
  size_t n = 0;
  check(clGetDeviceInfo(d, what, 0, nullptr, &n), call);
  std::string s(n, '\0');
  check(clGetDeviceInfo(d, what, n, s.data(), nullptr), call);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  check(clGetPlatformInfo(p, what, 0, nullptr, &n), "clGetPlatformInfo");
  std::string s(n, '\0');
  check(clGetPlatformInfo(p, what, n, s.data(), nullptr), "clGetPlatformInfo");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <typename T>
T device_value(cl_device_id d, cl_device_info what, const char* call) {
  T v{};
  check(clGetDeviceInfo(d, what, sizeof(T), &v, nullptr), call);
  return v;
}

// A query newer than the device's OpenCL version answers CL_INVALID_VALUE: that means "absent", not an error.
template <typename T>
bool optional_device_value(cl_device_id d, cl_device_info what, T& out) {
  return clGetDeviceInfo(d, what, sizeof(T), &out, nullptr) == CL_SUCCESS;
}

bool has_extension(const std::string& exts, std::string_view name) {
  std::istringstream in(exts);
  std::string e;
  while (in >> e) {
    if (e == name) return true;
  }
  return false;
}

// CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE is a kernel property; the device's value is that of a
// trivial kernel (as clinfo reports it).
size_t probe_wg_multiple(const DeviceRef& d) {
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &d.device, nullptr, nullptr, &err);
  check(err, "clCreateContext (probe)");
  const char* src = "__kernel void tl_probe(__global float* x) { x[get_global_id(0)] = 0.0f; }\n";
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, nullptr, &err);
  size_t multiple = 1;
  if (err == CL_SUCCESS && clBuildProgram(prog, 1, &d.device, "", nullptr, nullptr) == CL_SUCCESS) {
    cl_kernel k = clCreateKernel(prog, "tl_probe", &err);
    if (err == CL_SUCCESS) {
      clGetKernelWorkGroupInfo(k, d.device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof(multiple),
                               &multiple, nullptr);
      clReleaseKernel(k);
    }
  }
  if (prog) clReleaseProgram(prog);
  clReleaseContext(ctx);
  return std::max<size_t>(1, multiple);
}

// Whether the device's compiler builds a kernel with PTX's dp4a as inline assembly (NVIDIA's OpenCL does;
// any other compiler rejects the asm statement).
bool probe_ptx_dp4a(const DeviceRef& d) {
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &d.device, nullptr, nullptr, &err);
  check(err, "clCreateContext (probe)");
  const char* src =
      "__kernel void tl_probe(__global uint* x) {\n"
      "  int r;\n"
      "  asm volatile(\"dp4a.s32.u32 %0, %1, %2, %3;\" : \"=r\"(r) : \"r\"(x[0]), \"r\"(x[1]), \"r\"(0));\n"
      "  x[2] = (uint)r;\n"
      "}\n";
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, nullptr, &err);
  const bool built =
      err == CL_SUCCESS && clBuildProgram(prog, 1, &d.device, "", nullptr, nullptr) == CL_SUCCESS;
  if (prog) clReleaseProgram(prog);
  clReleaseContext(ctx);
  return built;
}

}  // namespace

// Each family's published limits; docs/OPENCL.md gives the source of every number. The work-group multiple
// is the family's SIMD width (what its driver reports as the preferred multiple), set even on devices that
// report a smaller one, so that the global-size rounding and tail guards run as they would there.
const std::vector<DeviceProfile>& profiles() {
  static const std::vector<DeviceProfile> kProfiles = {
      {"none", UINT64_MAX, SIZE_MAX, 0, SIZE_MAX, true, UINT64_MAX, SIZE_MAX, SIZE_MAX},
      {"powervr-rogue", 4096, 512, 32, 0, true, uint64_t(256) << 20, 8192, 8192},
      {"mali-valhall", 32768, 1024, 16, 16, true, uint64_t(1) << 30, 65536, 65536},
      {"adreno-7xx", 32768, 1024, 128, 128, true, uint64_t(1) << 30, 16384, 16384},
  };
  return kProfiles;
}

const DeviceProfile& find_profile(std::string_view name) {
  std::string known;
  for (const DeviceProfile& p : profiles()) {
    if (p.name == name) return p;
    known += known.empty() ? "" : ", ";
    known += p.name;
  }
  fail("unknown OpenCL device profile '{}' (known: {})", name, known);
}

void apply_profile(Capabilities& c, const DeviceProfile& p) {
  c.profile = std::string(p.name);
  c.local_mem_bytes = std::min(c.local_mem_bytes, p.local_mem_bytes);
  c.max_work_group_size = std::min(c.max_work_group_size, p.max_work_group_size);
  if (p.wg_multiple > 0) c.wg_multiple = std::min(p.wg_multiple, c.max_work_group_size);
  c.fp16 = c.fp16 && p.fp16;
  c.max_alloc_bytes = std::min(c.max_alloc_bytes, p.max_alloc_bytes);
  c.image2d_max_width = std::min(c.image2d_max_width, p.image2d_max_width);
  c.image2d_max_height = std::min(c.image2d_max_height, p.image2d_max_height);
  // A family without subgroups turns them off; one with a smaller maximum keeps them only if the device's
  // known sizes fit under it (unknown sizes: the reductions work with any size, so they stay on).
  if (p.max_subgroup_size == 0) {
    c.subgroups = false;
  } else if (c.max_subgroup_size > p.max_subgroup_size) {
    c.subgroups = false;
  }
  if (!c.subgroups) {
    c.subgroup_sizes.clear();
    c.max_subgroup_size = 0;
  }
}

std::vector<DeviceRef> list_devices() {
  cl_uint np = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &np);
  // The ICD loader answers CL_PLATFORM_NOT_FOUND_KHR (-1001) when no platform is installed.
  if (err == CL_PLATFORM_NOT_FOUND_KHR || np == 0) return {};
  check(err, "clGetPlatformIDs");
  std::vector<cl_platform_id> plats(np);
  check(clGetPlatformIDs(np, plats.data(), nullptr), "clGetPlatformIDs");
  std::vector<DeviceRef> out;
  for (cl_platform_id p : plats) {
    cl_uint nd = 0;
    const cl_int e = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd);
    if (e == CL_DEVICE_NOT_FOUND || nd == 0) continue;
    check(e, "clGetDeviceIDs");
    std::vector<cl_device_id> devs(nd);
    check(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr), "clGetDeviceIDs");
    for (cl_device_id d : devs) out.push_back({p, d});
  }
  return out;
}

Capabilities query_capabilities(const DeviceRef& ref) {
  const cl_device_id d = ref.device;
  Capabilities c;
  c.platform = platform_string(ref.platform, CL_PLATFORM_NAME);
  c.platform_version = platform_string(ref.platform, CL_PLATFORM_VERSION);
  c.name = device_string(d, CL_DEVICE_NAME, "clGetDeviceInfo(CL_DEVICE_NAME)");
  c.vendor = device_string(d, CL_DEVICE_VENDOR, "clGetDeviceInfo(CL_DEVICE_VENDOR)");
  c.device_version = device_string(d, CL_DEVICE_VERSION, "clGetDeviceInfo(CL_DEVICE_VERSION)");
  c.driver_version = device_string(d, CL_DRIVER_VERSION, "clGetDeviceInfo(CL_DRIVER_VERSION)");
  c.c_version = device_string(d, CL_DEVICE_OPENCL_C_VERSION, "clGetDeviceInfo(CL_DEVICE_OPENCL_C_VERSION)");
  if (std::sscanf(c.device_version.c_str(), "OpenCL %d.%d", &c.cl_major, &c.cl_minor) != 2) {
    fail("OpenCL device '{}' reports an unparsable version '{}'", c.name, c.device_version);
  }
  if (c.cl_major < 1 || (c.cl_major == 1 && c.cl_minor < 2)) {
    fail("OpenCL device '{}' is {}.{}; TileLLM needs OpenCL 1.2 or newer", c.name, c.cl_major, c.cl_minor);
  }
  c.cpu_device =
      (device_value<cl_device_type>(d, CL_DEVICE_TYPE, "clGetDeviceInfo(TYPE)") & CL_DEVICE_TYPE_CPU) != 0;
  c.compute_units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS, "clGetDeviceInfo(COMPUTE_UNITS)");
  c.max_work_group_size =
      device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, "clGetDeviceInfo(MAX_WORK_GROUP_SIZE)");
  c.local_mem_bytes = device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE, "clGetDeviceInfo(LOCAL_MEM_SIZE)");
  c.local_mem_dedicated = device_value<cl_device_local_mem_type>(
                              d, CL_DEVICE_LOCAL_MEM_TYPE, "clGetDeviceInfo(LOCAL_MEM_TYPE)") == CL_LOCAL;
  c.global_mem_bytes =
      device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE, "clGetDeviceInfo(GLOBAL_MEM_SIZE)");
  c.max_alloc_bytes =
      device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, "clGetDeviceInfo(MAX_MEM_ALLOC_SIZE)");
  const std::string exts = device_string(d, CL_DEVICE_EXTENSIONS, "clGetDeviceInfo(CL_DEVICE_EXTENSIONS)");
  c.fp16 = has_extension(exts, "cl_khr_fp16");
  const auto fp =
      device_value<cl_device_fp_config>(d, CL_DEVICE_SINGLE_FP_CONFIG, "clGetDeviceInfo(FP_CONFIG)");
  c.fp32_correctly_rounded_div_sqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;

  c.subgroups = has_extension(exts, "cl_khr_subgroups");
  if (c.cl_major > 2 || (c.cl_major == 2 && c.cl_minor >= 1)) {
    cl_uint n = 0;
    if (optional_device_value(d, CL_DEVICE_MAX_NUM_SUB_GROUPS, n)) c.max_subgroups_per_wg = n;
  }
  if (has_extension(exts, "cl_intel_required_subgroup_size")) {
    size_t n = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_SUB_GROUP_SIZES_INTEL, 0, nullptr, &n) == CL_SUCCESS && n > 0) {
      c.subgroup_sizes.resize(n / sizeof(size_t));
      check(clGetDeviceInfo(d, CL_DEVICE_SUB_GROUP_SIZES_INTEL, n, c.subgroup_sizes.data(), nullptr),
            "clGetDeviceInfo(CL_DEVICE_SUB_GROUP_SIZES_INTEL)");
      for (size_t s : c.subgroup_sizes) c.max_subgroup_size = std::max(c.max_subgroup_size, s);
    }
  }

  c.images = device_value<cl_bool>(d, CL_DEVICE_IMAGE_SUPPORT, "clGetDeviceInfo(IMAGE_SUPPORT)") != 0;
  if (c.images) {
    c.image2d_max_width = device_value<size_t>(d, CL_DEVICE_IMAGE2D_MAX_WIDTH, "clGetDeviceInfo(IMAGE2D_W)");
    c.image2d_max_height =
        device_value<size_t>(d, CL_DEVICE_IMAGE2D_MAX_HEIGHT, "clGetDeviceInfo(IMAGE2D_H)");
  }
  c.wg_multiple = probe_wg_multiple(ref);
  if (has_extension(exts, "cl_khr_integer_dot_product"))
    c.int_dot = Capabilities::IntDot::Khr;
  else if (!c.cpu_device && probe_ptx_dp4a(ref))
    c.int_dot = Capabilities::IntDot::Ptx;
  return c;
}

std::string describe(const Capabilities& c) {
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  std::string sizes;
  for (size_t s : c.subgroup_sizes) {
    if (!sizes.empty()) sizes += ',';
    sizes += std::to_string(s);
  }
  std::string s;
  s += fmt::format("  name: {}\n  vendor: {}\n  platform: {}\n", c.name, c.vendor, c.platform);
  s += fmt::format("  version: {} (OpenCL C: {}; driver {})\n", c.device_version, c.c_version,
                   c.driver_version);
  s += fmt::format("  profile: {}\n", c.profile);
  s += fmt::format("  compute units: {}\n  max work-group size: {}\n  preferred work-group multiple: {}\n",
                   c.compute_units, c.max_work_group_size, c.wg_multiple);
  s += fmt::format("  local memory: {} bytes ({})\n", c.local_mem_bytes,
                   c.local_mem_dedicated ? "on chip" : "emulated in global memory");
  s += fmt::format("  global memory: {} MiB\n  max allocation: {} MiB\n", c.global_mem_bytes >> 20,
                   c.max_alloc_bytes >> 20);
  s += fmt::format("  fp16 arithmetic (cl_khr_fp16): {}\n  correctly rounded fp32 div/sqrt: {}\n",
                   yes(c.fp16), yes(c.fp32_correctly_rounded_div_sqrt));
  s += fmt::format("  subgroup reductions (cl_khr_subgroups): {}\n  subgroup sizes: {}\n", yes(c.subgroups),
                   sizes.empty() ? "not reported" : sizes);
  s += fmt::format("  max subgroups per work-group: {}\n", c.max_subgroups_per_wg);
  s += fmt::format("  integer dot products (4 x 8 bits): {}\n",
                   c.int_dot == Capabilities::IntDot::Khr   ? "cl_khr_integer_dot_product"
                   : c.int_dot == Capabilities::IntDot::Ptx ? "PTX dp4a (inline assembly)"
                                                            : "no");
  s += fmt::format("  images: {}", yes(c.images));
  if (c.images) s += fmt::format(" (2D up to {} x {})", c.image2d_max_width, c.image2d_max_height);
  s += "\n";
  return s;
}

std::string_view kernel_source(std::string_view name) {
  for (size_t i = 0; i < kKernelSourceCount; ++i) {
    if (name == kKernelSources[i].name) return kKernelSources[i].text;
  }
  fail("internal: no OpenCL kernel file '{}.cl' was embedded in this build", name);
}

Runtime::Runtime(int device, std::string_view profile, bool profiling) : profiling_(profiling) {
  const DeviceProfile& prof = find_profile(profile);
  const std::vector<DeviceRef> devs = list_devices();
  if (devs.empty()) fail("no OpenCL device found (is an OpenCL driver (ICD) installed? see `clinfo`)");
  if (device < 0 || size_t(device) >= devs.size()) {
    fail("OpenCL device {} does not exist: {} device(s) found (see `tilellm devices`)", device, devs.size());
  }
  dev_ = devs[size_t(device)];
  caps_ = query_capabilities(dev_);
  apply_profile(caps_, prof);
  cl_int err = CL_SUCCESS;
  context_ = clCreateContext(nullptr, 1, &dev_.device, nullptr, nullptr, &err);
  check(err, "clCreateContext");
  queue_ = clCreateCommandQueue(context_, dev_.device, profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
  if (err != CL_SUCCESS) {
    clReleaseContext(context_);
    check(err, "clCreateCommandQueue");
  }
}

Runtime::~Runtime() {
  if (queue_) {
    clFinish(queue_);
    for (const PendingLaunch& p : pending_) clReleaseEvent(p.event);
    clReleaseCommandQueue(queue_);
  }
  if (context_) clReleaseContext(context_);
}

// Only what the kernels read goes here: every distinct header is a distinct program for the driver's
// compiler cache, so a constant no kernel uses would only cost compile time.
std::string Runtime::generated_header(const std::string& extra_defines) const {
  std::string h = "// Generated for this device and profile by the TileLLM OpenCL runtime.\n";
  h += fmt::format("#define TL_SUBGROUPS {}\n", caps_.subgroups ? 1 : 0);
  h += fmt::format("#define TL_FP16 {}\n", caps_.fp16 ? 1 : 0);
  if (caps_.subgroups) h += "#pragma OPENCL EXTENSION cl_khr_subgroups : enable\n";
  h += extra_defines;
  if (!h.empty() && h.back() != '\n') h += '\n';
  return h;
}

ProgramHandle Runtime::build(const std::vector<std::string_view>& ops,
                             const std::string& extra_defines) const {
  std::string label;  // the files, for messages
  for (std::string_view o : ops) {
    label += label.empty() ? "" : "+";
    label += o;
  }
  return build_source(label, op_sources(ops), extra_defines);
}

ProgramHandle Runtime::build_source(std::string_view op, std::string_view body,
                                    const std::string& extra_defines) const {
  return build_text(op, program_text(body, extra_defines));
}

std::string Runtime::op_sources(const std::vector<std::string_view>& ops) {
  std::string body;
  for (std::string_view o : ops) {
    body += kernel_source(o);
    if (body.back() != '\n') body += '\n';
  }
  return body;
}

std::string Runtime::program_text(std::string_view body, const std::string& extra_defines) const {
  std::string src = generated_header(extra_defines);
  for (std::string_view part : {kernel_source("common"), kernel_source("quants"), kernel_source("gemm"),
                                kernel_source("gemm_q8"), body}) {
    src += part;
    if (src.back() != '\n') src += '\n';
  }
  // Guard: some compilers reject (or misparse a last directive of) a source without a final newline.
  if (src.empty() || src.back() != '\n') src += '\n';
  return src;
}

std::string Runtime::build_options() const {
  std::string options = "-cl-std=CL1.2";
  if (caps_.fp32_correctly_rounded_div_sqrt) options += " -cl-fp32-correctly-rounded-divide-sqrt";
  return options;
}

ProgramHandle Runtime::build_text(std::string_view op, const std::string& src) const {
  const std::string options = build_options();
  if (options.size() >= kMaxBuildOptions) {
    fail("internal: OpenCL build options for {}.cl are {} bytes (limit {})", op, options.size(),
         kMaxBuildOptions);
  }
  const char* text = src.c_str();
  const size_t len = src.size();
  cl_int err = CL_SUCCESS;
  ProgramHandle prog(clCreateProgramWithSource(context_, 1, &text, &len, &err));
  check(err, "clCreateProgramWithSource");
  err = clBuildProgram(prog.get(), 1, &dev_.device, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(prog.get(), dev_.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(prog.get(), dev_.device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    fail("OpenCL: clBuildProgram failed for {}.cl: {} ({}); build log:\n{}", op, cl_error_name(err), int(err),
         log);
  }
  return prog;
}

// A binary the driver returned for this device is still only trusted as far as the driver accepts it: a
// driver update that kept its version string, or a damaged file that passed the cache's checks, shows up
// here as a failed create or build, which the caller answers by building from source.
ProgramHandle Runtime::build_binary(std::string_view op, const std::vector<uint8_t>& binary) const {
  if (binary.empty()) fail("OpenCL: empty program binary for {}", op);
  const std::string options = build_options();
  const unsigned char* bin = binary.data();
  const size_t len = binary.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  ProgramHandle prog(clCreateProgramWithBinary(context_, 1, &dev_.device, &len, &bin, &status, &err));
  check(err, fmt::format("clCreateProgramWithBinary({})", op));
  check(status, fmt::format("clCreateProgramWithBinary({}) binary status", op));
  check(clBuildProgram(prog.get(), 1, &dev_.device, options.c_str(), nullptr, nullptr),
        fmt::format("clBuildProgram({} from its binary)", op));
  return prog;
}

std::vector<uint8_t> Runtime::program_binary(const ProgramHandle& program) const {
  // The program is built for one device, so there is one binary.
  size_t size = 0;
  check(clGetProgramInfo(program.get(), CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr),
        "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
  std::vector<uint8_t> bin(size);
  unsigned char* p = bin.data();
  if (size > 0) {
    check(clGetProgramInfo(program.get(), CL_PROGRAM_BINARIES, sizeof p, &p, nullptr),
          "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  }
  return bin;
}

Kernel Runtime::kernel(const ProgramHandle& program, const char* name) const {
  cl_int err = CL_SUCCESS;
  Kernel k;
  k.handle = KernelHandle(clCreateKernel(program.get(), name, &err));
  check(err, fmt::format("clCreateKernel({})", name));
  k.name = name;
  size_t multiple = 1, max_wg = 1;
  check(clGetKernelWorkGroupInfo(k.get(), dev_.device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                 sizeof(multiple), &multiple, nullptr),
        fmt::format("clGetKernelWorkGroupInfo({}, PREFERRED_WORK_GROUP_SIZE_MULTIPLE)", name));
  check(clGetKernelWorkGroupInfo(k.get(), dev_.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(max_wg), &max_wg,
                                 nullptr),
        fmt::format("clGetKernelWorkGroupInfo({}, WORK_GROUP_SIZE)", name));
  cl_ulong local = 0;
  check(clGetKernelWorkGroupInfo(k.get(), dev_.device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof(local), &local,
                                 nullptr),
        fmt::format("clGetKernelWorkGroupInfo({}, LOCAL_MEM_SIZE)", name));
  k.local_bytes = size_t(local);
  // A profile's multiple (its GPUs' SIMD width) replaces the host device's, so rounding follows the target.
  k.max_wg = std::max<size_t>(1, std::min(max_wg, caps_.max_work_group_size));
  k.wg_multiple = caps_.profile == "none" ? std::max<size_t>(1, multiple) : caps_.wg_multiple;
  return k;
}

Buffer Runtime::alloc(size_t bytes, cl_mem_flags flags, const void* init) const {
  if (bytes == 0) bytes = 4;  // a zero-sized buffer is CL_INVALID_BUFFER_SIZE; kernels never read it then
  if (bytes > caps_.max_alloc_bytes) {
    fail("OpenCL: a buffer of {} bytes exceeds the device's largest allocation of {} bytes (profile {})",
         bytes, caps_.max_alloc_bytes, caps_.profile);
  }
  cl_int err = CL_SUCCESS;
  if (init) flags |= CL_MEM_COPY_HOST_PTR;
  Buffer b;
  b.mem = MemHandle(clCreateBuffer(context_, flags, bytes, const_cast<void*>(init), &err));
  check(err, fmt::format("clCreateBuffer({} bytes)", bytes));
  b.bytes = bytes;
  return b;
}

void Runtime::write(const Buffer& b, size_t offset, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  if (offset + bytes > b.bytes)
    fail("internal: OpenCL write of {} bytes at {} into {}", bytes, offset, b.bytes);
  check(clEnqueueWriteBuffer(queue_, b.get(), CL_FALSE, offset, bytes, src, 0, nullptr, nullptr),
        "clEnqueueWriteBuffer");
}

void Runtime::write_now(const Buffer& b, size_t offset, const void* src, size_t bytes) const {
  if (bytes == 0) return finish();
  if (offset + bytes > b.bytes)
    fail("internal: OpenCL write of {} bytes at {} into {}", bytes, offset, b.bytes);
  check(clEnqueueWriteBuffer(queue_, b.get(), CL_TRUE, offset, bytes, src, 0, nullptr, nullptr),
        "clEnqueueWriteBuffer");
}

void Runtime::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
                   size_t bytes) const {
  if (bytes == 0) return;
  if (src_offset + bytes > src.bytes || dst_offset + bytes > dst.bytes) {
    fail("internal: OpenCL copy of {} bytes from {} of {} to {} of {}", bytes, src_offset, src.bytes,
         dst_offset, dst.bytes);
  }
  check(clEnqueueCopyBuffer(queue_, src.get(), dst.get(), src_offset, dst_offset, bytes, 0, nullptr, nullptr),
        "clEnqueueCopyBuffer");
}

void Runtime::read(const Buffer& b, size_t offset, void* dst, size_t bytes) const {
  if (bytes == 0) return finish();
  if (offset + bytes > b.bytes)
    fail("internal: OpenCL read of {} bytes at {} from {}", bytes, offset, b.bytes);
  check(clEnqueueReadBuffer(queue_, b.get(), CL_TRUE, offset, bytes, dst, 0, nullptr, nullptr),
        "clEnqueueReadBuffer");
  if (!pending_.empty()) collect_times();  // every earlier launch has completed
}

void Runtime::finish() const {
  check(clFinish(queue_), "clFinish");
  if (!pending_.empty()) collect_times();
}

void Runtime::collect_times() const {
  for (const PendingLaunch& p : pending_) {
    cl_ulong start = 0, end = 0;
    check(clGetEventProfilingInfo(p.event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
          "clGetEventProfilingInfo");
    check(clGetEventProfilingInfo(p.event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
          "clGetEventProfilingInfo");
    clReleaseEvent(p.event);
    auto it =
        std::find_if(times_.begin(), times_.end(), [&](const KernelTime& t) { return t.name == *p.kernel; });
    if (it == times_.end()) it = times_.insert(times_.end(), KernelTime{*p.kernel, 0, 0.0, {}});
    it->calls += 1;
    it->ns += double(end - start);
  }
  pending_.clear();
}

std::vector<KernelTime> Runtime::kernel_times() const {
  if (profiling_) finish();
  return times_;
}

void Runtime::reset_kernel_times() const {
  if (profiling_) finish();
  times_.clear();
}

void Runtime::launch(const Kernel& k, int dims, const size_t* global, const size_t* local) const {
  const cl_int err = enqueue(k, dims, global, local);
  if (err != CL_SUCCESS) check_failed(err, fmt::format("clEnqueueNDRangeKernel({})", k.name));
}

bool Runtime::try_launch(const Kernel& k, int dims, const size_t* global, const size_t* local) const {
  const cl_int err = enqueue(k, dims, global, local);
  if (err == CL_OUT_OF_RESOURCES) return false;
  if (err != CL_SUCCESS) check_failed(err, fmt::format("clEnqueueNDRangeKernel({})", k.name));
  return true;
}

cl_int Runtime::enqueue(const Kernel& k, int dims, const size_t* global, const size_t* local) const {
  size_t g[3] = {1, 1, 1};
  for (int i = 0; i < dims; ++i) {
    const size_t m = local ? local[i] : (i == 0 ? k.wg_multiple : 1);
    g[i] = (global[i] + m - 1) / m * m;
    if (g[i] == 0) return CL_SUCCESS;  // nothing to do
  }
  if (local) {
    size_t total = 1;
    for (int i = 0; i < dims; ++i) total *= local[i];
    if (total > k.max_wg) {
      fail("OpenCL: kernel {} needs a work-group of {} items but this device (profile {}) allows {}", k.name,
           total, caps_.profile, k.max_wg);
    }
  }
  // The call's name is formatted only on failure: launches run every op of decode, which allocates nothing.
  cl_event ev = nullptr;
  const cl_int err = clEnqueueNDRangeKernel(queue_, k.get(), cl_uint(dims), nullptr, g, local, 0, nullptr,
                                            profiling_ ? &ev : nullptr);
  if (ev) pending_.push_back({ev, &k.name});
  if (err != CL_SUCCESS) return err;
  ++launches_;
  if (flush_every_ > 0 && ++since_flush_ >= flush_every_) {
    since_flush_ = 0;
    ++flushes_;
    check(clFlush(queue_), "clFlush");
  }
  return err;
}

void set_arg(const Kernel& k, cl_uint i, size_t size, const void* value) {
  const cl_int err = clSetKernelArg(k.get(), i, size, value);  // named on failure only, as in launch()
  if (err != CL_SUCCESS) check_failed(err, fmt::format("clSetKernelArg({}, {})", k.name, i));
}

}  // namespace tilellm::opencl
