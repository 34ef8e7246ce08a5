// The self-check: before the backend is used, every kernel runs a small random case and its result is
// compared with the CPU backend's (the float path). A kernel that disagrees is marked `on_cpu`: its op then
// runs on the CPU backend for the rest of the backend's life, and a warning names it. Drivers that miscompile
// a kernel (silent wrong results are a known hazard on some mobile GPUs) thus cost speed, not correctness.
//
// Tolerance: 1e-3 of the largest reference magnitude of the case. Correct kernels agree to ~1e-6 of it
// (tests/opencl derive the exact bounds); a broken kernel (wrong index, a missed write, a wrong formula, a
// failed barrier) is off by a sizeable fraction of it, and a NaN always fails.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>

#include "backends/check_cases.h"
#include "backends/opencl/image_weight.h"
#include "backends/opencl/opencl_backend.h"
#include "backends/q8_round.h"
#include "base/error.h"
#include "format/asym_quant.h"
#include "format/quants.h"

namespace tilellm {
namespace {

constexpr double kTolerance = 1e-3;
// The verdict entry of check_producer_rounding (the program cache keeps failed checks by name).
constexpr const char* kProducerRounding = "q8_producer_rounding";

}  // namespace

void OpenclBackend::warn_cpu_fallback(const opencl::Kernel& k, double err, bool cached) const {
  // A failed integer decode kernel hands its products to the float ones.
  const bool q8_vec = k.name.rfind("matvec_q8_", 0) == 0 || k.name.rfind("matvec_glu_q8_", 0) == 0;
  // A failed matvec kernel hands decode to its type's matmul kernel (matmul.cpp), which has its own verdict.
  // A failed fused kernel hands its work to the separate kernels it stands for.
  const bool matvec = !q8_vec && k.name.rfind("matvec_", 0) == 0 && k.name.rfind("matvec_glu_", 0) != 0;
  // rms_scale stands for the norm left to the products that read it (matmul.cpp): its failure keeps the
  // norms in kernels of their own.
  const bool fused = (!q8_vec && k.name.rfind("matvec_glu_", 0) == 0) || k.name == "rope_kv_store" ||
                     k.name == "add_rmsnorm" || k.name == "rms_scale";
  // gemm_split_sum stands for split K (matmul.cpp): its failure leaves every product unsplit.
  const bool split = k.name == "gemm_split_sum";
  // The integer prompt GEMM and its rounding stand in for the float GEMM.
  const bool q8 = k.name.rfind("matmul_q8_", 0) == 0 || k.name == "quantize_q8";
  std::fprintf(stderr,
               "warning: OpenCL kernel %s failed its self-check on %s (profile %s)%s: error %.3g of the "
               "largest value; %s from now on\n",
               k.name.c_str(), caps().name.c_str(), caps().profile.c_str(),
               cached ? " (verdict from the program cache)" : "", err,
               q8_vec   ? "decode's products take the float kernels"
               : matvec ? "one-token products use the matmul kernel"
               : fused  ? "the separate kernels it combines run instead"
               : split  ? "prompt products run unsplit"
               : q8     ? "prompt products take the float GEMM"
                        : "its op runs on the CPU");
}

bool OpenclBackend::apply_cached_verdict(const std::vector<CacheEntry::Failed>& failed) {
  std::vector<std::pair<opencl::Kernel*, double>> marked;
  bool producers = true;
  for (const CacheEntry::Failed& f : failed) {
    if (f.kernel == kProducerRounding) {  // not a kernel: check_producer_rounding's verdict
      producers = false;
      continue;
    }
    opencl::Kernel* hit = nullptr;
    for (opencl::Kernel* k : all_kernels()) {
      if (k->name == f.kernel) hit = k;
    }
    if (!hit) return false;  // the key covers the sources, so only a damaged entry gets here
    marked.emplace_back(hit, f.error);
  }
  for (const auto& [k, err] : marked) {
    k->on_cpu = true;
    warn_cpu_fallback(*k, err, /*cached=*/true);
  }
  if (!producers) {
    round_in_producers_ = false;
    warn_producer_rounding(/*cached=*/true);
  }
  failed_ = failed;
  return true;
}

void OpenclBackend::run_self_check() {
  std::mt19937 rng(0x5e1fc4ecu);
  failed_.clear();
  // Every product unsplit but the split check's (check_split below), whatever the options ask, so that a
  // broken split is told from a broken product; the options come back when the check ends.
  struct KeepSplit {
    OpenclBackendOptions& o;
    const int split = o.gemm_split;
    const int64_t blocks = o.gemm_split_blocks;
    ~KeepSplit() {
      o.gemm_split = split;
      o.gemm_split_blocks = blocks;
    }
  } keep_split{opts_};
  opts_.gemm_split = 0;
  opts_.gemm_split_blocks = 0;
  // The float kernels are checked with the integer prompt GEMM off (their prompts take the float GEMM); the
  // integer GEMM is checked last, on its own cases (the end of this function).
  const int q8_dot = std::exchange(q8_dot_, -1);
  auto verdict = [&](opencl::Kernel& k, double err) {
    if (err <= kTolerance) return;
    k.on_cpu = true;
    failed_.push_back({k.name, err});
    warn_cpu_fallback(k, err, /*cached=*/false);
  };

  // A matrix of random rows as the device holds it (w), and the weight the CPU computes with (ref: its exact
  // values), in a GGUF type or converted; the block formats every device kernel reads, each through one
  // (mode, type) that keeps it (Q4_K: KQ4, Q6_K: KQ8).
  struct Rows {
    std::vector<uint8_t> bytes;
    std::unique_ptr<ConvertedRows> conv;
    Weight w, ref;
  };
  auto make_rows = [&](WeightsMode mode, GgmlType t, int64_t n_in, int64_t n_out) {
    Rows r;
    if (mode == WeightsMode::Native) {
      r.bytes = random_rows(t, n_in, n_out, rng);
      r.w = r.ref = check_weight(t, r.bytes.data(), n_in, n_out);
    } else {
      r.conv = std::make_unique<ConvertedRows>(mode, n_in, n_out, rng);
      r.w = r.conv->w;
      r.ref = r.conv->exact;
    }
    return r;
  };
  static constexpr std::pair<WeightsMode, GgmlType> kBlockKinds[] = {
      {WeightsMode::Native, GgmlType::Q4_0}, {WeightsMode::Native, GgmlType::Q4_1},
      {WeightsMode::Native, GgmlType::Q8_0}, {WeightsMode::Native, GgmlType::Q4_K},
      {WeightsMode::Native, GgmlType::Q6_K}, {WeightsMode::Int4B64, GgmlType::F32},
      {WeightsMode::Int8B0, GgmlType::F32}};

  // The fused decode GLU of a block format: gate g (already on the device), a second random weight of its
  // shape and format as up; ref_g / ref_u are what the CPU computes with (the exact values of a conversion).
  // q8: the integer kernel (the float one passed), whose reference takes x rounded as the device rounds it.
  auto check_glu = [&](const Weight& g, const Weight& ref_g, WeightsMode mode, const float* x,
                       bool q8 = false) {
    const int f = int(weights_.at(g.data).fmt);
    opencl::Kernel& k = (q8 ? k_matvec_glu_q8_ : k_matvec_glu_)[f];
    if (!k.handle || (q8 && k_matvec_glu_[f].on_cpu)) return;
    std::vector<float> xr;
    const float* x_ref = x;
    if (q8) {
      xr.resize(size_t(g.n_in));
      round_activations_q8(x, g.n_in, xr.data());
      x_ref = xr.data();
    }
    std::vector<uint8_t> bytes;     // native: u's GGUF rows
    std::vector<float> src, exact;  // converted: u's float rows and their conversion's exact values
    Weight u = g, ref_u;
    u.name = g.name + " (up)";
    if (mode == WeightsMode::Native) {
      bytes = random_rows(g.type, g.n_in, g.n_out, rng);
      u.data = bytes.data();
      ref_u = u;
    } else {
      const AsymFormat kind = mode == WeightsMode::Int4B64 ? AsymFormat::Int4B64 : AsymFormat::Int8B0;
      src = random_floats(size_t(g.n_in * g.n_out), rng);
      exact.resize(src.size());
      for (int64_t r = 0; r < g.n_out; ++r)
        dequantize_row_asym(kind, src.data() + r * g.n_in, g.n_in, exact.data() + r * g.n_in);
      u.data = reinterpret_cast<const uint8_t*>(src.data());
      ref_u = ref_g;
      ref_u.data = reinterpret_cast<const uint8_t*>(exact.data());
    }
    weights_.emplace(u.data, make_device_weight(u, mode, false));
    double err = 0.0;
    for (FfnAct act : {FfnAct::SiLU, FfnAct::GeluTanh}) {
      std::vector<float> ref(size_t(g.n_out)), got(ref.size()), up(ref.size());
      cpu_->matmul_glu(ref_g, ref_u, x_ref, 1, act, ref.data(), up.data());
      matmul_glu(g, u, x, 1, act, got.data(), up.data());
      err = std::max(err, relative_error(ref, got));
    }
    verdict(k, err);
    weights_.erase(u.data);
  };

  // Split K (gemm_split_for), one block a slice, on a product whose kernel passed unsplit: a wrong slice or
  // sum leaves every product unsplit.
  auto check_split = [&](const Weight& w, DevFormat f, const float* x, int64_t n_tok,
                         const std::vector<float>& ref) {
    if (gemm_parts_floats_ == 0 || matmul_kernel(f).on_cpu || k_gemm_split_sum_.on_cpu) return;
    opts_.gemm_split_blocks = 1;
    std::vector<float> got(ref.size(), 0.0f);
    matmul(w, x, n_tok, got.data());
    opts_.gemm_split_blocks = 0;
    verdict(k_gemm_split_sum_, relative_error(ref, got));
  };

  // Weights: embedding and matmul of every block type a kernel reads. Each op below still runs its kernel:
  // a kernel's on_cpu is set only after its own check.
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    // With the tiled GEMM, rows over two row tiles (the second partial); the float rows end in a partial
    // block. Q4_K checks the Kq4 kernels, Q5_K (with offsets) and Q6_K (without) the Kq8 ones.
    const int64_t bs = type_traits(t).block_size;
    const int64_t n_in = bs == 1 ? 63 : bs == 256 ? 256 : 64, n_tok = 2;
    const int64_t n_out = gemm_.on() ? gemm_.tr() + 5 : 5;
    std::vector<uint8_t> bytes = random_rows(t, n_in, n_out, rng);
    const Weight w = check_weight(t, bytes.data(), n_in, n_out);
    weights_.emplace(w.data,
                     make_device_weight(w, WeightsMode::Native, false));  // whatever options.weights says
    const DevFormat f = weights_.at(w.data).fmt;
    const int32_t ids[3] = {3, 0, 4};
    std::vector<float> ref(size_t(3 * n_in)), got(ref.size());
    cpu_->embed(w, ids, 3, 0.5f, ref.data());
    embed(w, ids, 3, 0.5f, got.data());
    verdict(embed_kernel(f), relative_error(ref, got));

    const std::vector<float> x = random_floats(size_t(n_tok * n_in), rng);
    ref.assign(size_t(n_tok * n_out), 0.0f);
    got.assign(ref.size(), 0.0f);
    cpu_->matmul(w, x.data(), n_tok, ref.data());
    matmul(w, x.data(), n_tok, got.data());
    verdict(matmul_kernel(f), relative_error(ref, got));
    check_split(w, f, x.data(), n_tok, ref);
    // One token: the matvec kernel (decode), on the first token's input.
    ref.assign(size_t(n_out), 0.0f);
    got.assign(ref.size(), 0.0f);
    cpu_->matmul(w, x.data(), 1, ref.data());
    matmul(w, x.data(), 1, got.data());
    verdict(matvec_kernel(f), relative_error(ref, got));
    check_glu(w, w, WeightsMode::Native, x.data());
    weights_.erase(w.data);  // `bytes` dies here; nothing may find it by address again
    // --gpu-memory image: the image kernels on the same rows, held in an image this time (when it fits the
    // device's image limits; otherwise no weight of this shape would use them).
    if (has_image_kernel(f) && opencl::plan_weight_image(caps(), device_row_bytes(t, n_in), n_out,
                                                         opts_.image_max_width, opts_.image_max_height)
                                   .fits) {
      weights_.emplace(w.data, make_device_weight(w, WeightsMode::Native, true));
      for (int64_t nt : {n_tok, int64_t(1)}) {
        ref.assign(size_t(nt * n_out), 0.0f);
        got.assign(ref.size(), 0.0f);
        cpu_->matmul(w, x.data(), nt, ref.data());
        matmul(w, x.data(), nt, got.data());
        verdict(nt == 1 ? matvec_image_kernel(f) : matmul_image_kernel(f), relative_error(ref, got));
      }
      weights_.erase(w.data);
    }
  }

