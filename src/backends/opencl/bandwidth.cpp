// The OpenCL memory probes (see bandwidth.h).
#include "backends/opencl/bandwidth.h"

#include <algorithm>
#include <map>

#include "backends/opencl/device.h"
#include "backends/opencl/error.h"
#include "base/error.h"

namespace tilellm::opencl {
namespace {

constexpr cl_uchar kFill = 1;

class Probe final : public MemoryProbe {
 public:
  Probe(int device, const std::string& profile)
      : rt_(device, profile, /*profiling=*/true),
        prog_(rt_.build({"bandwidth"})),
        strided_(rt_.kernel(prog_, "read_sum_strided")),
        blocked_(rt_.kernel(prog_, "read_sum_blocked")),
        pairs_(rt_.kernel(prog_, "read_sum_pairs")),
        items_(std::max<size_t>(64, size_t(rt_.caps().compute_units) * 2048)) {
    cl_ulong cache = 0;
    check(clGetDeviceInfo(list_devices()[size_t(device)].device, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE,
                          sizeof cache, &cache, nullptr),
          "clGetDeviceInfo(CL_DEVICE_GLOBAL_MEM_CACHE_SIZE)");
    cache_ = std::max<size_t>(size_t(cache), kMinCacheBytes);
  }

  size_t cache_bytes() const override { return cache_; }
  size_t max_buffer_bytes() const override { return size_t(rt_.caps().max_alloc_bytes / 2); }

  double read_gbs(size_t bytes) override {
    bytes = bytes / 16 * 16;
    const Buffer& src = buffer(0, bytes);
    const cl_ulong n4 = bytes / 16;
    const size_t pair_items = size_t((n4 + 1) / 2);
    if (out_.bytes < std::max(items_, pair_items) * sizeof(float))
      out_ = rt_.alloc(std::max(items_, pair_items) * sizeof(float));
    double best = 0.0;
    for (const Kernel* k : {&strided_, &blocked_, &pairs_}) {
      set_arg(*k, 0, src);
      set_arg(*k, 1, n4);
      set_arg(*k, 2, out_);
      rt_.reset_kernel_times();
      const size_t global[1] = {k == &pairs_ ? pair_items : items_};
      rt_.launch(*k, 1, global, nullptr);
      double ns = 0.0;
      for (const KernelTime& t : rt_.kernel_times()) ns += t.ns;
      best = std::max(best, double(bytes) / ns);
    }
    return best;
  }

  double copy_gbs(size_t bytes) override {
    bytes = bytes / 16 * 16;
    const Buffer& src = buffer(0, bytes);
    const Buffer& dst = buffer(1, bytes);
    rt_.finish();
    cl_event ev = nullptr;
    check(clEnqueueCopyBuffer(rt_.queue(), src.get(), dst.get(), 0, 0, bytes, 0, nullptr, &ev),
          "clEnqueueCopyBuffer");
    check(clWaitForEvents(1, &ev), "clWaitForEvents");
    cl_ulong start = 0, end = 0;
    check(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
          "clGetEventProfilingInfo");
    check(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
          "clGetEventProfilingInfo");
    clReleaseEvent(ev);
    return 2.0 * double(bytes) / double(end - start);
  }

  void flush() override {
    const size_t bytes = cache_ * 3 / 2 / 16 * 16;
    const Buffer& a = buffer(2, bytes);
    const Buffer& b = buffer(3, bytes);
    check(clEnqueueCopyBuffer(rt_.queue(), a.get(), b.get(), 0, 0, bytes, 0, nullptr, nullptr),
          "clEnqueueCopyBuffer");
    rt_.finish();
  }

 private:
  // Buffer `slot` (0 read source, 1 copy target, 2 and 3 the flush's) of `bytes` bytes, filled once when
  // made; a request of another size replaces it.
  const Buffer& buffer(int slot, size_t bytes) {
    Buffer& b = bufs_[slot];
    if (b.bytes != bytes) {
      b = Buffer();
      if (bytes > rt_.caps().max_alloc_bytes)
        fail("gemv-bw: a probe buffer of {} bytes exceeds the device's largest allocation of {} bytes", bytes,
             rt_.caps().max_alloc_bytes);
      b = rt_.alloc(bytes);
      check(clEnqueueFillBuffer(rt_.queue(), b.get(), &kFill, 1, 0, bytes, 0, nullptr, nullptr),
            "clEnqueueFillBuffer");
      rt_.finish();
    }
    return b;
  }

  Runtime rt_;
  ProgramHandle prog_;
  Kernel strided_, blocked_, pairs_;
  size_t items_;  // the looping read kernels' global size: 2048 items per compute unit
  size_t cache_ = 0;
  Buffer out_;
  std::map<int, Buffer> bufs_;
};

}  // namespace

std::unique_ptr<MemoryProbe> make_memory_probe(int device, const std::string& profile) {
  return std::make_unique<Probe>(device, profile);
}

}  // namespace tilellm::opencl
