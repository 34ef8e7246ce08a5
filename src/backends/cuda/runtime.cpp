// The CUDA runtime of the backend (runtime.h).
#include "backends/cuda/runtime.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/error.h"
#include "base/error.h"

namespace tilellm::cuda {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kEventPairs = 4096;

size_t round_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = o.p_;
    bytes_ = o.bytes_;
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

Buffer::~Buffer() {
  if (p_) cudaFree(p_);
}

Runtime::Runtime(int device, bool profiling) : device_(device), profiling_(profiling) {
  if (std::string why = unavailable(); !why.empty()) fail("CUDA backend: {}", why);
  const int n = device_count();
  if (device < 0 || device >= n)
    fail("CUDA backend: device {} does not exist ({} found; see `tilellm devices`)", device, n);
  check(cudaSetDevice(device), "cudaSetDevice");
  caps_ = query_capabilities(device);
  if (!caps_.int8_mma)
    fail("CUDA backend: {} has compute capability {}.{}; the kernels need 8.0 or later", caps_.name,
         caps_.cc_major, caps_.cc_minor);
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaHostAlloc(reinterpret_cast<void**>(&staging_), kStagingBytes, cudaHostAllocDefault),
        "cudaHostAlloc(staging)");
  check(cudaHostAlloc(reinterpret_cast<void**>(&step_), kStepBytes, cudaHostAllocDefault),
        "cudaHostAlloc(step inputs)");
  if (profiling_) {
    events_.resize(kEventPairs);
    for (EventPair& e : events_) {
      check(cudaEventCreate(&e.start), "cudaEventCreate");
      check(cudaEventCreate(&e.end), "cudaEventCreate");
    }
  }
}

Runtime::~Runtime() {
  if (capturing_) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream_, &g);
    if (g) cudaGraphDestroy(g);
  }
  if (stream_) cudaStreamSynchronize(stream_);
  if (exec_) cudaGraphExecDestroy(exec_);
  for (EventPair& e : events_) {
    cudaEventDestroy(e.start);
    cudaEventDestroy(e.end);
  }
  if (deferred_buf_) cudaFreeHost(deferred_buf_);
  if (step_) cudaFreeHost(step_);
  if (staging_) cudaFreeHost(staging_);
  if (stream_) cudaStreamDestroy(stream_);
}

Buffer Runtime::alloc(size_t bytes) {
  Buffer b;
  const size_t n = std::max<size_t>(round_up(bytes), kAlign);
  const cudaError_t e = cudaMalloc(&b.p_, n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it: an allocation failure is not sticky
    fail("CUDA backend: cudaMalloc of {} bytes failed: {} ({}); {} MiB of device memory are free", n,
         cudaGetErrorName(e), cudaGetErrorString(e), free_memory() >> 20);
  }
  b.bytes_ = bytes;
  ++allocations_;
  return b;
}

size_t Runtime::free_memory() const {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

uint8_t* Runtime::staging_slice(size_t bytes) {
  bytes = round_up(bytes);
  if (head_ + bytes > kStagingBytes) {
    finish();  // every copy from the ring is done (interrupts a capture first)
    head_ = 0;
  }
  uint8_t* p = staging_ + head_;
  head_ += bytes;
  return p;
}

void Runtime::upload(const Buffer& dev, size_t off, const void* host, size_t bytes) {
  const uint8_t* src = static_cast<const uint8_t*>(host);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, kStagingBytes);
    upload_with(dev, off + done, n, [&](void* dst) { std::memcpy(dst, src + done, n); });
    done += n;
  }
}