  // The converted formats (--weights int4b64, int8b0): random float rows converted at upload; the reference
  // is the CPU's float path on the same conversion's exact values (dequantize_row_asym). K = 96 leaves
  // INT4B64 a group of one block.
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0}) {
    const int64_t n_in = 96, n_out = 5, n_tok = 2;
    const ConvertedRows c(mode, n_in, n_out, rng);
    const Weight &w = c.w, &we = c.exact;
    weights_.emplace(w.data, make_device_weight(w, mode, false));
    const DevFormat f = weights_.at(w.data).fmt;
    const std::vector<float> x = random_floats(size_t(n_tok * n_in), rng);
    std::vector<float> ref(size_t(n_tok * n_out)), got(ref.size());
    cpu_->matmul(we, x.data(), n_tok, ref.data());
    matmul(w, x.data(), n_tok, got.data());
    verdict(matmul_kernel(f), relative_error(ref, got));
    check_split(w, f, x.data(), n_tok, ref);
    ref.assign(size_t(n_out), 0.0f);
    got.assign(ref.size(), 0.0f);
    cpu_->matmul(we, x.data(), 1, ref.data());
    matmul(w, x.data(), 1, got.data());
    verdict(matvec_kernel(f), relative_error(ref, got));
    check_glu(w, we, mode, x.data());
    weights_.erase(w.data);
  }

  // The norm left to the readers (matmul.cpp, matmul_add_rmsnorm): for every block format the device reads,
  // a product of n rows adding into a random residual and writing the next norm's output unscaled, that
  // output read with the scale by a product and by the GLU kernel of 37 rows, then scaled by rms_scale; all
  // against matmul, add_rmsnorm, matmul and matmul_glu on the CPU. Rows of 256 (the K-quants' super-block).
  // One verdict, rms_scale's: when it fails, no product leaves a norm pending (the unfused ops run).
  {
    const int64_t n = 256, rows = 37;
    const float eps = 1e-5f;
    auto fbytes = [](int64_t k) { return size_t(k) * sizeof(float); };
    const opencl::Buffer acc_b = rt_.alloc(fbytes(n)), g_b = rt_.alloc(fbytes(n)), z_b = rt_.alloc(fbytes(n));
    const opencl::Buffer y_b = rt_.alloc(fbytes(rows)), glu_b = rt_.alloc(fbytes(rows));
    double err = 0.0;
    for (const auto& [mode, t] : kBlockKinds) {
      const Rows p = make_rows(mode, t, n, n), c = make_rows(mode, t, n, rows),
                 u = make_rows(mode, t, n, rows);
      const DeviceWeight dp = make_device_weight(p.w, mode, false), dc = make_device_weight(c.w, mode, false),
                         du = make_device_weight(u.w, mode, false);
      const opencl::Kernel& glu_k = k_matvec_glu_[int(dp.fmt)];
      if (dp.float_rows() || matvec_kernel(dp.fmt).on_cpu || !glu_k.handle || glu_k.on_cpu) continue;
      const std::vector<float> x = random_floats(size_t(n), rng), g = random_floats(size_t(n), rng);
      std::vector<float> acc = random_floats(size_t(n), rng);
      rt_.write_now(in_a_, 0, x.data(), fbytes(n));
      rt_.write_now(acc_b, 0, acc.data(), fbytes(n));
      rt_.write_now(g_b, 0, g.data(), fbytes(n));
      const DeviceWeight* dws[1] = {&dp};
      const opencl::Buffer* zs[1] = {&z_b};
      const Residual res{&acc_b, &g_b, eps};
      enqueue_matvec_blocks(dws, zs, 1, in_a_, nullptr, &res);
      const PendingNorm pn{nullptr, n};
      const DeviceWeight* dcs[1] = {&dc};
      const opencl::Buffer* ys[1] = {&y_b};
      enqueue_matvec_blocks(dcs, ys, 1, z_b, &pn);
      enqueue_matvec_glu(dc, du, FfnAct::SiLU, z_b, glu_b, &pn);
      enqueue_rms_scale(z_b, n);
      const size_t nn = static_cast<size_t>(n), nr = static_cast<size_t>(rows);
      std::vector<float> acc_got(nn), xn_got(nn), y_got(nr), glu_got(nr);
      rt_.read(acc_b, 0, acc_got.data(), fbytes(n));
      rt_.read(z_b, 0, xn_got.data(), fbytes(n));
      rt_.read(y_b, 0, y_got.data(), fbytes(rows));
      rt_.read(glu_b, 0, glu_got.data(), fbytes(rows));
      ++epoch_;
      std::vector<float> o(nn), xn(nn), y(nr), gl(nr), up(nr);
      cpu_->matmul(p.ref, x.data(), 1, o.data());
      cpu_->add_rmsnorm(acc.data(), o.data(), g.data(), xn.data(), 1, n, eps);
      cpu_->matmul(c.ref, xn.data(), 1, y.data());
      cpu_->matmul_glu(c.ref, u.ref, xn.data(), 1, FfnAct::SiLU, gl.data(), up.data());
      err = std::max({err, relative_error(acc, acc_got), relative_error(xn, xn_got), relative_error(y, y_got),
                      relative_error(gl, glu_got)});
    }
    verdict(k_rms_scale_, err);
  }
  check_elementwise(*cpu_, *this, 50, false, rng, [&](ElementwiseOp op, double err) {
    switch (op) {
      case ElementwiseOp::Rmsnorm:
        return verdict(k_rmsnorm_, err);
      case ElementwiseOp::AddRmsnorm:
        return verdict(k_add_rmsnorm_, err);
      case ElementwiseOp::Rope:
        return verdict(k_rope_, err);
      case ElementwiseOp::GluSilu:
        return verdict(k_glu_silu_, err);
      case ElementwiseOp::GluGelu:
        return verdict(k_glu_gelu_, err);
      case ElementwiseOp::Add:
        return verdict(k_add_, err);
      case ElementwiseOp::AddRows:
        return;  // add_rows runs through add here
    }
  });

  // KV ops on a cache of their own: 1 layer, 40 positions, 1 KV head of 16, in the session's cache type.
  {
    const int64_t n_ctx = 40, hd = 16, kv_dim = hd;
    const GgmlType type = opts_.kv_type;
    const size_t elem = type == GgmlType::F16 ? 2 : 4, plane = size_t(n_ctx * kv_dim) * elem;
    KvCache ref(1, n_ctx, 1, hd, type);
    opencl::Buffer cache = rt_.alloc(2 * plane);
    for (int64_t p0 = 0; p0 < n_ctx; p0 += 4) {
      const std::vector<float> k = random_floats(size_t(4 * kv_dim), rng),
                               v = random_floats(size_t(4 * kv_dim), rng);
      const int32_t pos[4] = {int32_t(p0), int32_t(p0 + 1), int32_t(p0 + 2), int32_t(p0 + 3)};
      cpu_->kv_store(ref, 0, k.data(), v.data(), pos, 4);
      rt_.write_now(in_a_, 0, k.data(), k.size() * sizeof(float));
      rt_.write_now(in_b_, 0, v.data(), v.size() * sizeof(float));
      enqueue_kv_store(cache, 0, n_ctx, kv_dim, 4, in_a_, in_b_, dev_positions(pos, 4));
    }
    // Compare the stored rows as floats (the cache type's values).
    std::vector<uint8_t> dev(2 * plane);
    rt_.read(cache, 0, dev.data(), dev.size());
    std::vector<float> want, have;
    cache_rows(ref, dev.data(), {}, want, have);
    verdict(k_kv_store_, relative_error(want, have));

    // RoPE and the KV write in one launch, both modes, 8 of 16 dims turned (the rest copied): q, k and the
    // two tokens' cache rows against the CPU's rope, rope, kv_store.
    {
      const RopeTable table(n_ctx, 8, 10000.0f, 1.0f);
      RopeShape r;
      r.n_head = 2;
      r.n_head_kv = 1;
      r.head_dim = hd;
      r.rope_dim = 8;
      r.table = &table;
      const int32_t rpos[2] = {5, 31};
      double err = 0.0;
      for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
        r.mode = mode;
        std::vector<float> q = random_floats(size_t(2 * 2 * hd), rng), k = random_floats(size_t(2 * hd), rng);
        const std::vector<float> v = random_floats(size_t(2 * hd), rng);
        std::vector<float> q_ref = q, k_ref = k;
        cpu_->rope_kv_store(q_ref.data(), k_ref.data(), v.data(), ref, 0, rpos, 2, r);
        rt_.write_now(in_a_, 0, q.data(), q.size() * sizeof(float));
        rt_.write_now(in_b_, 0, k.data(), k.size() * sizeof(float));
        rt_.write_now(out_, 0, v.data(), v.size() * sizeof(float));
        enqueue_rope_kv_store(cache, 0, n_ctx, 2, r, in_a_, in_b_, out_, dev_rope_rows(table, rpos, 2),
                              dev_positions(rpos, 2));
        rt_.read(in_a_, 0, q.data(), q.size() * sizeof(float));
        rt_.read(in_b_, 0, k.data(), k.size() * sizeof(float));
        rt_.read(cache, 0, dev.data(), dev.size());
        std::vector<float> rows_ref, rows_dev;
        cache_rows(ref, dev.data(), rpos, rows_ref, rows_dev);
        err = std::max(
            {err, relative_error(q_ref, q), relative_error(k_ref, k), relative_error(rows_ref, rows_dev)});
      }
      // The same in decode's q/k/v products (matmul_rope_kv_store: Norm mode, one token at position 9), for
      // every block format: q, k, v and the cache rows against matmul, rope_kv_store on the CPU.
      r.mode = RopeMode::Norm;
      const int64_t n_in = 256, nq = r.n_head * hd;
      const int32_t p9 = 9;
      const opencl::Buffer qb = rt_.alloc(size_t(nq) * sizeof(float)),
                           kb = rt_.alloc(size_t(kv_dim) * sizeof(float)),
                           vb = rt_.alloc(size_t(kv_dim) * sizeof(float));
      for (const auto& [mode, t] : kBlockKinds) {
        const Rows wq = make_rows(mode, t, n_in, nq), wk = make_rows(mode, t, n_in, kv_dim),
                   wv = make_rows(mode, t, n_in, kv_dim);
        const DeviceWeight dq = make_device_weight(wq.w, mode, false),
                           dk = make_device_weight(wk.w, mode, false),
                           dv = make_device_weight(wv.w, mode, false);
        if (dq.float_rows() || matvec_kernel(dq.fmt).on_cpu) continue;
        const std::vector<float> x = random_floats(size_t(n_in), rng);
        std::vector<float> q(static_cast<size_t>(nq)), k(static_cast<size_t>(kv_dim)), v(k.size());
        const Weight* refs[3] = {&wq.ref, &wk.ref, &wv.ref};
        float* ys[3] = {q.data(), k.data(), v.data()};
        cpu_->matmul_shared(refs, ys, 3, x.data(), 1);
        cpu_->rope_kv_store(q.data(), k.data(), v.data(), ref, 0, &p9, 1, r);
        rt_.write_now(in_a_, 0, x.data(), x.size() * sizeof(float));
        const DeviceWeight* dws[3] = {&dq, &dk, &dv};
        const opencl::Buffer* ybs[3] = {&qb, &kb, &vb};
        const RopeKv rope{&dev_rope_rows(table, &p9, 1), int(hd), int(table.n_half), &cache, 0, n_ctx,
                          &dev_positions(&p9, 1)};
        enqueue_matvec_blocks(dws, ybs, 3, in_a_, nullptr, nullptr, &rope);
        std::vector<float> q_got(q.size()), k_got(k.size()), v_got(v.size());
        rt_.read(qb, 0, q_got.data(), q_got.size() * sizeof(float));
        rt_.read(kb, 0, k_got.data(), k_got.size() * sizeof(float));
        rt_.read(vb, 0, v_got.data(), v_got.size() * sizeof(float));
        rt_.read(cache, 0, dev.data(), dev.size());
        ++epoch_;
        std::vector<float> rows_ref, rows_dev;
        cache_rows(ref, dev.data(), {&p9, 1}, rows_ref, rows_dev);
        err = std::max({err, relative_error(q, q_got), relative_error(k, k_got), relative_error(v, v_got),
                        relative_error(rows_ref, rows_dev)});
      }
      verdict(k_rope_kv_store_, err);
    }

    // Attention reads the reference cache's exact contents, so a kv_store fault does not show up here.
    for (int kind = 0; kind < 2; ++kind) rt_.write(cache, size_t(kind) * plane, ref.plane(0, kind), plane);
    AttnParams p;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.head_dim = hd;
    p.scale = 0.25f;
    const int32_t pos[2] = {20, 39};
    const std::vector<float> q = random_floats(size_t(2 * p.n_head * hd), rng);
    std::vector<float> want_o(q.size()), have_o(q.size());
    cpu_->attention(q.data(), ref, 0, pos, 2, p, want_o.data());
    rt_.write_now(in_a_, 0, q.data(), q.size() * sizeof(float));
    enqueue_attention(cache, 0, n_ctx, kv_dim, 2, p, in_a_, pos, dev_positions(pos, 2), out_);
    rt_.read(out_, 0, have_o.data(), have_o.size() * sizeof(float));
    const double err_o = relative_error(want_o, have_o);
    // The same with one of the kernel's knobs at 1 block, restored after.
    auto error_with_one = [&](int64_t& blocks) {
      const int64_t kept = blocks;
      blocks = 1;
      std::fill(have_o.begin(), have_o.end(), 0.0f);
      enqueue_attention(cache, 0, n_ctx, kv_dim, 2, p, in_a_, pos, dev_positions(pos, 2), out_);
      rt_.read(out_, 0, have_o.data(), have_o.size() * sizeof(float));
      blocks = kept;
      return relative_error(want_o, have_o);
    };
    // A block a pass (the second token's 40 keys in two passes, the online softmax between them).
    verdict(k_attention_, std::max(err_o, error_with_one(opts_.attention_pass_blocks)));
    // The keys split one block per work-group (the second token's 40 keys in two chunks), merged by
    // attention_merge.
    verdict(k_attention_merge_, error_with_one(opts_.attention_chunk_blocks));
    // A prompt of 18 tokens (positions 22 .. 39: a whole tile and a part one) on attention_tiled, without
    // and with a window that starts mid-chunk.
    if (attention_tiled(18, p)) {
      std::vector<int32_t> pp(18);
      for (size_t i = 0; i < pp.size(); ++i) pp[i] = int32_t(22 + i);
      const std::vector<float> q18 = random_floats(size_t(18 * p.n_head * hd), rng);
      std::vector<float> want(q18.size()), have(q18.size());
      double err = 0.0;
      for (int window : {0, 7}) {
        p.window = window;
        cpu_->attention(q18.data(), ref, 0, pp.data(), 18, p, want.data());
        rt_.write_now(in_a_, 0, q18.data(), q18.size() * sizeof(float));
        enqueue_attention(cache, 0, n_ctx, kv_dim, 18, p, in_a_, pp.data(), dev_positions(pp.data(), 18),
                          out_);
        rt_.read(out_, 0, have.data(), have.size() * sizeof(float));
        err = std::max(err, relative_error(want, have));
      }
      verdict(k_attention_tiled_, err);
    }
  }

  // The integer prompt GEMM (kernels/gemm_q8.cl) of every block format it reads, over two row tiles (the
  // second partial) and 3 tokens, against the CPU's float path on the input as the device rounds it; the
  // rounding itself (quantize_q8) against the host's (q8_round.h), read back from the device.
  q8_dot_ = q8_dot;
  if (q8_dot_ < 0) return;
  // The integer decode kernels are checked whatever --cl-int-matvec says (the verdict is cached for every
  // session of these programs, some of which may turn them on); the option comes back when the check ends.
  struct KeepIntMatvec {
    OpenclBackendOptions& o;
    const bool on = o.int_matvec;
    ~KeepIntMatvec() { o.int_matvec = on; }
  } keep_int_matvec{opts_};
  opts_.int_matvec = true;
  for (const auto& [mode, t] : kBlockKinds) {
    // A failed rounding leaves every prompt on the float GEMM: the products after it would run there and
    // be judged against the rounded input.
    if (k_quantize_q8_.on_cpu) break;
    const int64_t n_in = 256, n_out = gemm_.tr() + 5, n_tok = 3;
    Rows r = make_rows(mode, t, n_in, n_out);
    weights_.emplace(r.w.data, make_device_weight(r.w, mode, false));
    opencl::Kernel& k = k_matmul_q8_[int(weights_.at(r.w.data).fmt)];
    if (k.handle) {
      const std::vector<float> x = random_floats(size_t(n_tok * n_in), rng);
      std::vector<float> xr(x.size()), ref(size_t(n_tok * n_out)), got(ref.size());
      round_activations_q8(x.data(), n_tok * n_in, xr.data());
      cpu_->matmul(r.ref, xr.data(), n_tok, ref.data());
      matmul(r.w, x.data(), n_tok, got.data());
      verdict(k, relative_error(ref, got));
      // The device's rounding of x: d q per element from the codes and d of each block (gemm_q8.cl's rows).
      const int64_t nb = n_in / 32;
      const int64_t row_words = (10 * nb + 3) / 4 * 4;  // TL_Q8_ROW
      std::vector<uint32_t> words(size_t(n_tok * row_words));
      rt_.read(q8x_, 0, words.data(), words.size() * sizeof(uint32_t));
      std::vector<float> dev(x.size());
      for (int64_t i = 0; i < n_tok * n_in; ++i) {
        const uint32_t* row = words.data() + (i / n_in) * row_words;
        const int64_t e = i % n_in;
        float d;
        std::memcpy(&d, row + 8 * nb + e / 32, sizeof d);
        dev[size_t(i)] = d * float(int8_t(uint8_t(row[e / 4] >> (8 * (e % 4)))));
      }
      verdict(k_quantize_q8_, relative_error(xr, dev));
      // One token: decode's integer product and its gate/up kernel, on the first token's input (its
      // rounding is the first row of xr).
      opencl::Kernel& kv = k_matvec_q8_[int(weights_.at(r.w.data).fmt)];
      if (kv.handle && !matvec_kernel(weights_.at(r.w.data).fmt).on_cpu && !k_quantize_q8_.on_cpu) {
        ref.assign(size_t(n_out), 0.0f);
        got.assign(ref.size(), 0.0f);
        cpu_->matmul(r.ref, xr.data(), 1, ref.data());
        matmul(r.w, x.data(), 1, got.data());
        verdict(kv, relative_error(ref, got));
        check_glu(r.w, r.ref, mode, x.data(), /*q8=*/true);
      }
    }
    weights_.erase(r.w.data);
  }
  check_producer_rounding(rng);
}

