// CudaBackend construction: scratch, Q8 buffers and the device FB-KV allocated once, weights uploaded once
// (after the whole model's bytes were checked against the device's free memory); the KV copies and the
// checks every op file shares. The mirrored activations are in resident.cpp, decode capture and replay in
// replay.cpp, the self-check in self_check.cpp.
#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_set>

#include "backends/registry.h"
#include "base/error.h"
#include "format/quants.h"

namespace tilellm {
namespace {

static_assert(int(DeviceFormat::F32) == cuda::kF32 && int(DeviceFormat::F16) == cuda::kF16 &&
                  int(DeviceFormat::Q4_0) == cuda::kQ4_0 && int(DeviceFormat::Q4_1) == cuda::kQ4_1 &&
                  int(DeviceFormat::Q8_0) == cuda::kQ8_0 && int(DeviceFormat::Int4B64) == cuda::kInt4B64 &&
                  int(DeviceFormat::Int8B0) == cuda::kInt8B0 && int(DeviceFormat::Kq8) == cuda::kKq8 &&
                  int(DeviceFormat::Kq4) == cuda::kKq4 && kDeviceFormats == cuda::kQ4K,
              "the kernels number the device formats as DeviceFormat does");
static_assert(cuda::kMaxSeqs == kMaxBatchDecode, "a batch decode step's sequences fit cuda::SeqPlanes");

size_t floats(int64_t n) {
  return size_t(std::max<int64_t>(n, 1)) * sizeof(float);
}

}  // namespace

CudaBackend::CudaBackend(const CudaBackendOptions& o)
    : opts_(o), rt_(o.device, o.profiling), quantized_(o.activations == ActivationMode::Quantized) {
  if (o.max_tokens <= 0 || o.max_in_elems <= 0 || o.max_out_elems <= 0 || o.max_width <= 0) {
    fail("internal: CUDA backend sized for {} tokens, {}/{} elements, width {}", o.max_tokens, o.max_in_elems,
         o.max_out_elems, o.max_width);
  }
  constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
  if (o.max_in_elems > kMaxIndex || o.max_out_elems > kMaxIndex || o.kv_dim > kMaxIndex)
    fail("CUDA backend: activations of {} elements exceed the kernels' 32-bit row indexing", o.max_out_elems);
  if (o.kv_type != GgmlType::F16 && o.kv_type != GgmlType::F32)
    fail("CUDA backend: KV cache type {} is not f16 or f32", type_name(o.kv_type));

  for (int f = 0; f < cuda::kFormats; ++f) {
    const char* fn = f == cuda::kQ4K   ? "q4_k"
                     : f == cuda::kQ6K ? "q6_k"
                                       : device_format_name(DeviceFormat(f));
    k_embed_[f].name = fmt::format("embed_{}", fn);
    k_matvec_[f].name = fmt::format("matvec_{}", fn);
    k_matvec_few_[f].name = fmt::format("matvec_few_{}", fn);
    k_matmul_[f].name = fmt::format("matmul_{}", fn);
    k_matmul16_[f].name = fmt::format("gemm_f16_{}", fn);
  }
  k_rmsnorm_.name = "rmsnorm";
  k_add_rmsnorm_.name = "add_rmsnorm";
  k_rope_.name = "rope";
  k_kv_store_.name = "kv_store";
  k_rope_kv_store_.name = "rope_kv_store";
  k_qkv_rope_.name = "matvec_rope_kv_store";
  k_matvec_norm_.name = "matvec_norm";
  k_attention_.name = "attention";
  k_glu_[0].name = "glu_silu";
  k_glu_[1].name = "glu_gelu";
  k_add_.name = "add";
  k_add_rows_.name = "add_rows";
  if (!o.test_broken_kernel.empty() && o.test_broken_kernel != "add")
    fail("CUDA backend: the test hook breaks only the add kernel, not '{}'", o.test_broken_kernel);

  // The self-check needs a little room whatever the session's sizes.
  opts_.max_tokens = std::max<int64_t>(opts_.max_tokens, 32);
  opts_.max_in_elems = std::max<int64_t>(opts_.max_in_elems, kHalfGemmTokens * 256);  // its fp16 GEMM case
  opts_.max_out_elems = std::max<int64_t>(opts_.max_out_elems, 4096);
  opts_.max_width = std::max<int64_t>(opts_.max_width, 512);
  const int64_t max_in = (opts_.max_in_elems + 31) / 32 * 32;
  in_a_ = rt_.alloc(floats(max_in));
  in_b_ = rt_.alloc(floats(max_in));
  out_ = rt_.alloc(floats(opts_.max_out_elems));
  vec_ = rt_.alloc(floats(opts_.max_width));
  for (Q8Set& set : q8_) {
    set.q = rt_.alloc(size_t(max_in));
    set.d = rt_.alloc(floats(max_in / 32));
    set.s = rt_.alloc(floats(max_in / 16));
  }
  glu_counters_ = rt_.alloc(size_t(max_in / 32 + 1) * sizeof(int));
  rt_.zero(glu_counters_, 0, glu_counters_.bytes());
  pos_dev_ = rt_.alloc(size_t(opts_.max_tokens) * 4);
  ids_dev_ = rt_.alloc(size_t(opts_.max_tokens) * 4);
  pos_held_.assign(size_t(opts_.max_tokens), 0);
  ids_held_.assign(size_t(opts_.max_tokens), 0);
  // The logits (and a second output) of a captured step land in pinned memory first.
  rt_.reserve_deferred(2 * floats(opts_.max_out_elems));
  for (const CudaBackendOptions::HostArray& a : o.resident) {
    mirrors_.add(a.data, a.bytes);
    mirror_dev_.push_back(rt_.alloc(a.bytes));
  }

  // Decode attention: 16 blocks a head by default, each taking at least 16 keys (kernels/attention.cu), so a
  // short context keeps few of them busy (on the H200, 7B Q4_0 at depth 1024 / 4096: 16 blocks 473 / 378 t/s,
  // 32 443 / 367, 8 476 / 351; docs/PERF.md 2026-12-05 04:12); at least the self-check's 3 splits of room for
  // its partials (its cache has 150 positions).
  attn_splits_ = o.attention_splits > 0 ? o.attention_splits : 16;
  // Partials: [splits][n_head][head_dim + 2]; n_head * head_dim is one token's q, at most one token's widest
  // activation, and n_head at most that too.
  // A batch decode step's queries share the room (attention_seqs lowers their splits to fit); the counters,
  // one a head of each query, cover as many queries as the partials do.
  const int64_t work_splits = std::max(attn_splits_, 3);
  const int64_t per_token = std::max<int64_t>(o.max_in_elems / std::max<int64_t>(o.max_tokens, 1), 256);
  attn_work_floats_ = work_splits * 2 * per_token;
  attn_work_ = rt_.alloc(floats(attn_work_floats_));
  attn_counters_n_ = work_splits * per_token;
  attn_counters_ = rt_.alloc(size_t(attn_counters_n_) * sizeof(int));
  rt_.zero(attn_counters_, 0, attn_counters_.bytes());

  if (o.kv_layers > 0) {
    if (o.kv_ctx <= 0 || o.kv_dim <= 0) fail("internal: CUDA KV cache of {} x {}", o.kv_ctx, o.kv_dim);
    if (o.kv_seqs < 1) fail("internal: CUDA KV caches for {} sequences", o.kv_seqs);
    const size_t elem = o.kv_type == GgmlType::F16 ? 2 : 4;
    kv_ = rt_.alloc(size_t(o.kv_seqs) * size_t(o.kv_layers) * 2 * size_t(o.kv_ctx) * size_t(o.kv_dim) * elem);
  }

  if (quantized_ && o.half_gemm != CudaBackendOptions::HalfGemm::Off) {
    blas_ = std::make_unique<cuda::Blas>(rt_.stream());
    if (blas_->available()) {
      blas_work_ = rt_.alloc(kBlasWorkspaceBytes);
      blas_->set_workspace(blas_work_.get(), blas_work_.bytes());
      half_w_ = rt_.alloc(std::max<size_t>(o.half_chunk_bytes, 16));
      half_x_ = rt_.alloc(size_t(max_in) * 2);
      half_scale_ = rt_.alloc(4 * sizeof(float));
    }
  }

  cpu_pool_ = std::make_unique<ThreadPool>(1);
  BackendParams hp;
  hp.pool = cpu_pool_.get();
  hp.activations = ActivationMode::F32;
  hp.weights = o.weights;
  hp.max_in_elems = opts_.max_in_elems;
  cpu_ = host_backend().make(hp);
  if (o.self_check) run_self_check();
}

CudaBackend::~CudaBackend() {
  try {
    rt_.finish();
  } catch (const Error&) {
    // A failed kernel's error was reported where it surfaced; destruction goes on.
  }
}

std::vector<CudaBackend::Kernel*> CudaBackend::all_kernels() {
  std::vector<Kernel*> v;
  for (int f = 0; f < cuda::kFormats; ++f)
    v.insert(v.end(), {&k_embed_[f], &k_matvec_[f], &k_matvec_few_[f], &k_matmul_[f], &k_matmul16_[f]});
  for (Kernel* k : {&k_rmsnorm_, &k_add_rmsnorm_, &k_rope_, &k_kv_store_, &k_rope_kv_store_, &k_qkv_rope_,
                    &k_attention_, &k_glu_[0], &k_glu_[1], &k_add_, &k_add_rows_, &k_matvec_norm_})
    v.push_back(k);
  return v;
}

std::vector<std::string> CudaBackend::cpu_fallbacks() const {
  std::vector<std::string> v;
  for (Kernel* k : const_cast<CudaBackend*>(this)->all_kernels()) {
    if (k->on_cpu) v.push_back(k->name);
  }
  return v;
}

CudaBackend::DeviceWeight CudaBackend::make_device_weight(const Weight& w, WeightsMode mode) {
  if (!w.data) fail("CUDA backend: weight {} has no data", w.name);
  if (w.n_in <= 0 || w.n_out <= 0) fail("CUDA backend: weight {} has shape {} x {}", w.name, w.n_out, w.n_in);
  if (w.n_in > std::numeric_limits<int32_t>::max() || w.n_out > std::numeric_limits<int32_t>::max())
    fail("CUDA backend: weight {} of {} x {} exceeds the kernels' 32-bit row indexing", w.name, w.n_out,
         w.n_in);
  DeviceWeight dw;
  dw.host_type = w.type;
  dw.n_in = w.n_in;
  dw.n_out = w.n_out;
  dw.fmt = format_for(w, mode);
  std::optional<DeviceRowWriter> rows;
  const bool own_size = dw.fmt == cuda::kQ4K || dw.fmt == cuda::kQ6K;  // rows converted here, a row at a time
  if (own_size) {
    if (w.row_bytes != row_size(w.type, w.n_in))
      fail("weight {} has rows of {} bytes, expected {} for {} x {}", w.name, w.row_bytes,
           row_size(w.type, w.n_in), type_name(w.type), w.n_in);
    dw.row_bytes = own_row_bytes(dw.fmt, w.n_in);
  } else {
    rows.emplace(w, DeviceFormat(dw.fmt));
    dw.row_bytes = rows->row_bytes();
  }
  dw.buf = rt_.alloc(size_t(w.n_out) * dw.row_bytes);
  // Rows written straight into the staging ring, ~4 MiB at a time.
  const int64_t slab = std::max<int64_t>(1, int64_t(4 << 20) / int64_t(dw.row_bytes));
  for (int64_t r0 = 0; r0 < w.n_out; r0 += slab) {
    const int64_t nr = std::min(slab, w.n_out - r0);
    rt_.upload_with(dw.buf, size_t(r0) * dw.row_bytes, size_t(nr) * dw.row_bytes, [&](void* dst) {
      uint8_t* d = static_cast<uint8_t*>(dst);
      if (rows) return rows->write(r0, nr, d);
      for (int64_t r = 0; r < nr; ++r) {
        if (dw.fmt == cuda::kQ4K)
          q4k_row(w.row(r0 + r), w.n_in, d + size_t(r) * dw.row_bytes);
        else
          q6k_row(w.row(r0 + r), w.n_in, d + size_t(r) * dw.row_bytes);
      }
    });
  }
  return dw;
}

int CudaBackend::format_for(const Weight& w, WeightsMode m) {
  if (m == WeightsMode::Native && w.type == GgmlType::Q4_K) return cuda::kQ4K;
  if (m == WeightsMode::Native && w.type == GgmlType::Q6_K) return cuda::kQ6K;
  return int(device_format_for(w, m));
}

size_t CudaBackend::own_row_bytes(int f, int64_t n_in) {
  if (f == cuda::kQ4K) return q4k_row_bytes(n_in);
  if (f == cuda::kQ6K) return q6k_row_bytes(n_in);
  return device_row_bytes(DeviceFormat(f), n_in);
}

void CudaBackend::upload_weight(const Weight& w) {
  if (auto it = weights_.find(w.data); it != weights_.end()) {
    const DeviceWeight& dw = it->second;
    if (dw.host_type != w.type || dw.n_in != w.n_in || dw.n_out != w.n_out) {
      fail("CUDA backend: weight {} ({} {} x {}) reuses the memory of an uploaded {} {} x {} weight", w.name,
           type_name(w.type), w.n_out, w.n_in, type_name(dw.host_type), dw.n_out, dw.n_in);
    }
    return;
  }
  weights_.emplace(w.data, make_device_weight(w, opts_.weights));
}

void CudaBackend::load_weights(const WeightSet& ws) {
  // The whole model's device bytes first: a model that does not fit is refused before anything is uploaded.
  size_t need = 0;
  std::unordered_set<const uint8_t*> seen;
  auto count = [&](const Weight& w, WeightsMode mode) {
    if (!seen.insert(w.data).second || weights_.count(w.data) || tables_.count(w.data)) return;
    const int f = format_for(w, mode);
    need += size_t(w.n_out) * own_row_bytes(f, w.n_in);
  };
  if (ws.embedding) count(*ws.embedding, WeightsMode::Native);
  for (const Weight* w : ws.matrices) count(*w, opts_.weights);
  const size_t free = rt_.free_memory(), reserve = size_t(256) << 20;
  if (need + reserve > free) {
    fail(
        "CUDA backend: the model's weights need {:.1f} MiB on the device ({} weights mode) but {} has {:.1f} "
        "MiB free (keeping {} MiB for the runtime): use a smaller model or a smaller --weights format",
        double(need) / (1 << 20), weights_mode_name(opts_.weights), caps().name, double(free) / (1 << 20),
        reserve >> 20);
  }

  if (const Weight* table = ws.embedding) {
    if (opts_.weights == WeightsMode::Native) {
      upload_weight(*table);
    } else if (!tables_.count(table->data)) {
      tables_.emplace(table->data, make_device_weight(*table, WeightsMode::Native));
    }
  }
  if (opts_.weights != WeightsMode::Native && !cpu_prepared_) {
    const DeviceFormat f = converted_device_format(opts_.weights);
    if (k_matmul_[int(f)].on_cpu || k_matvec_[int(f)].on_cpu) {
      cpu_->load_weights(ws);
      cpu_prepared_ = true;
    }
  }
  for (const Weight* w : ws.matrices) upload_weight(*w);
  for (const WeightSet::Vector& v : ws.vectors) {
    if (v.n <= 0 || norms_.count(v.data)) continue;
    cuda::Buffer b = rt_.alloc(size_t(v.n) * sizeof(float));
    rt_.upload(b, 0, v.data, size_t(v.n) * sizeof(float));
    norms_.emplace(v.data, std::move(b));
  }
  rt_.finish();
}

const CudaBackend::DeviceWeight& CudaBackend::find_weight(const Weight& w, const char* op) const {
  auto it = weights_.find(w.data);
  if (std::string_view(op) == "embed") {
    if (auto t = tables_.find(w.data); t != tables_.end()) it = t;
  }
  if (it == weights_.end()) fail("CUDA backend: {}: weight {} was not uploaded to the device", op, w.name);
  const DeviceWeight& dw = it->second;
  if (dw.n_in != w.n_in || dw.n_out != w.n_out) {
    fail("CUDA backend: {}: weight {} is {} x {} but was uploaded as {} x {}", op, w.name, w.n_out, w.n_in,
         dw.n_out, dw.n_in);
  }
  return dw;
}

std::string CudaBackend::memory_summary() const {
  size_t weights = 0, other = 0;
  for (const auto* m : {&weights_, &tables_}) {
    for (const auto& e : *m) weights += e.second.buf.bytes();
  }
  for (const cuda::Buffer& b : mirror_dev_) other += b.bytes();
  for (const auto& e : norms_) other += e.second.bytes();
  for (const cuda::Buffer* b : {&in_a_, &in_b_, &out_, &vec_, &attn_work_, &attn_counters_, &q8_[0].q,
                                &q8_[0].d, &q8_[0].s, &q8_[1].q, &q8_[1].d, &q8_[1].s, &glu_counters_,
                                &pos_dev_, &ids_dev_, &blas_work_, &half_w_, &half_x_, &half_scale_})
    other += b->bytes();
  for (const RopeSlot& r : rope_) other += r.dev.bytes();
  constexpr double kMiB = 1024.0 * 1024.0;
  return fmt::format(
      "CUDA device memory: weights {:.1f} MiB, KV cache {:.1f} MiB, activations and scratch {:.1f} MiB{}",
      double(weights) / kMiB, double(kv_.bytes()) / kMiB, double(other) / kMiB,
      quantized_ ? "; prompts: " + half_gemm_status() : "");
}

void CudaBackend::check_tokens(int64_t n_tok, const char* op) const {
  if (n_tok > opts_.max_tokens)
    fail("CUDA backend: {} of {} tokens exceeds the {} it was sized for", op, n_tok, opts_.max_tokens);
}

void CudaBackend::check_kv(const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                           const char* op) const {
  if (!kv_.get()) fail("CUDA backend: {}: the backend was made without a KV cache", op);
  check_tokens(n_tok, op);
  check_device_kv(kv, opts_.kv_seqs, opts_.kv_layers, opts_.kv_ctx, opts_.kv_dim, opts_.kv_type, layer, pos,
                  n_tok, "CUDA backend", op);
}

void* CudaBackend::kv_plane(const KvCache& kv, int64_t layer, int kind) const {
  return kv_plane_of(kv.seq(), layer, kind);
}

void* CudaBackend::kv_plane_of(int64_t seq, int64_t layer, int kind) const {
  const size_t elem = opts_.kv_type == GgmlType::F16 ? 2 : 4;
  const size_t plane = size_t(opts_.kv_ctx) * size_t(opts_.kv_dim) * elem;
  const size_t index = (size_t(seq) * size_t(opts_.kv_layers) + size_t(layer)) * 2 + size_t(kind);
  return kv_.as<uint8_t>() + index * plane;
}

cuda::SeqPlanes CudaBackend::seq_planes(KvCache* const* kvs, int64_t n) const {
  // Sequence s's planes of a layer lie s * (layers * 2 planes) elements after sequence 0's.
  cuda::SeqPlanes sp;
  sp.stride = opts_.kv_layers * 2 * opts_.kv_ctx * opts_.kv_dim;
  for (int64_t i = 0; i < n; ++i) sp.seq[i] = int32_t(kvs[i]->seq());
  return sp;
}

// Positions [p0, p1) of every layer's K and V planes between the device cache and a host cache of the same
// geometry (whose planes may be padded: copied plane by plane). Returns with the device work finished.
void CudaBackend::copy_kv(const KvCache& kv, int64_t p0, int64_t p1, bool to_device) {
  const int32_t pos0 = 0;
  check_kv(kv, 0, &pos0, 0, to_device ? "kv_to_device" : "kv_to_host");
  if (p0 < 0 || p1 > opts_.kv_ctx || p0 > p1)
    fail("CUDA backend: KV positions [{}, {}) outside the cache of {}", p0, p1, opts_.kv_ctx);
  if (p0 < p1) {
    const size_t elem = opts_.kv_type == GgmlType::F16 ? 2 : 4;
    const size_t bytes = size_t(p1 - p0) * size_t(opts_.kv_dim) * elem;
    for (int64_t l = 0; l < opts_.kv_layers; ++l) {
      for (int kind = 0; kind < 2; ++kind) {
        const size_t dev = size_t(static_cast<uint8_t*>(kv_plane(kv, l, kind)) - kv_.as<uint8_t>()) +
                           size_t(p0) * size_t(opts_.kv_dim) * elem;
        uint8_t* host = kv.plane(l, kind) + size_t(p0) * kv.row_bytes();
        if (to_device)
          rt_.upload(kv_, dev, host, bytes);
        else
          rt_.download(kv_, dev, host, bytes);
      }
    }
  }
  rt_.finish();
}

}  // namespace tilellm
