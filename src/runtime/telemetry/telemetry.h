// Telemetry: the sources a machine offers, found once at start and each reported present or absent (none is
// required), sampled at a fixed rate on a thread of their own; and the records the decode loop and the
// pacing controller hand it (one per forward pass, one per decision).
//
// Nothing here allocates once sampling runs, on any thread, until a store fills: samples, forward-pass
// records and decisions go into storage made at start (sized for `capacity_hint` seconds at the sampling
// rate, and 64Ki passes), and the sampling thread alone adds a chunk when one fills. The decode thread only
// writes a record into a lock-free single-producer ring (record_pass) and copies the latest sample under a
// mutex held only for that copy (latest): no allocation (tests/runtime/test_decode_alloc.cpp).
//
// Per-kernel device time is the backends' (Backend::kernel_times, with profiling on): its reading allocates
// and waits for the device, so it is read by the caller at the end of a run, not sampled here.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/telemetry/host_sensors.h"
#include "runtime/telemetry/nvml.h"
#include "runtime/telemetry/sample.h"

namespace tilellm::telemetry {

struct TelemetryOptions {
  double sample_hz = 10;         // samples per second, 0.5 to 1000
  std::string sysfs_root = "/";  // host sensors are read under this directory (simulated sensors: a test's)
  bool nvml = true;              // load NVML
  int nvml_device = 0;           // NVML's device index
  double capacity_hint_s = 600;  // seconds of samples stored before the sampling thread allocates more
};

// Storage that grows by fixed chunks, appended to by one thread; a full chunk is followed by a new one
// (the only allocation, made by the appending thread).
template <class T>
class ChunkedLog {
 public:
  explicit ChunkedLog(size_t chunk) : chunk_(std::max<size_t>(chunk, 64)) { add_chunk(); }
  void push(const T& x) {
    if (used_ == chunk_) add_chunk();
    chunks_.back()[used_++] = x;
  }
  size_t size() const { return (chunks_.size() - 1) * chunk_ + used_; }
  std::vector<T> to_vector() const {
    std::vector<T> v;
    v.reserve(size());
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const size_t n = c + 1 == chunks_.size() ? used_ : chunk_;
      v.insert(v.end(), chunks_[c].get(), chunks_[c].get() + n);
    }
    return v;
  }

 private:
  void add_chunk() {
    chunks_.push_back(std::make_unique<T[]>(chunk_));
    used_ = 0;
  }
  size_t chunk_;
  size_t used_ = 0;
  std::vector<std::unique_ptr<T[]>> chunks_;
};

class Telemetry {
 public:
  using Clock = std::chrono::steady_clock;

  // Finds the sources (host_sensors.h; NVML when opts.nvml) and makes the storage. Samples nothing yet.
  explicit Telemetry(const TelemetryOptions& opts = {});
  ~Telemetry();
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  // Every source, present or absent, with what it is or why not.
  std::vector<SourceStatus> sources() const;
  bool has(Channel c) const;
  const NvmlSensors* nvml() const { return nvml_.get(); }
  const TelemetryOptions& options() const { return opts_; }

  // The clock every record is stamped with: seconds since this object was made.
  double now() const { return seconds(Clock::now()); }
  double seconds(Clock::time_point t) const { return std::chrono::duration<double>(t - epoch_).count(); }

  // Reads every source once, stamped t (what the sampling thread does each period; tests call it to step
  // simulated sensors deterministically). Not to be called while the thread runs.
  Sample read(double t);

  // The sampling thread: one read() per period on an absolute schedule (a late read does not shift the
  // ones after it), stored and published for latest(); each period it also drains the rings below.
  void start();
  void stop();  // joins the thread and drains what is left; safe to call twice
  bool running() const { return thread_.joinable(); }

  // The newest sample taken and its sequence number (1, 2, ...; 0 and s untouched when none is). Any thread.
  uint64_t latest(Sample& s) const;

  // From the decode thread (one producer): a forward pass, a controller decision. Lock-free; a full ring
  // (the sampling thread stalled for 16Ki passes) drops the record and counts it.
  void record_pass(const TokenRecord& r);
  void record_decision(const Decision& d);
  // Called on the sampling thread with each decision as it is drained (to print it as it happens).
  void on_decision(std::function<void(const Decision&)> f) { on_decision_ = std::move(f); }

  // Everything recorded so far (after stop(), everything). Not while the thread runs.
  std::vector<Sample> samples() const { return samples_.to_vector(); }
  std::vector<TokenRecord> passes() const { return passes_.to_vector(); }
  std::vector<Decision> decisions() const { return decisions_.to_vector(); }
  uint64_t dropped() const { return dropped_.load(); }
  // Samples that started late by more than a period (the thread was not scheduled in time).
  uint64_t late_samples() const { return late_; }

 private:
  template <class T, size_t N>
  struct Ring {  // single producer, single consumer
    std::unique_ptr<T[]> slots = std::make_unique<T[]>(N);
    std::atomic<uint64_t> head{0}, tail{0};
    bool push(const T& x) {
      const uint64_t h = head.load(std::memory_order_relaxed);
      if (h - tail.load(std::memory_order_acquire) == N) return false;
      slots[h % N] = x;
      head.store(h + 1, std::memory_order_release);
      return true;
    }
    template <class F>
    void drain(F&& f) {
      const uint64_t h = head.load(std::memory_order_acquire);
      uint64_t t = tail.load(std::memory_order_relaxed);
      for (; t != h; ++t) f(slots[t % N]);
      tail.store(t, std::memory_order_release);
    }
  };
  void loop();
  void drain();

  TelemetryOptions opts_;
  Clock::time_point epoch_;
  std::unique_ptr<HostSensors> host_;
  std::unique_ptr<NvmlSensors> nvml_;
  ChunkedLog<Sample> samples_;
  ChunkedLog<TokenRecord> passes_;
  ChunkedLog<Decision> decisions_;
  Ring<TokenRecord, 16384> pass_ring_;
  Ring<Decision, 256> decision_ring_;
  std::atomic<uint64_t> dropped_{0};
  uint64_t late_ = 0;
  std::function<void(const Decision&)> on_decision_;

  mutable std::mutex latest_mu_;
  Sample latest_;
  uint64_t seq_ = 0;

  std::thread thread_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
};

}  // namespace tilellm::telemetry