void OpenclBackend::check_producer_rounding(std::mt19937& rng) {
  // Decode's producers rounding their own output (kernels/gemm_q8.cl tl_q8_hand_in): a Q4_0 residual
  // product of 256 rows, the gate/up kernel of 64 rows over its output, RMSNorm and attention (below), each
  // output's rounding read back from its slot against the host's rounding (q8_round.h) of the output read
  // back. A wrong one leaves every integer product rounding its input in a launch of its own.
  if (q8_dot_ < 0 || k_quantize_q8_.on_cpu) return;
  const int64_t n = 256, ff = 64;
  const DevFormat f = DevFormat::Q4_0;
  if (matvec_kernel(f).on_cpu || k_matvec_q8_[int(f)].on_cpu || k_matvec_glu_q8_[int(f)].on_cpu ||
      k_matvec_glu_[int(f)].on_cpu || k_rms_scale_.on_cpu)
    return;
  const std::vector<uint8_t> wp = random_rows(GgmlType::Q4_0, n, n, rng),
                             wg = random_rows(GgmlType::Q4_0, n, ff, rng),
                             wu = random_rows(GgmlType::Q4_0, n, ff, rng);
  const DeviceWeight dp =
      make_device_weight(check_weight(GgmlType::Q4_0, wp.data(), n, n), WeightsMode::Native, false);
  const DeviceWeight dg =
      make_device_weight(check_weight(GgmlType::Q4_0, wg.data(), n, ff), WeightsMode::Native, false);
  const DeviceWeight du =
      make_device_weight(check_weight(GgmlType::Q4_0, wu.data(), n, ff), WeightsMode::Native, false);
  auto fbytes = [](int64_t k) { return size_t(k) * sizeof(float); };
  const opencl::Buffer acc_b = rt_.alloc(fbytes(n)), g_b = rt_.alloc(fbytes(n)), z_b = rt_.alloc(fbytes(n)),
                       glu_b = rt_.alloc(fbytes(ff));
  const std::vector<float> x = random_floats(size_t(n), rng), g = random_floats(size_t(n), rng),
                           acc = random_floats(size_t(n), rng);
  rt_.write_now(in_a_, 0, x.data(), fbytes(n));
  rt_.write_now(acc_b, 0, acc.data(), fbytes(n));
  rt_.write_now(g_b, 0, g.data(), fbytes(n));
  // The device's rounding in a slot, d q per element (gemm_q8.cl's rows), and the host's of `values`.
  auto error_of = [&](int slot, const opencl::Buffer& out, int64_t m) {
    if (slot < 0) return 1.0;  // not rounded at all
    const size_t mm = static_cast<size_t>(m);
    std::vector<float> values(mm), want(mm), have(mm);
    rt_.read(out, 0, values.data(), fbytes(m));
    const int64_t nb = m / 32;
    std::vector<uint32_t> words(size_t(10 * nb));
    rt_.read(q8_slot(slot), 0, words.data(), words.size() * sizeof(uint32_t));
    for (int64_t i = 0; i < m; ++i) {
      float d;
      std::memcpy(&d, words.data() + 8 * nb + i / 32, sizeof d);
      have[size_t(i)] = d * float(int8_t(uint8_t(words[size_t(i / 4)] >> (8 * (i % 4)))));
    }
    round_activations_q8(values.data(), m, want.data());
    return relative_error(want, have);
  };
  const DeviceWeight* dws[1] = {&dp};
  const opencl::Buffer* zs[1] = {&z_b};
  const Residual res{&acc_b, &g_b, 1e-5f};
  double err =
      error_of(enqueue_matvec_blocks(dws, zs, 1, in_a_, nullptr, &res, nullptr, nullptr, true), z_b, n);
  const PendingNorm pn{nullptr, n};
  err = std::max(
      err, error_of(enqueue_matvec_glu(dg, du, FfnAct::SiLU, z_b, glu_b, &pn, nullptr, true), glu_b, ff));
  // Decode's first norm rounding its output (rmsnorm.cl yq).
  if (!k_rmsnorm_.on_cpu) {
    enqueue_rmsnorm(acc_b, g_b, z_b, 1, n, 1e-5f, 1);
    err = std::max(err, error_of(1, z_b, n));
  }
  // Decode's attention rounding its output (attention.cl yq): one token at position 38 of a cache of 40,
  // 2 heads of 64 over 1 KV head, in the session's cache type, its keys in one chunk (attention rounds)
  // and in two (attention_merge rounds).
  if (!k_attention_.on_cpu) {
    const int64_t n_ctx = 40, hd = 64;
    KvCache kv(1, n_ctx, 1, hd, opts_.kv_type);
    for (int32_t p0 = 0; p0 < n_ctx; ++p0) {
      const std::vector<float> k = random_floats(size_t(hd), rng), v = random_floats(size_t(hd), rng);
      cpu_->kv_store(kv, 0, k.data(), v.data(), &p0, 1);
    }
    const size_t plane = size_t(kv.n_ctx() * kv.kv_dim()) * (opts_.kv_type == GgmlType::F16 ? 2 : 4);
    const opencl::Buffer cache = rt_.alloc(2 * plane);
    for (int kind = 0; kind < 2; ++kind) rt_.write_now(cache, size_t(kind) * plane, kv.plane(0, kind), plane);
    const AttnParams p{.n_head = 2, .n_head_kv = 1, .head_dim = hd, .scale = 0.125f};
    const int32_t pos = 38;
    const std::vector<float> q = random_floats(size_t(p.n_head * hd), rng);
    rt_.write_now(in_a_, 0, q.data(), q.size() * sizeof(float));
    const int64_t kept = opts_.attention_chunk_blocks;
    for (int64_t chunk_blocks : {int64_t(2), int64_t(1)}) {
      opts_.attention_chunk_blocks = chunk_blocks;
      const bool rounded =
          enqueue_attention(cache, 0, n_ctx, hd, 1, p, in_a_, &pos, dev_positions(&pos, 1), out_, 1);
      // (A merge whose groups cannot hold a row leaves the rounding to quantize_q8: nothing to check.)
      if (rounded || chunk_blocks == 2) err = std::max(err, error_of(rounded ? 1 : -1, out_, p.n_head * hd));
    }
    opts_.attention_chunk_blocks = kept;
  }
  ++epoch_;
  if (err <= kTolerance) return;
  round_in_producers_ = false;
  failed_.push_back({kProducerRounding, err});
  warn_producer_rounding(/*cached=*/false);
}

void OpenclBackend::warn_producer_rounding(bool cached) const {
  std::fprintf(
      stderr,
      "warning: the OpenCL decode products' rounding of their own output failed its self-check on %s "
      "(profile %s)%s; integer products round their input in a launch of their own\n",
      caps().name.c_str(), caps().profile.c_str(), cached ? " (verdict from the program cache)" : "");
}

}  // namespace tilellm
