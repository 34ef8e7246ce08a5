// The self-check: before the backend is used, every pipeline runs a small random case and its result is
// compared with the host backend's (the float path). A pipeline that disagrees is marked `on_cpu`: its op
// then runs on the host backend for the rest of the backend's life, and a warning names it. Drivers that
// miscompile a shader (a known hazard on mobile GPUs) thus cost speed, not correctness.
//
// Tolerance: 1e-3 of the largest reference magnitude of the case (correct shaders agree to ~1e-6 of it; a
// broken one is off by a sizeable fraction, and a NaN always fails); 4e-3 for the products on cooperative
// matrices, whose inputs are rounded to fp16 (at most 3.4e-4 of the largest value on these cases' sizes
// with uniform random inputs, computed in float64).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "backends/check_cases.h"
#include "backends/q8_round.h"
#include "backends/vulkan/vulkan_backend.h"
#include "base/error.h"
#include "format/asym_quant.h"
#include "format/quants.h"

namespace tilellm {
namespace {

constexpr double kTolerance = 1e-3, kHalfTolerance = 4e-3;

}  // namespace

namespace {

// The warning for a pipeline that failed its self-check (now, or in the cached verdict).
void warn_failed(const vulkan::Pipeline& p, const vulkan::Capabilities& c, double err, bool cached) {
  const bool q8 = p.name.rfind("matvec_q8_", 0) == 0;
  const bool matvec = p.name.rfind("matvec_", 0) == 0;
  const bool glu = p.name.rfind("matmul_glu_", 0) == 0;
  std::fprintf(
      stderr,
      "warning: Vulkan pipeline %s failed its self-check%s on %s (profile %s): error %.3g of the largest "
      "value; %s from now on\n",
      p.name.c_str(), cached ? " (cached verdict)" : "", c.name.c_str(), c.profile.c_str(), err,
      glu                                       ? "the gate and up products and the gated unit run apart"
      : q8                                      ? "one-token products of its format take the float matvec"
      : matvec                                  ? "one-token products use the matmul pipeline"
      : p.name.rfind("matmul_coopmat_", 0) == 0 ? "prompts use the float matmul pipeline"
      : p.name == "add_rmsnorm"                 ? "the separate add and rmsnorm run instead"
      : p.name.ends_with("_q8")                 ? "the products round its output themselves"
                                                : "its op runs on the CPU");
}

}  // namespace

void VulkanBackend::verdict(vulkan::Pipeline& p, double err, bool half) {
  if (err <= (half ? kHalfTolerance : kTolerance)) return;
  p.on_cpu = true;
  failed_.push_back({p.name, err});
  warn_failed(p, caps(), err, false);
}

bool VulkanBackend::apply_cached_verdict(const std::vector<CacheEntry::Failed>& failed) {
  std::vector<vulkan::Pipeline*> marked;
  for (const CacheEntry::Failed& f : failed) {
    vulkan::Pipeline* hit = nullptr;
    for (vulkan::Pipeline* p : all_pipelines()) {
      if (p->pipeline && p->name == f.kernel) hit = p;
    }
    if (!hit) return false;
    marked.push_back(hit);
  }
  for (size_t i = 0; i < marked.size(); ++i) {
    marked[i]->on_cpu = true;
    warn_failed(*marked[i], caps(), failed[i].error, true);
  }
  failed_ = failed;
  return true;
}

// The products of uploaded weight w against the host's on ref_w (w's exact values): n_tok tokens (the
// matmul), then one (the float matvec, and the integer one where the weight has it, on the input it rounds).
void VulkanBackend::check_products(const Weight& w, const Weight& ref_w, const std::vector<float>& x,
                                   int64_t n_tok) {
  const DeviceWeight& dw = find_weight(w, "self-check");
  std::vector<float> ref(size_t(n_tok * w.n_out)), got(ref.size());
  cpu_->matmul(ref_w, x.data(), n_tok, ref.data());
  matmul(w, x.data(), n_tok, got.data());
  verdict(product(Product::Matmul, dw), relative_error(ref, got));
  ref.resize(size_t(w.n_out));
  got.resize(ref.size());
  cpu_->matmul(ref_w, x.data(), 1, ref.data());
  q8_paused_ = true;
  matmul(w, x.data(), 1, got.data());
  q8_paused_ = false;
  verdict(product(Product::Matvec, dw), relative_error(ref, got));
  if (!uses_q8(dw, 1)) return;
  std::vector<float> xr(size_t(w.n_in));
  rounded_matmul_input(w, x.data(), 1, xr.data());
  cpu_->matmul(ref_w, xr.data(), 1, ref.data());
  matmul(w, x.data(), 1, got.data());
  verdict(product(Product::MatvecQ8, dw), relative_error(ref, got));
}

// The ops that round their output for the integer products (rmsnorm.comp's TL_Q8, glu_q8.comp): rows of 3
// blocks, of L / 4 + 1 (the norm's row held in registers, a partial last round) and of L + 3 (read back from
// memory: too long to hold), L the norm's invocations; their output against the host's, and the rounding
// they leave in q8x_ against the host's rounding of that output (rounding_error; attention's TL_Q8 is checked
// with the KV ops). One verdict a pipeline, on its worst row.
void VulkanBackend::check_fused_rounding(std::mt19937& rng) {
  for (vulkan::Pipeline* p : {&p_rmsnorm_q8_, &p_add_rmsnorm_q8_, &p_glu_silu_q8_, &p_glu_gelu_q8_}) {
    double worst = 0.0;
    for (int64_t blocks : {int64_t(3), int64_t(red_local_) / 4 + 1, fused_check_blocks()}) {
      const int64_t n = 32 * blocks;
      const size_t un = size_t(n);
      const std::vector<float> x = random_floats(un, rng), w = random_floats(un, rng),
                               r = random_floats(un, rng);
      std::vector<float> ref(un), got(un), acc = x;
      if (p == &p_rmsnorm_q8_) {
        cpu_->rmsnorm(x.data(), w.data(), ref.data(), 1, n, 1e-5f);
        rmsnorm(x.data(), w.data(), got.data(), 1, n, 1e-5f);
      } else if (p == &p_add_rmsnorm_q8_) {
        std::vector<float> acc_ref = x;
        cpu_->add(acc_ref.data(), r.data(), n);
        cpu_->rmsnorm(acc_ref.data(), w.data(), ref.data(), 1, n, 1e-5f);
        add_rmsnorm(acc.data(), r.data(), w.data(), got.data(), 1, n, 1e-5f);
        worst = std::max(worst, relative_error(acc_ref, acc));
      } else {
        const FfnAct act = p == &p_glu_silu_q8_ ? FfnAct::SiLU : FfnAct::GeluTanh;
        cpu_->glu(x.data(), r.data(), ref.data(), n, act);
        glu(x.data(), r.data(), got.data(), n, act);
      }
      worst = std::max({worst, relative_error(ref, got), rounding_error(got)});
    }
    verdict(*p, worst);
  }
}

void VulkanBackend::check_fused_glu(std::mt19937& rng) {
  // 64 rows: two blocks of 32 for the rounding, each completed by 32 / glu_rows_ groups.
  const int64_t n_out = 64;
  auto check = [&](const Weight& g, const Weight& g_ref, const Weight& u, const Weight& u_ref) {
    const DeviceWeight& dg = find_weight(g, "self-check");
    for (FfnAct act : {FfnAct::SiLU, FfnAct::GeluTanh}) {
      std::vector<float> x = random_floats(size_t(g.n_in), rng), xr(x.size());
      const size_t un = size_t(n_out);
      std::vector<float> gr(un), ur(un), ref(un), got(un), up(un);
      vulkan::Pipeline* p = fused_glu(dg, find_weight(u, "self-check"), act, x.data(), got.data());
      if (!p) continue;
      for (float& v : x) v *= 4.0f;  // both tails of the activations
      rounded_matmul_input(g, x.data(), 1, xr.data());
      cpu_->matmul(g_ref, xr.data(), 1, gr.data());
      cpu_->matmul(u_ref, xr.data(), 1, ur.data());
      cpu_->glu(gr.data(), ur.data(), ref.data(), n_out, act);
      matmul_glu(g, u, x.data(), 1, act, got.data(), up.data());
      verdict(*p, std::max(relative_error(ref, got), rounding_error(got)));
    }
  };
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K}) {
    const int64_t n_in = type_traits(t).block_size == 256 ? 256 : 96;
    std::vector<uint8_t> bytes = random_rows(t, n_in, 2 * n_out, rng);
    // Gate rows first, then up's.
    const Weight g = check_weight(t, bytes.data(), n_in, n_out);
    Weight u = g;
    u.data += n_out * g.row_bytes;
    weights_.emplace(g.data, make_device_weight(g, WeightsMode::Native, false));
    weights_.emplace(u.data, make_device_weight(u, WeightsMode::Native, false));
    check(g, g, u, u);
    weights_.erase(g.data);
    weights_.erase(u.data);
  }
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0}) {
    // Gate rows first, then up's.
    const ConvertedRows c(mode, 96, 2 * n_out, rng);
    Weight g = c.w, ge = c.exact;
    g.n_out = ge.n_out = n_out;
    Weight u = g, ue = ge;
    u.data += n_out * g.row_bytes;
    ue.data += n_out * g.row_bytes;
    weights_.emplace(g.data, make_device_weight(g, mode, false));
    weights_.emplace(u.data, make_device_weight(u, mode, false));
    // The host backend holds the float rows as F32: it multiplies by the conversion's exact values.
    check(g, ge, u, ue);
    weights_.erase(g.data);
    weights_.erase(u.data);
  }
}

