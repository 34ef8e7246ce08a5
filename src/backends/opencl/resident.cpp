// Device-resident activations: the mirrored host arrays (host_mirrors.h: which copy is newer where) moved
// up and down, the placement of an op's operands (a mirror, or fixed scratch), and the staged small inputs
// (token ids, positions, RoPE rows). The header comment of opencl_backend.h describes the scheme.
#include <cstring>

#include "backends/opencl/opencl_backend.h"
#include "base/error.h"

namespace tilellm {
namespace {

[[noreturn]] void fail_scratch(const char* op, const char* what, int64_t n, const opencl::Buffer& staging) {
  fail("OpenCL backend: {} {} of {} floats exceeds the scratch of {} sized at start", op, what, n,
       staging.bytes / sizeof(float));
}

}  // namespace

bool OpenclBackend::is_mirror_start(const float* p, int64_t n) {
  const int i = find_mirror(p, size_t(n) * sizeof(float), "matmul");
  return i >= 0 && reinterpret_cast<const uint8_t*>(p) == mirrors_[size_t(i)].host;
}

void OpenclBackend::download(const opencl::Buffer& b, size_t off, void* dst, size_t bytes) {
  rt_.read(b, off, dst, bytes);
  ++epoch_;
  ++downloads_;
}

void OpenclBackend::wait_for_upload(uint64_t epoch) {
  if (epoch != epoch_) return;  // a blocking completion since: the upload is done
  rt_.finish();
  ++epoch_;
}

void OpenclBackend::upload_dirty(size_t i) {
  HostMirrors::Array& m = mirrors_[i];
  if (m.host_newer.empty()) return;
  rt_.write(mirror_dev_[i], m.host_newer.lo, m.host + m.host_newer.lo, m.host_newer.hi - m.host_newer.lo);
  mirror_upload_epoch_[i] = epoch_;
  m.host_newer.clear();
}

void OpenclBackend::to_host(const void* p, size_t bytes) {
  const int i = find_mirror(p, bytes, "to_host");
  if (i < 0) return;
  HostMirrors::Array& m = mirrors_[size_t(i)];
  // The download below covers the array's whole device-newer range: a pending norm in it is settled first.
  if (pending_.y >= m.host && pending_.y < m.host + m.bytes) settle_norm(pending_.y, sizeof(float), false);
  if (m.dev_newer.empty()) return;
  // The whole device-newer range, not only [p, p + bytes): the invariant (one side newer) needs it before
  // the host may write anywhere in the array.
  download(mirror_dev_[size_t(i)], m.dev_newer.lo, m.host + m.dev_newer.lo, m.dev_newer.hi - m.dev_newer.lo);
  m.dev_newer.clear();
}

void OpenclBackend::host_wrote(void* p, size_t bytes) {
  forget_rounding(p, bytes);
  const int i = find_mirror(p, bytes, "host_wrote");
  if (i < 0) return;
  to_host(p, bytes);
  wait_for_upload(mirror_upload_epoch_[size_t(i)]);
  const size_t off = mirrors_.offset(size_t(i), p);
  mirrors_[size_t(i)].host_newer.widen(off, off + bytes);
}

const opencl::Buffer& OpenclBackend::dev_in(const float* p, int64_t n, const opencl::Buffer& staging,
                                            const char* op, bool keep_norm) {
  const size_t bytes = size_t(n) * sizeof(float);
  if (!keep_norm) settle_norm(p, bytes, false);
  const int i = find_mirror(p, bytes, op);
  if (i >= 0) {
    upload_dirty(size_t(i));
    const size_t off = mirrors_.offset(size_t(i), p);
    if (off == 0) return mirror_dev_[size_t(i)];
    if (bytes > staging.bytes) fail_scratch(op, "input", n, staging);
    rt_.copy(mirror_dev_[size_t(i)], off, staging, 0, bytes);
    return staging;
  }
  if (bytes > staging.bytes) fail_scratch(op, "input", n, staging);
  // Blocking: the caller's array may change as soon as the op returns.
  rt_.write_now(staging, 0, p, bytes);
  ++epoch_;
  return staging;
}

const opencl::Buffer& OpenclBackend::dev_out(float* p, int64_t n, const opencl::Buffer& staging,
                                             const char* op) {
  const size_t bytes = size_t(n) * sizeof(float);
  settle_norm(p, bytes, true);
  forget_rounding(p, bytes);
  const int i = find_mirror(p, bytes, op);
  if (i >= 0) {
    // The host-newer bytes go up first, so that the device becomes the only newer side.
    upload_dirty(size_t(i));
    if (mirrors_.offset(size_t(i), p) == 0) return mirror_dev_[size_t(i)];
  }
  if (bytes > staging.bytes) fail_scratch(op, "output", n, staging);
  return staging;
}

void OpenclBackend::dev_done(float* p, int64_t n, const opencl::Buffer& written) {
  const size_t bytes = size_t(n) * sizeof(float);
  const int i = find_mirror(p, bytes, "dev_done");
  if (i < 0) return download(written, 0, p, bytes);
  const size_t off = mirrors_.offset(size_t(i), p);
  if (&written != &mirror_dev_[size_t(i)]) rt_.copy(written, 0, mirror_dev_[size_t(i)], off, bytes);
  mirrors_[size_t(i)].dev_newer.widen(off, off + bytes);
}

const opencl::Buffer& OpenclBackend::staged(Staged& st, const int32_t* ints, int64_t n) {
  const size_t bytes = size_t(n) * sizeof(int32_t);
  if (st.n == n && std::memcmp(st.host.data(), ints, bytes) == 0) return st.dev;  // the device has them
  wait_for_upload(st.epoch);
  std::memcpy(st.host.data(), ints, bytes);
  rt_.write(st.dev, 0, st.host.data(), bytes);
  st.n = n;
  st.epoch = epoch_;
  return st.dev;
}

const opencl::Buffer& OpenclBackend::dev_ids(const int32_t* ids, int64_t n_tok) {
  return staged(ids_, ids, n_tok);
}

const opencl::Buffer& OpenclBackend::dev_positions(const int32_t* pos, int64_t n_tok) {
  return staged(pos_, pos, n_tok);
}

void OpenclBackend::begin_forward(const ForwardStep& step) {
  check_tokens(step.n_tok, "begin_forward");
  dev_positions(step.pos, step.n_tok);
}

const opencl::Buffer& OpenclBackend::dev_rope_rows(const RopeTable& table, const int32_t* pos,
                                                   int64_t n_tok) {
  // Compared by content, not by the table's address: a table freed and another made at the same address
  // must not find the old rows.
  const size_t row = size_t(table.n_half) * 2;
  auto same = [&](const RopeRows& r) {
    if (r.n_tok != n_tok || r.n_half != table.n_half) return false;
    for (int64_t t = 0; t < n_tok; ++t) {
      if (std::memcmp(r.rows.data() + size_t(t) * row, table.at(pos[t]), row * sizeof(float)) != 0)
        return false;
    }
    return true;
  };
  RopeRows* hit = same(rope_[0]) ? &rope_[0] : same(rope_[1]) ? &rope_[1] : nullptr;
  if (!hit) {
    hit = rope_[0].last_use <= rope_[1].last_use ? &rope_[0] : &rope_[1];
    wait_for_upload(hit->epoch);
    for (int64_t t = 0; t < n_tok; ++t)
      std::memcpy(hit->rows.data() + size_t(t) * row, table.at(pos[t]), row * sizeof(float));
    rt_.write(hit->dev, 0, hit->rows.data(), size_t(n_tok) * row * sizeof(float));
    hit->n_tok = n_tok;
    hit->n_half = table.n_half;
    hit->epoch = epoch_;
  }
  hit->last_use = ++rope_uses_;
  return hit->dev;
}

}  // namespace tilellm