void Runtime::upload_with(const Buffer& dev, size_t off, size_t bytes,
                          const std::function<void(void*)>& fill) {
  if (bytes == 0) return;
  if (bytes > kStagingBytes) fail("internal: CUDA staged upload of {} bytes exceeds the ring", bytes);
  if (off + bytes > dev.bytes()) fail("internal: CUDA upload past a buffer's end");
  uint8_t* slice = staging_slice(bytes);
  fill(slice);
  if (capturing_) replayable_ = false;  // a replay would copy whatever the ring then holds
  check(cudaMemcpyAsync(dev.as<uint8_t>() + off, slice, bytes, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync(upload)");
}

void Runtime::download(const Buffer& dev, size_t off, void* host, size_t bytes) {
  if (bytes == 0) return;
  if (off + bytes > dev.bytes()) fail("internal: CUDA download past a buffer's end");
  if (capturing_) {
    if (deferred_used_ + bytes <= deferred_cap_) {
      uint8_t* slot = deferred_buf_ + deferred_used_;
      check(cudaMemcpyAsync(slot, dev.as<uint8_t>() + off, bytes, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync(deferred download)");
      deferred_.push_back({deferred_used_, bytes, host});
      deferred_used_ += round_up(bytes);
      return;
    }
    interrupt_capture();  // no room: this step runs eagerly
  }
  uint8_t* dst = static_cast<uint8_t*>(host);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, kStagingBytes);
    uint8_t* slice = staging_slice(n);
    check(cudaMemcpyAsync(slice, dev.as<uint8_t>() + off + done, n, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync(download)");
    finish();
    std::memcpy(dst + done, slice, n);
    done += n;
  }
}

void Runtime::copy(const Buffer& dst, size_t dst_off, const Buffer& src, size_t src_off, size_t bytes) {
  if (bytes == 0) return;
  if (dst_off + bytes > dst.bytes() || src_off + bytes > src.bytes())
    fail("internal: CUDA device copy past a buffer's end");
  check(cudaMemcpyAsync(dst.as<uint8_t>() + dst_off, src.as<uint8_t>() + src_off, bytes,
                        cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync(device to device)");
}

void Runtime::zero(const Buffer& dev, size_t off, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemsetAsync(dev.as<uint8_t>() + off, 0, bytes, stream_), "cudaMemsetAsync");
}

void Runtime::finish() {
  if (capturing_) return interrupt_capture();
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (a kernel or copy before it failed)");
}

void Runtime::reserve_deferred(size_t bytes) {
  bytes = round_up(bytes);
  if (bytes <= deferred_cap_) return;
  if (capturing_) fail("internal: CUDA reserve_deferred during a capture");
  finish();
  if (deferred_buf_) cudaFreeHost(deferred_buf_);
  deferred_buf_ = nullptr;
  deferred_cap_ = 0;
  check(cudaHostAlloc(reinterpret_cast<void**>(&deferred_buf_), bytes, cudaHostAllocDefault),
        "cudaHostAlloc(deferred downloads)");
  deferred_cap_ = bytes;
}

void Runtime::step_input(size_t slot, const void* host, size_t bytes, const Buffer& dev, size_t dev_off) {
  if (slot + bytes > kStepBytes) fail("internal: CUDA step input past its slots");
  std::memcpy(step_ + slot, host, bytes);
  check(cudaMemcpyAsync(dev.as<uint8_t>() + dev_off, step_ + slot, bytes, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync(step input)");
}

void Runtime::set_step_input(size_t slot, const void* host, size_t bytes) {
  if (slot + bytes > kStepBytes) fail("internal: CUDA step input past its slots");
  std::memcpy(step_ + slot, host, bytes);
}

void Runtime::begin_capture() {
  if (capturing_) fail("internal: CUDA capture inside a capture");
  drop_capture();
  finish();
  head_ = 0;
  deferred_.clear();
  deferred_used_ = 0;
  replayable_ = true;
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  capturing_ = true;
}

bool Runtime::end_capture() {
  if (!capturing_) return false;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
  cudaGraphDestroy(graph);
  check(e, "cudaGraphInstantiate");
  check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
  if (!replayable_) {
    deliver();
    drop_capture();
    return false;
  }
  return true;
}

void Runtime::interrupt_capture() {
  if (!capturing_) return;
  replayable_ = false;
  end_capture();
}

void Runtime::drop_capture() {
  if (!exec_) return;
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
  deferred_.clear();
  deferred_used_ = 0;
}

void Runtime::replay() {
  if (!exec_) fail("internal: CUDA replay without a capture");
  check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
}

void Runtime::deliver() {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (a kernel or copy before it failed)");
  for (const Deferred& d : deferred_) std::memcpy(d.host, deferred_buf_ + d.off, d.bytes);
}

void Runtime::set_deferred_destination(size_t k, void* host) {
  if (k >= deferred_.size()) fail("internal: CUDA deferred download {} of {}", k, deferred_.size());
  deferred_[k].host = host;
}

void Runtime::before_launch(const char* name) {
  if (!profiling_) return;
  if (events_used_ == events_.size()) harvest();
  EventPair& e = events_[events_used_];
  e.name = name;
  check(cudaEventRecord(e.start, stream_), "cudaEventRecord");
}

void Runtime::after_launch(const char* name) {
  check_launch(name);
  if (!profiling_) return;
  check(cudaEventRecord(events_[events_used_++].end, stream_), "cudaEventRecord");
}

void Runtime::harvest() const {
  if (events_used_ == 0) return;
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  for (size_t i = 0; i < events_used_; ++i) {
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, events_[i].start, events_[i].end), "cudaEventElapsedTime");
    auto it = std::find_if(times_.begin(), times_.end(),
                           [&](const KernelTime& t) { return t.name == events_[i].name; });
    if (it == times_.end()) {
      times_.push_back({events_[i].name, 0, 0.0, {}});
      it = times_.end() - 1;
    }
    ++it->calls;
    it->ns += double(ms) * 1e6;
  }
  events_used_ = 0;
}

std::vector<KernelTime> Runtime::kernel_times() const {
  harvest();
  return times_;
}

void Runtime::reset_kernel_times() {
  harvest();
  times_.clear();
}

}  // namespace tilellm::cuda
