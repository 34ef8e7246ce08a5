// The self-check: before the backend is used, every kernel runs a small random case and its result is
// compared with the host backend's (the float path; for the quantized products, on the activations as
// rounded_matmul_input rounds them). A kernel that disagrees is marked `on_cpu`: its op then runs on the
// host backend for the rest of the backend's life, and a warning names it. A miscompiled or broken kernel
// thus costs speed, not correctness.
//
// Tolerance: 1e-3 of the largest reference magnitude of the case (correct kernels agree to ~1e-6 of it; a
// broken one is off by a sizeable fraction, and a NaN always fails).
#include <algorithm>
#include <cstdio>
#include <random>

#include "backends/check_cases.h"
#include "backends/cuda/cuda_backend.h"
#include "base/error.h"
#include "format/asym_quant.h"
#include "format/quants.h"

namespace tilellm {
namespace {

constexpr double kTolerance = 1e-3;

}  // namespace

void CudaBackend::verdict(Kernel& k, double err) {
  if (err <= kTolerance) return;
  k.on_cpu = true;
  const bool fused_rope = &k == &k_qkv_rope_, fused_norm = &k == &k_matvec_norm_;
  const bool matvec = !fused_rope && !fused_norm && k.name.rfind("matvec_", 0) == 0;
  std::fprintf(
      stderr,
      "warning: CUDA kernel %s failed its self-check on %s: error %.3g of the largest value; %s from now "
      "on\n",
      k.name.c_str(), caps().name.c_str(), err,
      fused_rope   ? "the q/k/v products and rope_kv_store run as launches of their own"
      : fused_norm ? "the residual add and RMSNorm run as a launch of their own"
      : matvec     ? "its products use the prompt kernel"
      : k.name.rfind("gemm_f16_", 0) == 0 ? "prompts of its format use the int8 or float kernel"
      : k.name == "add_rmsnorm"           ? "the separate add and rmsnorm run instead"
                                          : "its op runs on the CPU");
}

void CudaBackend::run_self_check() {
  std::mt19937 rng(0x5e1fc4ecu);
  auto check_products = [&](const Weight& w, const Weight& exact) {
    const int f = weights_.at(w.data).fmt;
    // 13: a partial token tile of the prompt kernel; 5: a few tokens (a batch decode step); 1: decode; a
    // prompt long enough for the fp16 GEMM where it is set up (its weights rounded to fp16 move a product by
    // ~2^-12 of its size, well inside the tolerance).
    const int64_t n_half = kHalfGemmTokens;
    const std::vector<float> x = random_floats(size_t(n_half * w.n_in), rng);
    for (int64_t nt : {int64_t(13), int64_t(5), int64_t(1), n_half}) {
      if (nt == n_half && !on_half_gemm(w, nt)) continue;
      std::vector<float> xr(size_t(nt * w.n_in)), ref(size_t(nt * w.n_out)), got(ref.size());
      rounded_matmul_input(w, x.data(), nt, xr.data());
      cpu_->matmul(exact, xr.data(), nt, ref.data());
      const bool few = nt > 1 && on_matvec(weights_.at(w.data), nt);
      matmul(w, x.data(), nt, got.data());
      verdict(nt == 1        ? k_matvec_[f]
              : nt == n_half ? k_matmul16_[f]
              : few          ? k_matvec_few_[f]
                             : k_matmul_[f],
              relative_error(ref, got));
    }
  };
  // Every native device format through a GGUF type that keeps it, then the converted formats.
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const int64_t bs = type_traits(t).block_size;
    // Rows over two blocks of rows with a partial one; 96 inputs: three blocks of 32 (a partial stage);
    // float rows end in a partial block.
    const int64_t n_in = bs == 1 ? 63 : bs == 256 ? 256 : 96, n_out = 11;
    std::vector<uint8_t> bytes = random_rows(t, n_in, n_out, rng);
    const Weight w = check_weight(t, bytes.data(), n_in, n_out);
    weights_.emplace(w.data, make_device_weight(w, WeightsMode::Native));
    const int f = weights_.at(w.data).fmt;
    const int32_t ids[3] = {3, 0, 6};
    std::vector<float> ref(size_t(3 * n_in)), got(ref.size());
    cpu_->embed(w, ids, 3, 0.5f, ref.data());
    embed(w, ids, 3, 0.5f, got.data());
    verdict(k_embed_[int(f)], relative_error(ref, got));
    check_products(w, w);
    weights_.erase(w.data);
  }
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0}) {
    const ConvertedRows c(mode, 96, 5, rng);
    const Weight &w = c.w, &we = c.exact;
    weights_.emplace(w.data, make_device_weight(w, mode));
    // The host backend holds the float rows as F32: it multiplies by the conversion's exact values.
    check_products(w, we);
    weights_.erase(w.data);
  }
  // rmsnorm's rows of 320: more elements than threads, whole blocks of 32 (the Q8 output).
  check_elementwise(*cpu_, *this, 320, true, rng, [&](ElementwiseOp op, double err) {
    switch (op) {
      case ElementwiseOp::Rmsnorm:
        return verdict(k_rmsnorm_, err);
      case ElementwiseOp::AddRmsnorm:
        return verdict(k_add_rmsnorm_, err);
      case ElementwiseOp::Rope:
        return verdict(k_rope_, err);
      case ElementwiseOp::GluSilu:
        return verdict(k_glu_[0], err);
      case ElementwiseOp::GluGelu:
        return verdict(k_glu_[1], err);
      case ElementwiseOp::Add:
        return verdict(k_add_, err);
      case ElementwiseOp::AddRows:
        return verdict(k_add_rows_, err);
    }
  });
  // The residual add and RMSNorm carried by the products around them (--cuda-fuse-norm): a Q4_0 product of
  // 480 rows adding into a residual, then a GLU job of 64 rows forming the norm of that residual in its
  // launch, against the same two products with add_rmsnorm's launch between them: the same bits expected.
  if (opts_.fuse_norm && quantized_) {
    const int64_t n = 480, n_x = 64, m = 64;
    const float eps = 1e-5f;
    std::vector<std::vector<uint8_t>> bytes = {random_rows(GgmlType::Q4_0, n_x, n, rng),
                                               random_rows(GgmlType::Q4_0, n, m, rng),
                                               random_rows(GgmlType::Q4_0, n, m, rng)};
    const Weight ws[3] = {check_weight(GgmlType::Q4_0, bytes[0].data(), n_x, n),
                          check_weight(GgmlType::Q4_0, bytes[1].data(), n, m),
                          check_weight(GgmlType::Q4_0, bytes[2].data(), n, m)};
    for (const Weight& w : ws) weights_.emplace(w.data, make_device_weight(w, WeightsMode::Native));
    const std::vector<float> x = random_floats(size_t(n_x), rng), acc = random_floats(size_t(n), rng),
                             g = random_floats(size_t(n), rng);
    // [2][acc, y] of n floats, the norm's weights [n], the product's output [n], [2][GLU out] of m.
    cuda::Buffer buf = rt_.alloc(size_t(6 * n + 2 * m) * sizeof(float));
    float* f = buf.as<float>();
    float *o = f + 5 * n, *gw = f + 4 * n;
    for (int i = 0; i < 2; ++i) rt_.upload(buf, size_t(2 * i * n) * sizeof(float), acc.data(), size_t(n) * 4);
    rt_.upload(buf, size_t(4 * n) * sizeof(float), g.data(), size_t(n) * sizeof(float));
    rt_.upload(in_a_, 0, x.data(), x.size() * sizeof(float));
    const cuda::Q8 qx = q8_view(1), qn = q8_view(0);
    launch("quantize_q8", [&](cudaStream_t s) { cuda::quantize_q8(in_a_.as<float>(), 1, int(n_x), qx, s); });
    cuda::MatvecJob prod, glu;
    prod.w[0] = weights_.at(ws[0].data).matrix();
    prod.y[0] = o;
    glu.n = 2;
    glu.glu = 0;
    glu.w[0] = weights_.at(ws[1].data).matrix();
    glu.w[1] = weights_.at(ws[2].data).matrix();
    const char* pname = k_matvec_[cuda::kQ4_0].name.c_str();
    // Apart: the product, add_rmsnorm, the GLU product.
    launch(pname, [&](cudaStream_t s) { cuda::matvec_q8(prod, qx, s); });
    launch(k_add_rmsnorm_.name.c_str(),
           [&](cudaStream_t s) { cuda::rmsnorm(o, gw, f + n, 1, int(n), eps, f, qn, s); });
    glu.y[0] = f + 6 * n;
    launch(pname, [&](cudaStream_t s) { cuda::matvec_q8(glu, qn, s); });
    // Carried: the product adding into the second residual, the GLU product forming its norm.
    prod.residual = f + 2 * n;
    glu.y[0] = f + 6 * n + m;
    glu.norm = {f + 2 * n, gw, f + 3 * n, qn, eps};
    if (cuda::matvec_residual_fits(prod) && cuda::matvec_norm_fits(glu)) {
      launch(pname, [&](cudaStream_t s) { cuda::matvec_q8(prod, qx, s); });
      launch(k_matvec_norm_.name.c_str(), [&](cudaStream_t s) { cuda::matvec_q8(glu, qn, s); });
      std::vector<float> all(size_t(6 * n + 2 * m));
      rt_.download(buf, 0, all.data(), all.size() * sizeof(float));
      auto part = [&](int64_t at, int64_t len) {
        return std::vector<float>(all.begin() + at, all.begin() + at + len);
      };
      verdict(k_matvec_norm_, std::max({relative_error(part(0, n), part(2 * n, n)),
                                        relative_error(part(n, n), part(3 * n, n)),
                                        relative_error(part(6 * n, m), part(6 * n + m, m))}));
    } else {
      k_matvec_norm_.on_cpu = true;  // a GPU so small that 480 rows stream in pairs: never carried there
    }
    for (const Weight& w : ws) weights_.erase(w.data);
    for (Q8Set& set : q8_) set.src = nullptr;
  }

  // The KV ops on a cache of their own: 1 layer, 150 positions (over two chunks of keys), 2 KV heads of 32.
  {
    const int64_t n_ctx = 150, hd = 32, kv_dim = 2 * hd;
    const GgmlType type = opts_.kv_type;
    const bool f16 = type == GgmlType::F16;
    const size_t elem = f16 ? 2 : 4, plane = size_t(n_ctx * kv_dim) * elem;
    KvCache ref(1, n_ctx, 2, hd, type);
    cuda::Buffer cache = rt_.alloc(2 * plane);
    void* kp = cache.get();
    void* vp = cache.as<uint8_t>() + plane;
    for (int64_t p0 = 0; p0 < n_ctx; p0 += 3) {
      const int64_t nt = std::min<int64_t>(3, n_ctx - p0);
      const std::vector<float> k = random_floats(size_t(nt * kv_dim), rng),
                               v = random_floats(size_t(nt * kv_dim), rng);
      const int32_t pos[3] = {int32_t(p0), int32_t(p0 + 1), int32_t(p0 + 2)};
      cpu_->kv_store(ref, 0, k.data(), v.data(), pos, nt);
      rt_.upload(in_a_, 0, k.data(), k.size() * sizeof(float));
      rt_.upload(in_b_, 0, v.data(), v.size() * sizeof(float));
      const int32_t* dpos = dev_positions(pos, nt);
      launch(k_kv_store_.name.c_str(), [&](cudaStream_t s) {
        cuda::kv_store(in_a_.as<float>(), in_b_.as<float>(), int(nt), int(kv_dim), dpos, kp, vp, f16, s);
      });
    }
    std::vector<uint8_t> dev(2 * plane);
    rt_.download(cache, 0, dev.data(), dev.size());
    std::vector<float> want, have;
    cache_rows(ref, dev.data(), {}, want, have);
    verdict(k_kv_store_, relative_error(want, have));

    // RoPE and the KV write in one launch, both modes, rotating 12 of 16 dims (the copied tail too), 4
    // query heads and 2 KV heads, into the same cache at three positions.
    {
      const RopeTable table(n_ctx, 12, 10000.0f, 1.0f);
      const int32_t pos[3] = {149, 5, 77};
      double e = 0.0;
      for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
        std::vector<float> q = random_floats(size_t(3 * 4 * hd), rng),
                           k = random_floats(size_t(3 * kv_dim), rng),
                           v = random_floats(size_t(3 * kv_dim), rng);
        std::vector<float> q_ref = q, k_ref = k, q_got(q.size()), k_got(k.size());
        cpu_->rope(q_ref.data(), 3, 4, hd, 12, pos, table, mode);
        cpu_->rope(k_ref.data(), 3, 2, hd, 12, pos, table, mode);
        cpu_->kv_store(ref, 0, k_ref.data(), v.data(), pos, 3);
        rt_.upload(in_a_, 0, q.data(), q.size() * sizeof(float));
        rt_.upload(in_b_, 0, k.data(), k.size() * sizeof(float));
        rt_.upload(out_, 0, v.data(), v.size() * sizeof(float));
        const cuda::RopeArgs ra = rope_args(table, hd, 12, mode);
        const int32_t* dpos = dev_positions(pos, 3);
        launch(k_rope_kv_store_.name.c_str(), [&](cudaStream_t s) {
          cuda::rope_kv_store(in_a_.as<float>(), in_b_.as<float>(), out_.as<float>(), 3, 4, 2, dpos, ra, kp,
                              vp, f16, cuda::SeqPlanes{}, s);
        });
        rt_.download(in_a_, 0, q_got.data(), q_got.size() * sizeof(float));
        rt_.download(in_b_, 0, k_got.data(), k_got.size() * sizeof(float));
        rt_.download(cache, 0, dev.data(), dev.size());
        want.clear(), have.clear();
        cache_rows(ref, dev.data(), pos, want, have);
        e = std::max(
            {e, relative_error(q_ref, q_got), relative_error(k_ref, k_got), relative_error(want, have)});
      }
      verdict(k_rope_kv_store_, e);
    }

    // The q/k/v products with their RoPE and KV write in one launch (matmul_rope_kv_store, when asked), Q4_0
    // rows of 64 inputs: heads of 32 turning 24 dims (the unturned tail too), as many as the GPU needs for
    // the products' pairs of rows, half as many KV heads, into the cache at position 77.
    const bool fuse_rope = opts_.fuse_qkv_rope && quantized_;  // the fused launch is the quantized path's
    if (const int min_rows = cuda::matvec_rope_min_rows(cuda::kQ4_0); fuse_rope && min_rows > 0) {
      const int64_t n_in = 64, rd = 24, heads = 2 * ((min_rows + 4 * hd - 1) / (4 * hd));
      const int64_t n_out[3] = {heads * hd, heads / 2 * hd, heads / 2 * hd}, kvd = n_out[1];
      const RopeTable table(n_ctx, rd, 10000.0f, 1.0f);
      const int32_t pos[1] = {77};
      std::vector<std::vector<uint8_t>> bytes;
      std::vector<Weight> ws;
      for (int i = 0; i < 3; ++i) {
        bytes.push_back(random_rows(GgmlType::Q4_0, n_in, n_out[i], rng));
        ws.push_back(check_weight(GgmlType::Q4_0, bytes.back().data(), n_in, n_out[i]));
      }
      const std::vector<float> x = random_floats(size_t(n_in), rng);
      std::vector<float> xr(x.size());
      std::vector<std::vector<float>> want(3), have(3);
      cuda::MatvecJob job;
      job.n = 3;
      cuda::Buffer ys = rt_.alloc(size_t(n_out[0] + 2 * kvd) * sizeof(float));
      cuda::Buffer planes = rt_.alloc(size_t(2 * n_ctx * kvd) * elem);
      for (int i = 0; i < 3; ++i) {
        weights_.emplace(ws[size_t(i)].data, make_device_weight(ws[size_t(i)], WeightsMode::Native));
        job.w[i] = weights_.at(ws[size_t(i)].data).matrix();
        job.y[i] = ys.as<float>() + (i == 0 ? 0 : n_out[0] + (i - 1) * kvd);
        rounded_matmul_input(ws[size_t(i)], x.data(), 1, xr.data());
        want[size_t(i)].resize(size_t(n_out[i]));
        have[size_t(i)].resize(size_t(n_out[i]));
        cpu_->matmul(ws[size_t(i)], xr.data(), 1, want[size_t(i)].data());
      }
      cpu_->rope(want[0].data(), 1, heads, hd, rd, pos, table, RopeMode::Norm);
      cpu_->rope(want[1].data(), 1, heads / 2, hd, rd, pos, table, RopeMode::Norm);
      KvCache kv_ref(1, n_ctx, heads / 2, hd, type);
      cpu_->kv_store(kv_ref, 0, want[1].data(), want[2].data(), pos, 1);
      if (cuda::matvec_rope_fits(job)) {
        rt_.upload(in_a_, 0, x.data(), x.size() * sizeof(float));
        const cuda::Q8 q8 = q8_view(q8_of(in_a_.as<float>(), 1, n_in));
        const cuda::RopeArgs ra = rope_args(table, hd, rd, RopeMode::Norm);
        job.rope = {
            ra.table,  dev_positions(pos, 1), planes.get(), planes.as<uint8_t>() + size_t(n_ctx * kvd) * elem,
            ra.n_half, ra.head_dim,           ra.rope_dim,  int(kvd),
            f16};
        launch(k_qkv_rope_.name.c_str(), [&](cudaStream_t s) { cuda::matvec_q8(job, q8, s); });
        double e = 0.0;
        for (int i = 0; i < 3; ++i) {
          rt_.download(ys, size_t(job.y[i] - ys.as<float>()) * sizeof(float), have[size_t(i)].data(),
                       have[size_t(i)].size() * sizeof(float));
          e = std::max(e, relative_error(want[size_t(i)], have[size_t(i)]));
        }
        std::vector<uint8_t> dev_kv(2 * size_t(n_ctx * kvd) * elem);
        rt_.download(planes, 0, dev_kv.data(), dev_kv.size());
        std::vector<float> want_kv, have_kv;
        cache_rows(kv_ref, dev_kv.data(), pos, want_kv, have_kv);
        verdict(k_qkv_rope_, std::max(e, relative_error(want_kv, have_kv)));
      } else {
        k_qkv_rope_.on_cpu = true;  // cannot happen: the rows were sized for it; never fused then
      }
      for (const Weight& w : ws) weights_.erase(w.data);
      for (Q8Set& set : q8_) set.src = nullptr;
    }

    // Attention reads the reference cache's exact contents, so a kv_store fault does not show up here; one
    // token in 1 and 3 splits (the combining kernel), three tokens (as a prompt and as a batch decode step),
    // and 18 (the tiled prompt kernel).
    for (int kind = 0; kind < 2; ++kind) rt_.upload(cache, size_t(kind) * plane, ref.plane(0, kind), plane);
    AttnParams p;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = hd;
    p.scale = 0.25f;
    double err = 0.0;
    for (int64_t window : {int64_t(0), int64_t(70)}) {
      p.window = window;
      const int32_t pos[3] = {20, 149, 0};
      const std::vector<float> q = random_floats(size_t(3 * p.n_head * hd), rng);
      std::vector<float> want_o(q.size()), have_o(q.size());
      cpu_->attention(q.data(), ref, 0, pos, 3, p, want_o.data());
      rt_.upload(in_a_, 0, q.data(), q.size() * sizeof(float));
      record_attention(kp, vp, kv_dim, 3, p, in_a_.as<float>(), dev_positions(pos, 3), out_.as<float>(), 1);
      rt_.download(out_, 0, have_o.data(), have_o.size() * sizeof(float));
      err = std::max(err, relative_error(want_o, have_o));
      // The three tokens as a batch decode step's (each its own decode query, here all in one cache), in 3
      // splits.
      const cuda::SeqPlanes one_cache{};
      record_attention(kp, vp, kv_dim, 3, p, in_a_.as<float>(), dev_positions(pos, 3), out_.as<float>(), 3,
                       &one_cache);
      rt_.download(out_, 0, have_o.data(), have_o.size() * sizeof(float));
      err = std::max(err, relative_error(want_o, have_o));
      for (int splits : {1, 3}) {
        // The second token alone (position 149: every split has keys).
        const std::vector<float> q1(q.begin() + p.n_head * hd, q.begin() + 2 * p.n_head * hd);
        const std::vector<float> want1(want_o.begin() + p.n_head * hd, want_o.begin() + 2 * p.n_head * hd);
        std::vector<float> have1(want1.size());
        rt_.upload(in_a_, 0, q1.data(), q1.size() * sizeof(float));
        record_attention(kp, vp, kv_dim, 1, p, in_a_.as<float>(), dev_positions(pos + 1, 1), out_.as<float>(),
                         splits);
        rt_.download(out_, 0, have1.data(), have1.size() * sizeof(float));
        err = std::max(err, relative_error(want1, have1));
      }
    }
    {
      p.window = 40;
      std::vector<int32_t> pos(18);
      for (int i = 0; i < 18; ++i) pos[size_t(i)] = 100 + 3 * i;  // the last chunk of keys a partial one
      pos[17] = 149;
      const std::vector<float> q = random_floats(size_t(18 * p.n_head * hd), rng);
      std::vector<float> want_o(q.size()), have_o(q.size());
      cpu_->attention(q.data(), ref, 0, pos.data(), 18, p, want_o.data());
      rt_.upload(in_a_, 0, q.data(), q.size() * sizeof(float));
      record_attention(kp, vp, kv_dim, 18, p, in_a_.as<float>(), dev_positions(pos.data(), 18),
                       out_.as<float>(), 1);
      rt_.download(out_, 0, have_o.data(), have_o.size() * sizeof(float));
      err = std::max(err, relative_error(want_o, have_o));
    }
    verdict(k_attention_, err);
  }
  rt_.finish();
  for (Q8Set& set : q8_) set.src = nullptr;
}

}  // namespace tilellm
