// Device-resident activations of the Vulkan backend: the mirrored host arrays (host_mirrors.h: which copy is
// newer where; the scheme of opencl_backend.h, with uploads staged at record time), the placement of an
// op's operands (a mirror, or fixed scratch), and the small inputs an op reads from device memory (norm
// weights, token ids, positions, the RoPE table).
#include <cstring>

#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"

namespace tilellm {

void VulkanBackend::upload_dirty(size_t i) {
  HostMirrors::Array& m = mirrors_[i];
  if (m.host_newer.empty()) return;
  if (mirror_dev_[i].get() == q8_held_.src) q8_held_ = {};  // its rounding no longer matches it
  rt_.upload(mirror_dev_[i], m.host_newer.lo, m.host + m.host_newer.lo, m.host_newer.hi - m.host_newer.lo);
  m.host_newer.clear();
}

void VulkanBackend::to_host(const void* p, size_t bytes) {
  const int i = find_mirror(p, bytes, "to_host");
  if (i < 0) return;
  HostMirrors::Array& m = mirrors_[size_t(i)];
  if (m.dev_newer.empty()) return;
  rt_.download(mirror_dev_[size_t(i)], m.dev_newer.lo, m.host + m.dev_newer.lo,
               m.dev_newer.hi - m.dev_newer.lo);
  m.dev_newer.clear();
}

void VulkanBackend::host_wrote(void* p, size_t bytes) {
  const int i = find_mirror(p, bytes, "host_wrote");
  if (i < 0) return;
  to_host(p, bytes);
  const size_t off = mirrors_.offset(size_t(i), p);
  mirrors_[size_t(i)].host_newer.widen(off, off + bytes);
}

const vulkan::Buffer& VulkanBackend::dev_in(const float* p, int64_t n, const vulkan::Buffer& staging,
                                            const char* op) {
  const size_t bytes = size_t(n) * sizeof(float);
  if (bytes > staging.bytes())
    fail("Vulkan backend: {} input of {} floats exceeds the scratch sized at start", op, n);
  const int i = find_mirror(p, bytes, op);
  if (i >= 0) {
    upload_dirty(size_t(i));
    if (mirrors_.offset(size_t(i), p) == 0) return mirror_dev_[size_t(i)];
  }
  if (staging.get() == q8_held_.src) q8_held_ = {};
  if (i >= 0) {
    rt_.copy(mirror_dev_[size_t(i)], mirrors_.offset(size_t(i), p), staging, 0, bytes);
    return staging;
  }
  rt_.upload(staging, 0, p, bytes);
  return staging;
}

const vulkan::Buffer& VulkanBackend::dev_out(float* p, int64_t n, const vulkan::Buffer& staging,
                                             const char* op) {
  const size_t bytes = size_t(n) * sizeof(float);
  if (const int i = find_mirror(p, bytes, op); i >= 0) {
    upload_dirty(size_t(i));  // the device becomes the only newer side
    if (mirrors_.offset(size_t(i), p) == 0) return mirror_dev_[size_t(i)];
  }
  if (bytes > staging.bytes())
    fail("Vulkan backend: {} output of {} floats exceeds the scratch sized at start", op, n);
  return staging;
}

void VulkanBackend::dev_done(float* p, int64_t n, const vulkan::Buffer& written) {
  const size_t bytes = size_t(n) * sizeof(float);
  const int i = find_mirror(p, bytes, "dev_done");
  if (i < 0) {
    // Inside a captured step the bytes arrive at end_forward (runtime.h).
    rt_.download_deferred(written, 0, p, bytes);
    return;
  }
  const size_t off = mirrors_.offset(size_t(i), p);
  if (&written != &mirror_dev_[size_t(i)]) rt_.copy(written, 0, mirror_dev_[size_t(i)], off, bytes);
  mirrors_[size_t(i)].dev_newer.widen(off, off + bytes);
}

const vulkan::Buffer& VulkanBackend::norm_weight(const float* w, int64_t n) {
  if (auto it = norms_.find(w); it != norms_.end() && it->second.bytes() >= size_t(n) * sizeof(float))
    return it->second;
  if (n > opts_.max_width)
    fail("Vulkan backend: a norm of width {} exceeds the {} it was sized for", n, opts_.max_width);
  rt_.upload(vec_, 0, w, size_t(n) * sizeof(float));
  return vec_;
}

const vulkan::Buffer& VulkanBackend::dev_ints(const int32_t* v, int64_t n, std::vector<int32_t>& held,
                                              int64_t& held_n, const vulkan::Buffer& buf) {
  const size_t bytes = size_t(n) * sizeof(int32_t);
  if (held_n == n && std::memcmp(held.data(), v, bytes) == 0) return buf;
  std::memcpy(held.data(), v, bytes);
  held_n = n;
  rt_.upload(buf, 0, v, bytes);
  return buf;
}

const vulkan::Buffer& VulkanBackend::dev_positions(const int32_t* pos, int64_t n_tok) {
  return dev_ints(pos, n_tok, pos_held_, pos_n_, pos_dev_);
}

const vulkan::Buffer& VulkanBackend::dev_ids(const int32_t* ids, int64_t n_tok) {
  if (mode_ != StepMode::Capturing) return dev_ints(ids, n_tok, ids_held_, ids_n_, ids_dev_);
  // A captured step takes its ids from the step inputs, which each replay rewrites.
  std::memcpy(ids_held_.data(), ids, size_t(n_tok) * 4);
  ids_n_ = n_tok;
  rt_.step_input(kIdsSlot, ids, size_t(n_tok) * 4, ids_dev_, 0);
  return ids_dev_;
}

const vulkan::Buffer& VulkanBackend::dev_rope_table(const RopeTable& table) {
  const size_t nf = table.cos_sin.size();
  RopeSlot* hit = rope_[0].stamp.matches(table)   ? &rope_[0]
                  : rope_[1].stamp.matches(table) ? &rope_[1]
                                                  : nullptr;
  if (!hit) {
    hit = rope_[0].last_use <= rope_[1].last_use ? &rope_[0] : &rope_[1];
    if (nf == 0) fail("Vulkan backend: rope: the RoPE table is empty");
    if (hit->dev.bytes() < nf * sizeof(float)) {
      rt_.finish();  // the slot's old buffer may still be read by recorded work
      hit->dev = rt_.alloc(nf * sizeof(float));
    }
    rt_.upload(hit->dev, 0, table.cos_sin.data(), nf * sizeof(float));
    hit->stamp.take(table);
  }
  hit->last_use = ++rope_uses_;
  return hit->dev;
}

}  // namespace tilellm