double VulkanBackend::rounding_error(const std::vector<float>& out) {
  const int64_t n = int64_t(out.size()), nb = n / 32;
  const size_t un = out.size();
  // q8x_: [n / 4] code words, [nb] d, [nb] (s, s) (shaders/q8.glsl).
  std::vector<uint32_t> words(size_t(n / 4 + 3 * nb));
  rt_.download(q8x_, 0, words.data(), words.size() * 4);
  std::vector<float> want(un), seen(un), s_want(un / 16), s_seen(un / 16);
  round_activations_q8(out.data(), n, want.data());
  float host_d = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    float d;
    std::memcpy(&d, &words[size_t(n / 4 + j / 32)], 4);
    const int code = int(int8_t(uint8_t(words[size_t(j / 4)] >> (8 * (j % 4)))));
    seen[size_t(j)] = d * float(code);
    s_want[size_t(j / 16)] += float(code);
    if (j % 16 == 15) s_want[size_t(j / 16)] *= d;
    if (j % 32 == 0) {
      float amax = 0.0f;
      for (int64_t k = j; k < j + 32; ++k) amax = std::fmax(amax, std::fabs(out[size_t(k)]));
      host_d = amax / 127.0f;
    }
    // A code one step off the host's where the host's x * (1 / d) lies within 1e-4 of a rounding midpoint
    // is a near-tie, not a fault: q8.glsl forms d and 1 / d exactly as IEEE division does from additions
    // and multiplications (which Vulkan rounds correctly), but a driver that rounds them otherwise would
    // move such a value to the other side, and the products would be no less right for it.
    const float scaled = std::fabs(out[size_t(j)] * (host_d != 0.0f ? 1.0f / host_d : 0.0f));
    if (std::fabs(scaled - std::trunc(scaled) - 0.5f) < 1e-4f &&
        std::fabs(want[size_t(j)] - seen[size_t(j)]) <= 1.5f * host_d)
      want[size_t(j)] = seen[size_t(j)];
  }
  std::memcpy(s_seen.data(), &words[size_t(n / 4 + nb)], s_seen.size() * 4);
  return std::max(relative_error(want, seen), relative_error(s_want, s_seen));
}

