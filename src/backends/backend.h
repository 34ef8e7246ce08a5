// The op interface the model's layer loop is written against. A backend implements each op; the CPU backend
// is the reference every other backend is checked against. All activations are row-major float arrays on the
// host:
// "[n_tok][n]" means n_tok rows of n contiguous floats. A backend with memory of its own may keep the arrays
// it was given at construction (the session's activation scratch) there between ops, so a caller reads such
// an array only through that backend (the layer loop never reads them; the OpenCL backend: opencl_backend.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/kernel_time.h"
#include "backends/kv_cache.h"
#include "backends/moe.h"
#include "backends/op_params.h"
#include "backends/program_cache.h"
#include "backends/weight.h"

namespace tilellm {

// One forward pass as the layer loop is about to run it (Backend::begin_forward). A decode step is one token
// with its logits whose ops do not depend on data read back during the pass (so a model with experts, whose
// routing chooses the matrices, has none); same_as_last says that the ops about to run are the ones of the
// last decode step this backend ran, with the same shapes and arguments but for the data (the tokens,
// positions, and the KV rows they read), whatever other passes (prompts) ran since: a backend may record a
// decode step once and replay it (CUDA graphs, Vulkan command buffers), reading the step's positions from its
// own memory. A batch decode step is the same over several sequences (a BatchSession's pass of one token for
// each of n_tok sequences, each with its logits); same_as_last then also says that the sequences' caches are
// the last such step's, in the same order. pos: [n_tok] int32, the host array the ops of this pass will be
// given (ForwardScratch::pos; a sequence's ops get its part), already filled.
struct ForwardStep {
  int64_t n_tok = 0;
  int64_t n_past = 0;  // positions [n_past, n_past + n_tok) are written; the cache then holds n_past + n_tok
  int64_t n_logits = 0;  // rows of logits the pass ends with (0: none)
  const int32_t* pos = nullptr;
  bool decode = false;
  bool batch_decode = false;  // n_tok sequences, one token each (at most kMaxBatchDecode); decode is false
  bool same_as_last = false;
};
constexpr int kMaxBatchDecode = 64;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Prepares every weight a model will pass to the ops (repacks, device copies), once, before the first op.
  // The weights must stay where they are while the backend lives (they are looked up by address). Default:
  // the ops read the weights where they lie.
  virtual void load_weights(const WeightSet& ws) { (void)ws; }

  // Mark the start and end of one forward pass (see ForwardStep). end_forward follows the pass's last op; the
  // caller reads what the ops wrote to host memory (the logits) only after it, so a backend may deliver
  // them there. Default: nothing to do.
  virtual void begin_forward(const ForwardStep& step) { (void)step; }
  virtual void end_forward() {}

