// The CUDA backend's runtime: one device, one stream on it, and everything that crosses between host and
// device memory, so the ops only enqueue kernels.
//
//  - Device buffers (Buffer), allocated only at construction and load (allocations() counts them: nothing
//    may be allocated while a decode step runs).
//  - Host <-> device copies go through a pinned staging ring (`kStagingBytes`): an upload copies the host
//    bytes into the ring at once (so the caller may change them as soon as the call returns) and enqueues
//    the copy; a download enqueues the copy into the ring and, outside a capture, waits for it and copies the
//    bytes out. When the ring wraps, the stream is drained first.
//  - Capture and replay (CUDA graphs): between begin_capture() and end_capture() the stream's work is
//    recorded, not run; end_capture() instantiates it and runs it once. A capture is kept for replay() when
//    nothing in it depended on host bytes of the moment: staged uploads make it unreplayable (the ring's
//    bytes change), while step inputs (small pinned slots rewritten before each replay: the token id and
//    position) and deferred downloads (device -> a pinned slot, copied to their host destination after
//    the graph ran, which the replay may point elsewhere) keep it replayable.
//  - Kernel timing (profiling): an event pair around every launch, from a fixed pool, summed per name.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/kernel_time.h"

namespace tilellm::cuda {

class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr, o.bytes_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept;
  ~Buffer();
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  friend class Runtime;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

class Runtime {
 public:
  Runtime(int device, bool profiling);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Capabilities& caps() const { return caps_; }
  cudaStream_t stream() const { return stream_; }
  bool profiling() const { return profiling_; }

  Buffer alloc(size_t bytes);
  uint64_t allocations() const { return allocations_; }
  size_t free_memory() const;

  // dev + off <- host (bytes). Returns at once; the bytes were copied into the ring.
  void upload(const Buffer& dev, size_t off, const void* host, size_t bytes);
  // dev + off <- what fill() writes into `bytes` of pinned memory (a weight's rows written straight into
  // the ring).
  void upload_with(const Buffer& dev, size_t off, size_t bytes, const std::function<void(void*)>& fill);
  // host <- dev + off. Outside a capture the bytes are on the host when the call returns; in a capture the
  // copy is deferred to after the graph runs (end_capture / replay, then deliver()).
  void download(const Buffer& dev, size_t off, void* host, size_t bytes);
  void copy(const Buffer& dst, size_t dst_off, const Buffer& src, size_t src_off, size_t bytes);
  void zero(const Buffer& dev, size_t off, size_t bytes);
  // Waits for the stream. In a capture it first ends the capture (interrupt_capture()).
  void finish();

  // The small host inputs of a captured step: `bytes` from host into the pinned slot at `slot` (bytes
  // from the slots' start), and a (recorded) copy from there to dev.
  void step_input(size_t slot, const void* host, size_t bytes, const Buffer& dev, size_t dev_off);
  // Before a replay: rewrites a slot (the recorded copy then carries the new bytes).
  void set_step_input(size_t slot, const void* host, size_t bytes);

  void begin_capture();
  bool capturing() const { return capturing_; }
  // Ends the capture, runs the graph once and keeps it if it is replayable; returns whether it was kept.
  bool end_capture();
  // Ends a capture early (an op must see device results on the host): runs what was recorded, waits,
  // delivers the deferred downloads and drops the graph; the stream works eagerly from then on.
  void interrupt_capture();
  bool has_capture() const { return exec_ != nullptr; }
  void drop_capture();
  void replay();
  // Waits for the stream and copies the deferred downloads to their destinations.
  void deliver();
  size_t deferred_downloads() const { return deferred_.size(); }
  // Pinned room for the downloads a capture defers (the logits); set once, outside a capture.
  void reserve_deferred(size_t bytes);
  // Points deferred download k (in recording order) of the kept capture at another host destination.
  void set_deferred_destination(size_t k, void* host);

  // Kernel timing: call before and after a launch (no-ops unless profiling); check_launch is done here too.
  void before_launch(const char* name);
  void after_launch(const char* name);
  std::vector<KernelTime> kernel_times() const;
  void reset_kernel_times();

 private:
  static constexpr size_t kStagingBytes = size_t(32) << 20;
  static constexpr size_t kStepBytes = size_t(64) << 10;
  // A slice of `bytes` of the ring (draining the stream when it wraps; interrupting a capture first).
  uint8_t* staging_slice(size_t bytes);
  void harvest() const;  // sums the finished event pairs into times_

  int device_;
  Capabilities caps_;
  cudaStream_t stream_ = nullptr;
  bool profiling_;
  uint64_t allocations_ = 0;
  uint8_t* staging_ = nullptr;  // pinned [kStagingBytes]
  size_t head_ = 0;
  uint8_t* step_ = nullptr;          // pinned [kStepBytes]: step inputs
  uint8_t* deferred_buf_ = nullptr;  // pinned [deferred_cap_]: deferred downloads
  size_t deferred_cap_ = 0, deferred_used_ = 0;
  struct Deferred {
    size_t off, bytes;
    void* host;
  };
  std::vector<Deferred> deferred_;
  bool capturing_ = false, replayable_ = true;
  cudaGraphExec_t exec_ = nullptr;

  struct EventPair {
    cudaEvent_t start = nullptr, end = nullptr;
    const char* name = nullptr;
  };
  mutable std::vector<EventPair> events_;  // the pool
  mutable size_t events_used_ = 0;
  mutable std::vector<KernelTime> times_;
};

}  // namespace tilellm::cuda