// The cooperative-matrix GEMM of uploaded weight w (kCoopmatCheckRows rows) against the host's on ref_w:
// kCoopmatCheckTokens tokens of x, so that whole and partial tiles both ways are stored.
void VulkanBackend::check_coopmat(const Weight& w, const Weight& ref_w, const std::vector<float>& x) {
  const DeviceWeight& dw = find_weight(w, "self-check");
  std::vector<float> ref(size_t(kCoopmatCheckTokens * w.n_out)), got(ref.size());
  cpu_->matmul(ref_w, x.data(), kCoopmatCheckTokens, ref.data());
  matmul(w, x.data(), kCoopmatCheckTokens, got.data());
  verdict(product(Product::Coopmat, dw), relative_error(ref, got), true);
}

// Every native device format through a GGUF type that keeps it, then the converted formats: the products
// of small random matrices (in images when `images`: the _image pipelines) against the host's.
void VulkanBackend::check_formats(std::mt19937& rng, bool images) {
  // The check's matrices go into images whatever side a test lowered the limit to (image_max).
  const uint32_t image_max = opts_.image_max;
  opts_.image_max = 0;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0,
                     GgmlType::Q4_K, GgmlType::Q5_K}) {
    const int64_t bs = type_traits(t).block_size;
    // Rows over two row groups with a partial one; float rows end in a partial block; 5 tokens: a partial
    // token tile.
    const int64_t n_in = bs == 1 ? 63 : bs == 256 ? 256 : 96, n_out = 11, n_tok = 5;
    // Built for every format or none.
    const bool cm = (images ? p_matmul_cm_img_[0] : p_matmul_cm_[0]).pipeline != VK_NULL_HANDLE;
    // The cooperative-matrix GEMM's rows follow the decode's 11 in the same array.
    std::vector<uint8_t> bytes = random_rows(t, n_in, n_out + (cm ? kCoopmatCheckRows : 0), rng);
    const Weight w = check_weight(t, bytes.data(), n_in, n_out);
    weights_.emplace(w.data, make_device_weight(w, WeightsMode::Native, images));
    const DeviceFormat f = weights_.at(w.data).fmt;
    if (!images) {  // the lookup reads buffers only
      const int32_t ids[3] = {3, 0, 6};
      std::vector<float> ref(size_t(3 * n_in)), got(ref.size());
      cpu_->embed(w, ids, 3, 0.5f, ref.data());
      embed(w, ids, 3, 0.5f, got.data());
      verdict(p_embed_[int(f)], relative_error(ref, got));
    }
    const std::vector<float> x = random_floats(size_t(kCoopmatCheckTokens * n_in), rng);
    // 5 tokens and 11 rows: partial tiles of the 4 x 4 and the 8-row decode groups.
    check_products(w, w, x, n_tok);
    weights_.erase(w.data);
    if (!cm) continue;
    Weight wide = w;
    wide.name += " (cooperative matrices)";
    wide.data = bytes.data() + n_out * w.row_bytes;
    wide.n_out = kCoopmatCheckRows;
    weights_.emplace(wide.data, make_device_weight(wide, WeightsMode::Native, images));
    check_coopmat(wide, wide, x);
    weights_.erase(wide.data);
  }
  for (WeightsMode mode : {WeightsMode::Int4B64, WeightsMode::Int8B0}) {
    const int64_t n_in = 96, n_out = 5, n_tok = 5;
    const bool cm = (images ? p_matmul_cm_img_[0] : p_matmul_cm_[0]).pipeline != VK_NULL_HANDLE;
    const int64_t rows = n_out + (cm ? kCoopmatCheckRows : 0);  // the GEMM's rows after the decode's
    const ConvertedRows c(mode, n_in, rows, rng);
    Weight w = c.w, we = c.exact;
    w.n_out = we.n_out = n_out;
    weights_.emplace(w.data, make_device_weight(w, mode, images));
    const std::vector<float> x = random_floats(size_t(kCoopmatCheckTokens * n_in), rng);
    // The host backend holds the float rows as F32: it multiplies by the conversion's exact values.
    check_products(w, we, x, n_tok);
    weights_.erase(w.data);
    if (!cm) continue;
    Weight wide = w, wide_exact = we;
    wide.name += " (cooperative matrices)";
    wide.data += n_out * w.row_bytes;
    wide_exact.data += n_out * w.row_bytes;
    wide.n_out = wide_exact.n_out = kCoopmatCheckRows;
    weights_.emplace(wide.data, make_device_weight(wide, mode, images));
    check_coopmat(wide, wide_exact, x);
    weights_.erase(wide.data);
  }
  opts_.image_max = image_max;
}

