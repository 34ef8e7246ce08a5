// Device-resident activations of the CUDA backend: the mirrored host arrays (host_mirrors.h: which copy is
// newer where), the placement of an op's operands (a mirror, or fixed scratch), and the small inputs an op
// reads from device memory (norm weights, token ids, positions, the RoPE table).
#include <cstring>

#include "backends/cuda/cuda_backend.h"
#include "base/error.h"

namespace tilellm {

void CudaBackend::device_wrote(const void* dptr, size_t bytes) {
  const uint8_t* a = static_cast<const uint8_t*>(dptr);
  for (Q8Set& set : q8_) {
    if (!set.src) continue;
    const uint8_t* q = reinterpret_cast<const uint8_t*>(set.src);
    const size_t qb = size_t(set.rows * set.cols) * sizeof(float);
    if (a < q + qb && q < a + bytes) set.src = nullptr;
  }
}

void CudaBackend::upload_dirty(size_t i) {
  HostMirrors::Array& m = mirrors_[i];
  if (m.host_newer.empty()) return;
  rt_.upload(mirror_dev_[i], m.host_newer.lo, m.host + m.host_newer.lo, m.host_newer.hi - m.host_newer.lo);
  device_wrote(mirror_dev_[i].as<uint8_t>() + m.host_newer.lo, m.host_newer.hi - m.host_newer.lo);
  m.host_newer.clear();
}

void CudaBackend::to_host(const void* p, size_t bytes) {
  flush_norm();
  const int i = mirrors_.find(p, bytes, "to_host");
  if (i < 0) return;
  HostMirrors::Array& m = mirrors_[size_t(i)];
  if (m.dev_newer.empty()) return;
  // The host needs the bytes now: a step being captured runs what it recorded so far first.
  if (rt_.capturing()) rt_.interrupt_capture();
  // The whole device-newer range: afterwards the host may write anywhere in the array.
  rt_.download(mirror_dev_[size_t(i)], m.dev_newer.lo, m.host + m.dev_newer.lo,
               m.dev_newer.hi - m.dev_newer.lo);
  m.dev_newer.clear();
}

void CudaBackend::host_wrote(void* p, size_t bytes) {
  flush_norm();
  const int i = mirrors_.find(p, bytes, "host_wrote");
  if (i < 0) return;
  to_host(p, bytes);
  const size_t off = mirrors_.offset(size_t(i), p);
  mirrors_[size_t(i)].host_newer.widen(off, off + bytes);
}

bool CudaBackend::is_mirror_start(const float* p, int64_t n) const {
  const int i = mirrors_.find(p, size_t(n) * sizeof(float), "matmul");
  return i >= 0 && reinterpret_cast<const uint8_t*>(p) == mirrors_[size_t(i)].host;
}

float* CudaBackend::dev_in(const float* p, int64_t n, const cuda::Buffer& staging, const char* op) {
  flush_norm();  // a norm left pending is formed before anything else reads the device arrays
  const size_t bytes = size_t(n) * sizeof(float);
  const int i = mirrors_.find(p, bytes, op);
  if (i >= 0) {
    upload_dirty(size_t(i));
    return mirror_dev_[size_t(i)].as<float>() + mirrors_.offset(size_t(i), p) / sizeof(float);
  }
  if (bytes > staging.bytes())
    fail("CUDA backend: {} input of {} floats exceeds the scratch sized at start", op, n);
  rt_.upload(staging, 0, p, bytes);
  device_wrote(staging.get(), bytes);
  return staging.as<float>();
}

float* CudaBackend::dev_out(float* p, int64_t n, const cuda::Buffer& staging, const char* op) {
  flush_norm();
  const size_t bytes = size_t(n) * sizeof(float);
  const int i = mirrors_.find(p, bytes, op);
  if (i >= 0) {
    upload_dirty(size_t(i));  // the device becomes the only newer side
    return mirror_dev_[size_t(i)].as<float>() + mirrors_.offset(size_t(i), p) / sizeof(float);
  }
  if (bytes > staging.bytes())
    fail("CUDA backend: {} output of {} floats exceeds the scratch sized at start", op, n);
  return staging.as<float>();
}

void CudaBackend::dev_done(float* p, int64_t n, float* written) {
  const size_t bytes = size_t(n) * sizeof(float);
  device_wrote(written, bytes);
  const int i = mirrors_.find(p, bytes, "dev_done");
  if (i < 0) {
    // A host output outside the mirrors (the logits): into the caller's memory (in a capture: after the
    // graph ran, runtime.h).
    const cuda::Buffer& src = written == out_.as<float>()    ? out_
                              : written == in_a_.as<float>() ? in_a_
                                                             : in_b_;
    rt_.download(src, size_t(reinterpret_cast<uint8_t*>(written) - src.as<uint8_t>()), p, bytes);
    return;
  }
  const size_t off = mirrors_.offset(size_t(i), p);
  mirrors_[size_t(i)].dev_newer.widen(off, off + bytes);
}

const float* CudaBackend::norm_weight(const float* w, int64_t n) {
  if (auto it = norms_.find(w); it != norms_.end() && it->second.bytes() >= size_t(n) * sizeof(float))
    return it->second.as<float>();
  if (n > opts_.max_width)
    fail("CUDA backend: a norm of width {} exceeds the {} it was sized for", n, opts_.max_width);
  rt_.upload(vec_, 0, w, size_t(n) * sizeof(float));
  return vec_.as<float>();
}

const int32_t* CudaBackend::dev_positions(const int32_t* pos, int64_t n_tok) {
  const size_t bytes = size_t(n_tok) * sizeof(int32_t);
  // Part of the pass's array, which pos_dev_ holds: its offset there.
  if (step_pos_ && pos >= step_pos_ && pos + n_tok <= step_pos_ + step_pos_n_ && pos_n_ == step_pos_n_ &&
      std::memcmp(pos_held_.data(), step_pos_, size_t(step_pos_n_) * sizeof(int32_t)) == 0)
    return pos_dev_.as<int32_t>() + (pos - step_pos_);
  if (pos_n_ == n_tok && std::memcmp(pos_held_.data(), pos, bytes) == 0) return pos_dev_.as<int32_t>();
  std::memcpy(pos_held_.data(), pos, bytes);
  pos_n_ = n_tok;
  rt_.upload(pos_dev_, 0, pos, bytes);
  return pos_dev_.as<int32_t>();
}

const int32_t* CudaBackend::dev_ids(const int32_t* ids, int64_t n_tok) {
  const size_t bytes = size_t(n_tok) * sizeof(int32_t);
  if (mode_ == StepMode::Capturing) {
    // A captured step takes its ids from the step inputs, which each replay rewrites.
    std::memcpy(ids_held_.data(), ids, bytes);
    ids_n_ = n_tok;
    rt_.step_input(kIdsSlot, ids, bytes, ids_dev_, 0);
    return ids_dev_.as<int32_t>();
  }
  if (ids_n_ == n_tok && std::memcmp(ids_held_.data(), ids, bytes) == 0) return ids_dev_.as<int32_t>();
  std::memcpy(ids_held_.data(), ids, bytes);
  ids_n_ = n_tok;
  rt_.upload(ids_dev_, 0, ids, bytes);
  return ids_dev_.as<int32_t>();
}

const float* CudaBackend::dev_rope_table(const RopeTable& table) {
  const size_t nf = table.cos_sin.size();
  RopeSlot* hit = rope_[0].stamp.matches(table)   ? &rope_[0]
                  : rope_[1].stamp.matches(table) ? &rope_[1]
                                                  : nullptr;
  if (!hit) {
    hit = rope_[0].last_use <= rope_[1].last_use ? &rope_[0] : &rope_[1];
    if (nf == 0) fail("CUDA backend: rope: the RoPE table is empty");
    if (hit->dev.bytes() < nf * sizeof(float)) {
      rt_.finish();  // the slot's old buffer may still be read by queued work
      hit->dev = rt_.alloc(nf * sizeof(float));
    }
    rt_.upload(hit->dev, 0, table.cos_sin.data(), nf * sizeof(float));
    hit->stamp.take(table);
  }
  hit->last_use = ++rope_uses_;
  return hit->dev.as<float>();
}

cuda::RopeArgs CudaBackend::rope_args(const RopeTable& table, int64_t head_dim, int64_t rope_dim,
                                      RopeMode mode) {
  cuda::RopeArgs a;
  a.table = dev_rope_table(table);
  a.n_pos = int(table.n_pos);
  a.n_half = int(table.n_half);
  a.head_dim = int(head_dim);
  a.rope_dim = int(rope_dim);
  a.mode = mode == RopeMode::Neox ? 1 : 0;
  return a;
}

}  // namespace tilellm
