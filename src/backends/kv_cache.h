// FB-KV: the static key/value cache. One 128-byte-aligned allocation made when a session starts, sized for
// the whole context; decode only writes into it and never allocates, grows or frees.
//
// Layout (elements of `type`, F16 by default or F32):
//   [layer < n_layer][kind < 2: K then V][pos < n_ctx][kv_head < n_head_kv][head_dim]
// so one position of one layer's K is a contiguous row of kv_dim = n_head_kv * head_dim elements, and one
// layer's K (or V) is a contiguous [n_ctx][kv_dim] matrix. Every (layer, kind) plane starts 128-byte aligned.
#pragma once

#include <cstdint>

#include "base/aligned.h"
#include "format/ggml_types.h"

namespace tilellm {

class KvCache {
 public:
  // storage false: the geometry only, for a session whose cache lives on a device (its host copy would
  // never be read); allocate() adds the storage later if a host op turns out to need it.
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim, GgmlType type,
          bool storage = true);
  void allocate();
  bool has_storage() const { return buf_.size() > 0; }
  // Which of a device backend's sequence caches this one stands for (BackendParams::kv_seqs): a
  // BatchSession numbers its caches 0 .. n_seq - 1; a Session's single cache is 0.
  int seq() const { return seq_; }
  void set_seq(int s) { seq_ = s; }

  int64_t n_layer() const { return n_layer_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t kv_dim() const { return kv_dim_; }
  GgmlType type() const { return type_; }
  size_t bytes() const { return buf_.size(); }

  // Start of the [n_ctx][kv_dim] plane of one layer's K (kind 0) or V (kind 1).
  uint8_t* plane(int64_t layer, int kind) const {
    if (!has_storage()) no_storage();
    return buf_.as<uint8_t>() + size_t(layer * 2 + kind) * plane_bytes_;
  }
  size_t row_bytes() const { return row_bytes_; }

 private:
  int64_t n_layer_;
  int64_t n_ctx_;
  int64_t kv_dim_;
  GgmlType type_;
  int seq_ = 0;
  size_t row_bytes_;    // one position: kv_dim elements
  size_t plane_bytes_;  // n_ctx rows, rounded up to the alignment
  AlignedBuffer buf_;   // empty until allocate() when made without storage
  [[noreturn]] static void no_storage();
};

// The shared argument checks of a device backend's KV ops (its caches held in its own memory): `kv` must have
// the device cache's geometry (layers, positions, row width, type) and name one of its `seqs` sequence
// caches, `layer` be one of its layers and every position of pos[0 .. n_tok) inside it. Throws
// tilellm::Error naming `who` ("OpenCL backend") and the op.
void check_device_kv(const KvCache& kv, int64_t seqs, int64_t layers, int64_t ctx, int64_t dim, GgmlType type,
                     int64_t layer, const int32_t* pos, int64_t n_tok, const char* who, const char* op);

}  // namespace tilellm
