// Mirrored activations' bookkeeping (host_mirrors.h).
#include "backends/host_mirrors.h"

#include <algorithm>

#include "base/error.h"

namespace tilellm {

void HostMirrors::Range::widen(size_t a, size_t b) {
  if (empty()) {
    lo = a;
    hi = b;
  } else {
    lo = std::min(lo, a);
    hi = std::max(hi, b);
  }
}

size_t HostMirrors::add(void* data, size_t bytes) {
  uint8_t* p = static_cast<uint8_t*>(data);
  if (!p || bytes == 0) fail("internal: {} asked to mirror an empty host array", who_);
  for (const Array& a : arrays_) {
    if (p < a.host + a.bytes && a.host < p + bytes)
      fail("internal: {} asked to mirror overlapping host arrays", who_);
  }
  Array a;
  a.host = p;
  a.bytes = bytes;
  a.host_newer = {0, bytes};
  arrays_.push_back(a);
  return arrays_.size() - 1;
}

int HostMirrors::find(const void* p, size_t bytes, const char* op) const {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < arrays_.size(); ++i) {
    const Array& a = arrays_[i];
    if (b < a.host || b >= a.host + a.bytes) continue;
    if (bytes > size_t(a.host + a.bytes - b)) {
      fail("{}: {}: {} bytes at offset {} run past the end of an activation array of {} bytes", who_, op,
           bytes, size_t(b - a.host), a.bytes);
    }
    return int(i);
  }
  return -1;
}

std::vector<size_t> HostMirrors::state() const {
  std::vector<size_t> s;
  s.reserve(arrays_.size() * 4);
  for (const Array& a : arrays_)
    s.insert(s.end(), {a.host_newer.lo, a.host_newer.hi, a.dev_newer.lo, a.dev_newer.hi});
  return s;
}

bool HostMirrors::state_is(const std::vector<size_t>& s) const {
  if (s.size() != arrays_.size() * 4) return false;
  for (size_t i = 0; i < arrays_.size(); ++i) {
    const Array& a = arrays_[i];
    if (a.host_newer.lo != s[4 * i] || a.host_newer.hi != s[4 * i + 1] || a.dev_newer.lo != s[4 * i + 2] ||
        a.dev_newer.hi != s[4 * i + 3])
      return false;
  }
  return true;
}

void HostMirrors::set_state(const std::vector<size_t>& s) {
  if (s.size() != arrays_.size() * 4)
    fail("internal: {}: mirror state of {} values for {} arrays", who_, s.size(), arrays_.size());
  for (size_t i = 0; i < arrays_.size(); ++i) {
    Array& a = arrays_[i];
    a.host_newer = {s[4 * i], s[4 * i + 1]};
    a.dev_newer = {s[4 * i + 2], s[4 * i + 3]};
  }
}

}  // namespace tilellm