  // out[t][:] = scale * row ids[t] of table (dequantized). out: [n_tok][table.n_in]
  virtual void embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) = 0;
  // y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for each of n_rows rows of n floats. y may alias x.
  virtual void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) = 0;
  // y[t] = W x[t]. x: [n_tok][w.n_in], y: [n_tok][w.n_out]
  virtual void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) = 0;
  // The activations x [n_tok][w.n_in] as matmul(w, ...) rounds them before its products (a backend that
  // quantizes activations does), into out [n_tok][w.n_in]: what a reference multiplies w's exact values by.
  // Default: the float path, x as it is.
  virtual void rounded_matmul_input(const Weight& w, const float* x, int64_t n_tok, float* out) const {
    for (int64_t i = 0; i < n_tok * w.n_in; ++i) out[i] = x[i];
  }
  // Several matmuls reading the same input (q/k/v; gate/up): ys[i][t] = ws[i] x[t] for i < n. A backend may
  // share the input's preparation and one parallel region among them; by default they run one by one.
  virtual void matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                             int64_t n_tok) {
    for (int i = 0; i < n; ++i) matmul(*ws[i], x, n_tok, ys[i]);
  }
  // Rotates the first rope_dim dims of every head in place. x: [n_tok][n_heads][head_dim]; pos: [n_tok]
  virtual void rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                    const int32_t* pos, const RopeTable& table, RopeMode mode) = 0;
  // Writes K and V rows of n_tok tokens into the cache at their positions. k, v: [n_tok][kv_dim]
  virtual void kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                        int64_t n_tok) = 0;
  // A layer's RoPE and KV write: rope(q), rope(k), then kv_store(k, v), k left rotated.
  // q: [n_tok][n_head][head_dim]; k, v: [n_tok][n_head_kv][head_dim]. A backend may do it in one pass; this
  // is the unfused reference.
  virtual void rope_kv_store(float* q, float* k, const float* v, KvCache& kv, int64_t layer,
                             const int32_t* pos, int64_t n_tok, const RopeShape& r) {
    rope(q, n_tok, r.n_head, r.head_dim, r.rope_dim, pos, *r.table, r.mode);
    rope(k, n_tok, r.n_head_kv, r.head_dim, r.rope_dim, pos, *r.table, r.mode);
    kv_store(kv, layer, k, v, pos, n_tok);
  }
  // A layer's q/k/v products with the RoPE and KV write after them: matmul_shared(wqkv = {wq, wk, wv}, x)
  // into q, k, v, then rope_kv_store. x: [n_tok][wq.n_in]. A backend may do it in one pass; this is the
  // unfused reference.
  virtual void matmul_rope_kv_store(const Weight* const* wqkv, const float* x, int64_t n_tok, float* q,
                                    float* k, float* v, KvCache& kv, int64_t layer, const int32_t* pos,
                                    const RopeShape& r) {
    float* ys[3] = {q, k, v};
    matmul_shared(wqkv, ys, 3, x, n_tok);
    rope_kv_store(q, k, v, kv, layer, pos, n_tok, r);
  }
  // Causal attention of n_tok queries over the cached keys/values of `layer` (already holding these tokens).
  // q: [n_tok][n_head][head_dim]; out: [n_tok][n_head][head_dim]
  virtual void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                         const AttnParams& p, float* out) = 0;
  // The RoPE + KV write and attention of n sequences' decode tokens (a batch decode step, or the one-token
  // spans leading a pass of several sequences): token i (row i of q, k, v and out, laid out as above) of the
  // sequence whose cache is kvs[i], at position pos[i]. A backend may take all of them in one launch; this
  // is the reference, a sequence at a time.
  virtual void rope_kv_store_seqs(float* q, float* k, const float* v, KvCache* const* kvs, int64_t layer,
                                  const int32_t* pos, int64_t n, const RopeShape& r) {
    const int64_t qd = r.n_head * r.head_dim, kd = r.n_head_kv * r.head_dim;
    for (int64_t i = 0; i < n; ++i)
      rope_kv_store(q + i * qd, k + i * kd, v + i * kd, *kvs[i], layer, pos + i, 1, r);
  }
  virtual void attention_seqs(const float* q, KvCache* const* kvs, int64_t layer, const int32_t* pos,
                              int64_t n, const AttnParams& p, float* out) {
    const int64_t qd = p.n_head * p.head_dim;
    for (int64_t i = 0; i < n; ++i) attention(q + i * qd, *kvs[i], layer, pos + i, 1, p, out + i * qd);
  }
  // out = act(gate) * up, elementwise over n floats.
  virtual void glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) = 0;
  // The gated feed-forward's input: out[t] = act(w_gate x[t]) * (w_up x[t]). x: [n_tok][n_in]; out, up:
  // [n_tok][n_ff]; up is scratch (its contents afterwards are unspecified). A backend may do the two
  // products and the activation in one pass; this is the unfused reference.
  virtual void matmul_glu(const Weight& w_gate, const Weight& w_up, const float* x, int64_t n_tok, FfnAct act,
                          float* out, float* up) {
    const Weight* ws[2] = {&w_gate, &w_up};
    float* ys[2] = {out, up};
    matmul_shared(ws, ys, 2, x, n_tok);
    glu(out, up, out, n_tok * w_gate.n_out, act);
  }
  // acc += x, elementwise over n floats.
  virtual void add(float* acc, const float* x, int64_t n) = 0;
  // host[i] = x[i] for n floats: an activation (wherever the backend keeps it) copied to host memory the
  // backend does not mirror, readable when the call returns. Default: host = 0, then add(host, x, n) (exact:
  // 0 + v = v), so any backend delivers it through an op it has.
  virtual void read_back(const float* x, int64_t n, float* host) {
    for (int64_t i = 0; i < n; ++i) host[i] = 0.0f;
    add(host, x, n);
  }
  // A mixture-of-experts feed-forward (backends/moe.h): acc[t] += out(x[t]) for n_tok rows, x and acc
  // [n_tok][m.n_in()], s the host scratch sized for the batch. Default (moe.cpp): x read back to the host,
  // the routing computed there, each chosen expert's rows gathered and run through matmul_shared /
  // matmul_glu, glu and matmul on host arrays, the weighted sum added to acc with add — every backend runs it
  // through the ops it has.
  virtual void moe_ffn(const MoeFfn& m, const float* x, int64_t n_tok, float* acc, MoeScratch& s);
  // x[r] += v for each of n_rows rows of n floats (a bias; v one of the model's vectors, WeightSet::vectors).
  // x: [n_rows][n]. Default: add row by row.
  virtual void add_rows(float* x, const float* v, int64_t n_rows, int64_t n) {
    for (int64_t r = 0; r < n_rows; ++r) add(x + r * n, v, n);
  }
  // The residual add and the next RMSNorm: acc += x, then y = rmsnorm(acc) * w, for n_rows rows of n floats
  // (acc, x, y: [n_rows][n]; y must not alias acc or x). A backend may do both in one pass; this is the
  // unfused reference.
  virtual void add_rmsnorm(float* acc, const float* x, const float* w, float* y, int64_t n_rows, int64_t n,
                           float eps) {
    add(acc, x, n_rows * n);
    rmsnorm(acc, w, y, n_rows, n, eps);
  }
  // A block's output product with the residual add and the next RMSNorm after it: o = wo x, acc += o, then
  // y = rmsnorm(acc) * g (x: [n_tok][wo.n_in]; o, acc, y: [n_tok][wo.n_out]; y must not alias acc, o or
  // x). o is scratch (its contents afterwards are unspecified). A backend may leave the norm's scale to the
  // products that read y next; this is the unfused reference.
  virtual void matmul_add_rmsnorm(const Weight& wo, const float* x, int64_t n_tok, float* o, float* acc,
                                  const float* g, float* y, float eps) {
    matmul(wo, x, n_tok, o);
    add_rmsnorm(acc, o, g, y, n_tok, wo.n_out, eps);
  }

  // For a backend that keeps the KV cache in memory of its own (OpenCL): copy positions [p0, p1) of every
  // layer from the host cache kv (same geometry) to its cache, or back. Hybrid prefill runs a prompt on the
  // CPU backend over kv and sends the rows up; rows the device decoded come down before the CPU extends the
  // cache. Both return with the backend's queued work finished, so the host may then use arrays the backend
  // mirrors. Default: the backend works on kv itself, there is nothing to copy.
  virtual void kv_to_device(const KvCache& kv, int64_t p0, int64_t p1) { (void)kv, (void)p0, (void)p1; }
  virtual void kv_to_host(KvCache& kv, int64_t p0, int64_t p1) { (void)kv, (void)p0, (void)p1; }

  // Whether the session's host KvCache must hold the cache's contents: a device backend that keeps the cache
  // in its own memory says no, unless an op that reads or writes it runs on the host (a kernel that failed
  // its self-check).
  virtual bool needs_host_kv() const { return true; }

  // One line on the device memory a device backend holds (weights, KV cache, the rest), for the user; empty
  // for a backend that runs in host memory.
  virtual std::string memory_summary() const { return {}; }

  // The directory the backend keeps files in (a GPU backend's program cache; a session's --prefill auto
  // speeds go beside it); empty: none may be written (the backend's cache is off). By default the backend's
  // default_cache_dir.
  virtual std::string files_dir() const { return default_cache_dir(name()); }

  // Device time per kernel since the last reset, for a backend that times its kernels (OpenCL with
  // profiling on); empty otherwise. Reading it waits for the queued work.
  virtual std::vector<KernelTime> kernel_times() const { return {}; }
  virtual void reset_kernel_times() {}

  // The host's share of decode passes, for a backend that measures it (Vulkan): decode passes since the last
  // reset, those replayed from a recording, their wall time from begin_forward() to the return of
  // end_forward(), and the part of it spent waiting for the device. Zeros otherwise.
  struct PassTimes {
    uint64_t decode_passes = 0, replayed = 0;
    double wall_ns = 0, wait_ns = 0;
  };
  virtual PassTimes pass_times() const { return {}; }
  virtual void reset_pass_times() {}

  // Measures the pacing controller may take between forward passes (runtime/telemetry/pacing.h), each
  // offered by a backend that can:
  // - lower occupancy: occupancy_steps() steps below full (0: none offered), set_occupancy_step(k) runs the
  //   following passes at step k (0: full), trading speed for power without changing a result;
  // - lossy row-tile masking (--degrade tile-mask=F): prepared at load when BackendParams::tile_mask > 0,
  //   has_tile_mask() says whether any matrix got a mask, set_tile_mask(on) switches it for the following
  //   passes. Results change while it is on; off, they are exactly the unmasked ones.
  virtual int occupancy_steps() const { return 0; }
  virtual void set_occupancy_step(int step) { (void)step; }
  virtual bool has_tile_mask() const { return false; }
  virtual void set_tile_mask(bool on) { (void)on; }
};

}  // namespace tilellm
