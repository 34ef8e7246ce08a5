// The bookkeeping of a device backend's mirrored activations (backends/backend.h: a backend with memory of
// its own may keep the session's activation arrays there between ops). Each host array has a device copy
// of the same size; per array this tracks the byte range where the host copy is newer (written by the host
// since the last upload) and where the device copy is newer (written by kernels since the last download) —
// at most one side is newer at any byte. The backend moves the bytes (its own runtime's copies); this class
// only answers which array a pointer lies in and remembers the ranges, and saves and compares their state
// (a captured decode step is replayed only from the state it was captured in).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tilellm {

class HostMirrors {
 public:
  struct Range {
    size_t lo = 0, hi = 0;
    bool empty() const { return lo == hi; }
    void clear() { lo = hi = 0; }
    void widen(size_t a, size_t b);  // grows [lo, hi) to cover [a, b)
  };
  struct Array {
    uint8_t* host = nullptr;
    size_t bytes = 0;
    Range host_newer, dev_newer;
  };

  // who: the backend, for messages ("CUDA backend").
  explicit HostMirrors(std::string who) : who_(std::move(who)) {}

  // Adds an array whose host copy is the current one (the device copy starts undefined). Throws on an
  // empty array or one overlapping another.
  size_t add(void* data, size_t bytes);
  // The array holding [p, p + bytes), or -1 for a pointer outside every array; throws naming `op` when the
  // bytes start inside an array but run past its end.
  int find(const void* p, size_t bytes, const char* op) const;
  Array& operator[](size_t i) { return arrays_[i]; }
  const Array& operator[](size_t i) const { return arrays_[i]; }
  size_t size() const { return arrays_.size(); }
  size_t offset(size_t i, const void* p) const {
    return size_t(static_cast<const uint8_t*>(p) - arrays_[i].host);
  }

  // Every array's ranges, flattened; state_is compares without allocating (a replayed step's check).
  std::vector<size_t> state() const;
  bool state_is(const std::vector<size_t>& s) const;
  void set_state(const std::vector<size_t>& s);

 private:
  std::string who_;
  std::vector<Array> arrays_;
};

}  // namespace tilellm
