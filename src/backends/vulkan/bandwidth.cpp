// The Vulkan memory probes (see bandwidth.h).
#include "backends/vulkan/bandwidth.h"

#include <algorithm>
#include <map>

#include "backends/vulkan/runtime.h"
#include "base/error.h"

namespace tilellm::vulkan {
namespace {

constexpr uint32_t kLocal = 256;

class Probe final : public MemoryProbe {
 public:
  Probe(int device, const std::string& profile) : rt_(device, profile, /*profiling=*/true) {
    const uint32_t local = std::min<uint32_t>(kLocal, rt_.caps().max_invocations);
    for (uint32_t mode = 0; mode < 3; ++mode) {
      p_[mode] = rt_.pipeline("bandwidth", false, 2, 4, local, {mode});
      p_[mode].name = mode == 0 ? "read_strided" : mode == 1 ? "read_pairs" : "copy";
    }
  }
  ~Probe() override {
    for (Pipeline& p : p_) rt_.destroy(p);
  }

  size_t cache_bytes() const override { return kMinCacheBytes; }
  size_t max_buffer_bytes() const override {
    return size_t(std::min(rt_.caps().max_alloc_bytes, rt_.caps().max_storage_range) / 2);
  }

  double read_gbs(size_t bytes) override {
    bytes = bytes / 16 * 16;
    const Buffer& src = buffer(0, bytes);
    const uint64_t n4 = bytes / 16;
    // Strided: 2048 invocations per 64 KiB of shared memory's worth of SMs is not knowable here; 1 << 18
    // invocations keep any current GPU busy. Pairs: n4 / 2 invocations.
    const uint64_t strided = std::min<uint64_t>(n4, uint64_t(1) << 18), pairs = (n4 + 1) / 2;
    const Buffer& out = buffer(4, std::max(strided, pairs) * 4);
    double best = 0.0;
    for (uint32_t mode = 0; mode < 2; ++mode)
      best = std::max(best, double(bytes) / time_ns(mode, src, out, n4, mode ? pairs : strided));
    return best;
  }

  double copy_gbs(size_t bytes) override {
    bytes = bytes / 16 * 16;
    const Buffer& src = buffer(0, bytes);
    const Buffer& dst = buffer(1, bytes);
    const uint64_t n4 = bytes / 16;
    return 2.0 * double(bytes) / time_ns(2, src, dst, n4, std::min<uint64_t>(n4, uint64_t(1) << 18));
  }

  void flush() override {
    const size_t bytes = kMinCacheBytes * 3 / 2;
    const Buffer& a = buffer(2, bytes);
    const Buffer& b = buffer(3, bytes);
    rt_.copy(a, 0, b, 0, bytes);
    rt_.finish();
  }

 private:
  // Device time of one dispatch of `mode` over n4 vec4s with `items` invocations.
  double time_ns(uint32_t mode, const Buffer& src, const Buffer& dst, uint64_t n4, uint64_t items) {
    if (n4 > UINT32_MAX) fail("gemv-bw: a probe of {} bytes exceeds the shader's 32-bit indexing", n4 * 16);
    const uint32_t local = p_[mode].local_size, pc = uint32_t(n4);
    const uint64_t groups = (items + local - 1) / local;
    const uint32_t gx = uint32_t(std::min<uint64_t>(groups, rt_.caps().max_group_count[0]));
    const uint32_t gy = uint32_t((groups + gx - 1) / gx);
    rt_.reset_kernel_times();
    rt_.dispatch(p_[mode], {&src, &dst}, &pc, gx, gy);
    double ns = 0.0;
    for (const KernelTime& t : rt_.kernel_times()) ns += t.ns;
    return std::max(ns, 1.0);
  }

  // Buffer `slot` (0 read source, 1 copy target, 2 and 3 the flush's, 4 the reads' outputs) of at least
  // `bytes` bytes, filled once when made; a request of another size replaces it.
  const Buffer& buffer(int slot, size_t bytes) {
    Buffer& b = bufs_[slot];
    if (b.bytes() < bytes || (slot != 4 && b.bytes() != std::max<size_t>((bytes + 15) / 16 * 16, 16))) {
      rt_.finish();
      b = Buffer();
      if (bytes > max_buffer_bytes() * 2)
        fail("gemv-bw: a probe buffer of {} bytes exceeds the device's largest buffer of {} bytes", bytes,
             max_buffer_bytes() * 2);
      b = rt_.alloc(bytes);
      rt_.fill(b, 0, b.bytes(), 0x3c003c00u);  // halves of 1.0: finite floats either way
      rt_.finish();
    }
    return b;
  }

  Runtime rt_;
  Pipeline p_[3];
  std::map<int, Buffer> bufs_;
};

}  // namespace

std::unique_ptr<MemoryProbe> make_memory_probe(int device, const std::string& profile) {
  return std::make_unique<Probe>(device, profile);
}

}  // namespace tilellm::vulkan
