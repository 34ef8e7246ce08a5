// The CUDA memory probes (see bandwidth.h).
#include "backends/cuda/bandwidth.h"

#include <algorithm>
#include <map>

#include "backends/cuda/error.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/runtime.h"
#include "base/error.h"

namespace tilellm::cuda {
namespace {

class Probe final : public MemoryProbe {
 public:
  explicit Probe(int device) : rt_(device, /*profiling=*/false) {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&end_), "cudaEventCreate");
    sink_ = rt_.alloc(16);
  }
  ~Probe() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(end_);
  }

  size_t cache_bytes() const override { return rt_.caps().l2_bytes; }
  size_t max_buffer_bytes() const override { return rt_.caps().total_memory / 8; }

  double read_gbs(size_t bytes) override {
    bytes = bytes / 16 * 16;
    const Buffer& src = buffer(0, bytes);
    const double ns =
        timed([&] { read_probe(src.get(), bytes, sink_.as<uint32_t>(), rt_.caps().sm_count, rt_.stream()); });
    return double(bytes) / ns;
  }

  double copy_gbs(size_t bytes) override {
    bytes = bytes / 16 * 16;
    const Buffer& src = buffer(0, bytes);
    const Buffer& dst = buffer(1, bytes);
    return 2.0 * double(bytes) / timed([&] { rt_.copy(dst, 0, src, 0, bytes); });
  }

  void flush() override {
    const size_t bytes = std::max<size_t>(2 * rt_.caps().l2_bytes, size_t(8) << 20);
    rt_.zero(buffer(2, bytes), 0, bytes);
    rt_.finish();
  }

 private:
  template <class F>
  double timed(F&& f) {
    check(cudaEventRecord(start_, rt_.stream()), "cudaEventRecord");
    f();
    check_launch("memory probe");
    check(cudaEventRecord(end_, rt_.stream()), "cudaEventRecord");
    check(cudaEventSynchronize(end_), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start_, end_), "cudaEventElapsedTime");
    return std::max(double(ms) * 1e6, 1.0);
  }

  // Buffer `slot` (0 the read source, 1 the copy target, 2 the flush's) of exactly `bytes` (a request of
  // another size replaces it), filled once when made.
  const Buffer& buffer(int slot, size_t bytes) {
    Buffer& b = bufs_[slot];
    if (b.bytes() != bytes) {
      rt_.finish();
      b = Buffer();
      b = rt_.alloc(bytes);
      check(cudaMemsetAsync(b.get(), 0x3c, bytes, rt_.stream()), "cudaMemsetAsync");
      rt_.finish();
    }
    return b;
  }

  Runtime rt_;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  Buffer sink_;
  std::map<int, Buffer> bufs_;
};

}  // namespace

std::unique_ptr<MemoryProbe> make_memory_probe(int device) {
  return std::make_unique<Probe>(device);
}

}  // namespace tilellm::cuda