void VulkanBackend::run_self_check() {
  std::mt19937 rng(0x5e1fc4ecu);
  check_formats(rng, false);
  if (p_matmul_img_[0].pipeline) check_formats(rng, true);  // --gpu-memory image
  // rmsnorm's rows of 300: more elements than invocations.
  check_elementwise(*cpu_, *this, 300, false, rng, [&](ElementwiseOp op, double err) {
    switch (op) {
      case ElementwiseOp::Rmsnorm:
        return verdict(p_rmsnorm_, err);
      case ElementwiseOp::AddRmsnorm:
        return verdict(p_add_rmsnorm_, err);
      case ElementwiseOp::Rope:
        return verdict(p_rope_, err);
      case ElementwiseOp::GluSilu:
        return verdict(p_glu_silu_, err);
      case ElementwiseOp::GluGelu:
        return verdict(p_glu_gelu_, err);
      case ElementwiseOp::Add:
        return verdict(p_add_, err);
      case ElementwiseOp::AddRows:
        return;  // add_rows runs the add shader
    }
  });
  if (p_rmsnorm_q8_.pipeline) check_fused_rounding(rng);
  if (q8x_.get()) check_fused_glu(rng);
  // The KV ops on a cache of their own: 1 layer, positions over two chunks of the one-token attention (and
  // three of the prompts'), 2 KV heads of 16.
  {
    const int64_t n_ctx = std::max<int64_t>(150, attn_one_local_ + 44), hd = 16, kv_dim = 2 * hd;
    const GgmlType type = opts_.kv_type;
    const size_t elem = type == GgmlType::F16 ? 2 : 4, plane = size_t(n_ctx * kv_dim) * elem;
    KvCache ref(1, n_ctx, 2, hd, type);
    // A buffer, or under --kv-memory image an image of the session's kind (the _kvimage pipelines).
    vulkan::Buffer cache_buf;
    vulkan::Image cache_img;
    KvTarget cache;
    if (opts_.kv_memory != KvMemory::Image) {
      cache_buf = rt_.alloc(2 * plane);
      cache.buf = &cache_buf;
    } else {
      cache_img = rt_.alloc_image(uint32_t(kv_dim / 4), uint32_t(2 * n_ctx), vulkan::ImageUse::KvCache);
      cache.img = &cache_img;
    }
    for (int64_t p0 = 0; p0 < n_ctx; p0 += 3) {
      const int64_t nt = std::min<int64_t>(3, n_ctx - p0);
      const std::vector<float> k = random_floats(size_t(nt * kv_dim), rng),
                               v = random_floats(size_t(nt * kv_dim), rng);
      const int32_t pos[3] = {int32_t(p0), int32_t(p0 + 1), int32_t(p0 + 2)};
      cpu_->kv_store(ref, 0, k.data(), v.data(), pos, nt);
      rt_.upload(in_a_, 0, k.data(), k.size() * sizeof(float));
      rt_.upload(in_b_, 0, v.data(), v.size() * sizeof(float));
      record_kv_store(cache, 0, n_ctx, kv_dim, nt, in_a_, in_b_, dev_positions(pos, nt));
    }
    std::vector<uint8_t> dev(2 * plane);
    kv_download(cache, kv_dim, 0, dev.data(), dev.size());
    std::vector<float> want, have;
    cache_rows(ref, dev.data(), {}, want, have);
    verdict(p_kv_store_, relative_error(want, have));

    // RoPE and the KV write in one dispatch, both modes, rotating 12 of 16 dims (6 pairs: the Neox quads and
    // the copied tail; 8 on an image, whose Neox halves are whole texels as the host runs it), 4 query heads
    // and 2 KV heads, into the same cache at three positions.
    {
      const int64_t rope_dim = cache.img ? 8 : 12;
      const RopeTable table(n_ctx, rope_dim, 10000.0f, 1.0f);
      RopeShape rs;
      rs.n_head = 4, rs.n_head_kv = 2, rs.head_dim = hd, rs.rope_dim = rope_dim, rs.table = &table;
      const int32_t pos[3] = {149, 5, 77};
      double e = 0.0;
      for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
        rs.mode = mode;
        std::vector<float> q = random_floats(size_t(3 * rs.n_head * hd), rng),
                           k = random_floats(size_t(3 * kv_dim), rng),
                           v = random_floats(size_t(3 * kv_dim), rng);
        std::vector<float> q_ref = q, k_ref = k, q_got(q.size()), k_got(k.size());
        cpu_->rope(q_ref.data(), 3, rs.n_head, hd, rope_dim, pos, table, mode);
        cpu_->rope(k_ref.data(), 3, rs.n_head_kv, hd, rope_dim, pos, table, mode);
        cpu_->kv_store(ref, 0, k_ref.data(), v.data(), pos, 3);
        rt_.upload(in_a_, 0, q.data(), q.size() * sizeof(float));
        rt_.upload(in_b_, 0, k.data(), k.size() * sizeof(float));
        rt_.upload(out_, 0, v.data(), v.size() * sizeof(float));
        record_rope_kv_store(cache, 0, n_ctx, 3, rs, in_a_, in_b_, out_, dev_rope_table(table),
                             dev_positions(pos, 3));
        rt_.download(in_a_, 0, q_got.data(), q_got.size() * sizeof(float));
        rt_.download(in_b_, 0, k_got.data(), k_got.size() * sizeof(float));
        kv_download(cache, kv_dim, 0, dev.data(), dev.size());
        want.clear(), have.clear();
        cache_rows(ref, dev.data(), pos, want, have);
        e = std::max(
            {e, relative_error(q_ref, q_got), relative_error(k_ref, k_got), relative_error(want, have)});
      }
      verdict(p_rope_kv_store_, e);
    }

    // Attention reads the reference cache's exact contents, so a kv_store fault does not show up here.
    for (int kind = 0; kind < 2; ++kind)
      kv_upload(cache, kv_dim, size_t(kind) * plane, ref.plane(0, kind), plane);
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
      record_attention(cache, 0, n_ctx, kv_dim, 3, p, in_a_, dev_positions(pos, 3), out_);
      rt_.download(out_, 0, have_o.data(), have_o.size() * sizeof(float));
      err = std::max(err, relative_error(want_o, have_o));
    }
    verdict(p_attention_, err);
    // One token: 2 query heads of 32 (whole blocks) over the cache's rows read as one KV head of 32, at the
    // last position (two chunks); its output in floats, then rounded.
    AttnParams p1 = p;
    p1.n_head = 2, p1.n_head_kv = 1, p1.head_dim = kv_dim, p1.window = 0;
    const int32_t pos1[1] = {int32_t(n_ctx - 1)};
    const std::vector<float> q1 = random_floats(size_t(p1.n_head * p1.head_dim), rng);
    std::vector<float> want1(q1.size()), have1(q1.size());
    cpu_->attention(q1.data(), ref, 0, pos1, 1, p1, want1.data());
    for (const bool rounds : {false, true}) {
      if (rounds && !p_attention_q8_.pipeline) continue;
      rt_.upload(in_a_, 0, q1.data(), q1.size() * sizeof(float));
      record_attention(cache, 0, n_ctx, kv_dim, 1, p1, in_a_, dev_positions(pos1, 1), out_, rounds);
      rt_.download(out_, 0, have1.data(), have1.size() * sizeof(float));
      const double e = relative_error(want1, have1);
      if (rounds)
        verdict(p_attention_q8_, std::max(e, rounding_error(have1)));
      else
        verdict(p_attention_one_, e);
    }
  }
  rt_.finish();
}

}  // namespace tilellm
