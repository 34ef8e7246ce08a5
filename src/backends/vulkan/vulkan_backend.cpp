// VulkanBackend construction: pipelines built once, weights uploaded once, scratch and the device FB-KV
// allocated once; the KV copies and the shared checks every op file uses. The mirrored activations are in
// resident.cpp, decode capture and replay in replay.cpp.
#include "backends/vulkan/vulkan_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_set>

#include "backends/image_plan.h"
#include "backends/registry.h"
#include "backends/vulkan/shaders.h"
#include "base/error.h"

namespace tilellm {
namespace {

size_t floats(int64_t n) {
  return size_t(std::max<int64_t>(n, 1)) * sizeof(float);
}

// The largest power of two <= limit (at least 1).
uint32_t pow2_at_most(uint64_t limit) {
  uint32_t v = 1;
  while (uint64_t(v) * 2 <= limit && v < (1u << 30)) v *= 2;
  return v;
}

// The weight readers' _image variants take the matrix as a sampled image at binding 0 (shaders/weights.glsl).
constexpr vulkan::ImageBinding kWeightImage{0, false};

// Push-constant sizes of the shaders (their `pc` blocks).
constexpr uint32_t kMatmulPush = 28, kEmbedPush = 20, kNormPush = 8, kRopePush = 16, kKvPush = 12,
                   kRopeKvPush = 28, kAttnPush = 36, kElemPush = 4, kGluPush = 16;

}  // namespace

VulkanBackend::VulkanBackend(const VulkanBackendOptions& o)
    : opts_(o), rt_(o.device, o.profile, o.profiling) {
  if (o.max_tokens <= 0 || o.max_in_elems <= 0 || o.max_out_elems <= 0 || o.max_width <= 0) {
    fail("internal: Vulkan backend sized for {} tokens, {}/{} elements, width {}", o.max_tokens,
         o.max_in_elems, o.max_out_elems, o.max_width);
  }
  constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
  if (o.max_in_elems > kMaxIndex || o.max_out_elems > kMaxIndex || o.kv_dim > kMaxIndex)
    fail("Vulkan backend: activations of {} elements exceed the shaders' 32-bit indexing", o.max_out_elems);
  const bool kv_f16 = o.kv_type == GgmlType::F16;
  if (!kv_f16 && o.kv_type != GgmlType::F32)
    fail("Vulkan backend: KV cache type {} is not f16 or f32", type_name(o.kv_type));
  if (o.kv_layers > 0 && kv_f16 && o.kv_dim % 2 != 0)
    fail("Vulkan backend: an f16 KV cache needs an even row width (kv_dim {}); use --cache-type f32",
         o.kv_dim);
  const bool kv_image = o.kv_memory == KvMemory::Image;
  if (kv_image) {
    if (!kv_f16) {
      fail(
          "Vulkan backend: --kv-memory image holds the KV cache as RGBA16F (halves): use --cache-type f16 "
          "(not {})",
          type_name(o.kv_type));
    }
    if (!rt_.storage_kv_images())
      fail("Vulkan backend: device {} has no RGBA16F storage images; use --kv-memory buffer", caps().name);
    if (o.kv_layers > 0 && o.kv_dim % 4 != 0) {
      fail(
          "Vulkan backend: --kv-memory image needs KV rows of whole texels of four halves (kv_dim {}); use "
          "--kv-memory buffer",
          o.kv_dim);
    }
  }

  // The pipeline cache on disk: the driver's data seeds the pipelines made below; the verdict, if any,
  // replaces the self-check at the end.
  std::unique_ptr<ProgramCache> cache;
  CacheEntry cached;        // what the cache held (binaries[0]: the pipeline cache data)
  bool have_entry = false;  // a valid entry was loaded
  if (o.cache.mode != ProgramCacheOptions::Mode::Off) {
    cache = std::make_unique<ProgramCache>(o.cache, pipeline_cache_key(), "vulkan", "Vulkan pipeline cache");
    if (std::optional<CacheEntry> e = cache->load(); e && e->binaries.size() == 1) {
      cached = std::move(*e);
      have_entry = true;
    }
  }
  pipelines_from_cache_ = rt_.use_pipeline_cache(have_entry ? cached.binaries[0] : std::vector<uint8_t>{});

  // Variants from the capabilities: subgroup reductions where the device has them; local sizes within the
  // invocation limit and the shared memory each reduction needs (floats per invocation: matmul 16,
  // attention 10, rmsnorm 1). Every Vulkan device allows 128 invocations and 16 KiB of shared memory.
  const vulkan::Capabilities& c = caps();
  subgroups_ = o.subgroups && c.subgroup_arithmetic;
  const uint64_t inv = c.max_invocations, shared = c.shared_memory_bytes;
  red_local_ = pow2_at_most(std::min<uint64_t>({512, inv, shared / 4}));
  mm_local_ = pow2_at_most(std::min<uint64_t>({64, inv, shared / (16 * 4)}));
  mv_local_ = pow2_at_most(std::min<uint64_t>({128, inv, shared / (16 * 4)}));
  // One token's attention: 256 invocations, so that a chunk scores 256 keys at once and the weighted sum of
  // V reads 16 rows of 128 dims at once (attention.comp); a head is one work-group, and decode has few heads.
  // Prompts keep 64 (a work-group per head and token: they have groups enough, and were slower on 256).
  attn_one_local_ = pow2_at_most(std::min<uint64_t>({256, inv, shared / (10 * 4)}));
  // The block formats' decode matvec: 4 rows a group, a block in 2 parts (neighbouring invocations read
  // neighbouring code words; 2 a block was the fastest of 1, 2 and 4 on the H200, docs/PERF.md), 64
  // invocations (as fast as 128 there; lavapipe, which runs every invocation on the CPU, wastes fewer on
  // 576-wide rows), 4 parts in flight each; an explicit shape is clamped to what the shader and the device
  // take (rows <= 8, parts a power of two: 1 ... 4 for the nibble formats and 2 ... 8 for the byte ones,
  // unroll <= 4).
  mv_rows_ = std::clamp<uint32_t>(o.matvec_rows ? o.matvec_rows : 4, 1, 8);
  mv_groups_ = o.matvec_groups;
  // The integer decode matvec: 2 rows a group, 64 invocations (an invocation a block of 32 inputs): the
  // fastest of 1 to 8 rows and 64 to 256 invocations for the 7B model on the H200 (docs/PERF.md);
  // --vk-matvec's ROWS and LOCAL when given.
  const bool q8 = o.activations == ActivationMode::Quantized && c.integer_dot;
  q8_rows_ = std::clamp<uint32_t>(o.matvec_rows ? o.matvec_rows : 2, 1, 8);
  // The fused gated unit's rows: a power of two, so that a group's rows lie in one block of 32.
  glu_rows_ = pow2_at_most(std::min<uint32_t>(q8_rows_, 4));
  const uint32_t q8_local =
      pow2_at_most(std::min<uint64_t>({o.matvec_local ? o.matvec_local : 64, inv, shared / (8 * 4)}));
  const uint32_t mv_parts = pow2_at_most(std::clamp<uint32_t>(o.matvec_parts ? o.matvec_parts : 2, 1, 8));
  const uint32_t mv_unroll = std::clamp<uint32_t>(o.matvec_unroll ? o.matvec_unroll : 4, 1, 4);
  const uint32_t mvb_local =
      pow2_at_most(std::min<uint64_t>({o.matvec_local ? o.matvec_local : 64, inv, shared / (8 * 4)}));
  // Prompts on cooperative matrices: eight subgroups a work-group, 44 KiB of shared tiles
  // (shaders/matmul_coopmat.comp).
  // The test hook's emulation (coopmat_test_spirv) takes the same place on any device with subgroups.
  const bool cm_hook = !o.coopmat_test_spirv.empty() && c.subgroup_basic && 8 * c.subgroup_size <= inv;
  const bool coopmat = cm_hook || (o.coopmat && c.coopmat_f16 && c.subgroup_basic && c.subgroup_size >= 1 &&
                                   8 * c.subgroup_size <= inv && shared >= 44 * 1024);
  const bool sg = subgroups_;
  const bool images = o.memory == GpuMemory::Image && rt_.sampled_images();
  if (o.memory == GpuMemory::Image && !images) {
    std::fprintf(stderr,
                 "note: Vulkan --gpu-memory image: device %s cannot sample RGBA32UI images in shaders; every "
                 "weight stays a buffer\n",
                 c.name.c_str());
  }
  for (int f = 0; f < kDeviceFormats; ++f) {
    const uint32_t fu = uint32_t(f);
    const std::string fname(device_format_name(DeviceFormat(f)));
    if (images) {
      // The same shapes as the buffer pipelines below, from the shaders' _image variants.
      p_matmul_img_[f] =
          rt_.pipeline("matmul_image", sg, 3, kMatmulPush, mm_local_, {fu, 4, kPrefillRows}, kWeightImage);
      p_matmul_img_[f].name = "matmul_image_" + fname;
      if (device_format_is_block(DeviceFormat(f))) {
        const bool nibbles = device_format_nibbles(DeviceFormat(f));
        p_matvec_img_[f] =
            rt_.pipeline("matvec_image", sg, 3, kMatmulPush, mvb_local,
                         {fu, mv_rows_, nibbles ? std::min(mv_parts, 4u) : std::max(mv_parts, 2u), mv_unroll},
                         kWeightImage);
      } else {
        p_matvec_img_[f] =
            rt_.pipeline("matmul_image", sg, 3, kMatmulPush, mv_local_, {fu, 1, kDecodeRows}, kWeightImage);
      }
      p_matvec_img_[f].name = "matvec_image_" + fname;
      if (q8 && device_format_is_block(DeviceFormat(f))) {
        p_matvec_q8_img_[f] =
            rt_.pipeline("matvec_q8_image", sg, 3, kMatmulPush, q8_local, {fu, q8_rows_}, kWeightImage);
        p_matvec_q8_img_[f].name = "matvec_q8_image_" + fname;
      }
      // Not the test hook's emulation: it is built for buffers only.
      if (coopmat && !cm_hook) {
        p_matmul_cm_img_[f] = rt_.pipeline("matmul_coopmat_image", false, 3, kMatmulPush, 8 * c.subgroup_size,
                                           {fu}, kWeightImage);
        p_matmul_cm_img_[f].name = "matmul_coopmat_image_" + fname;
      }
    }
    p_matmul_[f] = rt_.pipeline("matmul", sg, 3, kMatmulPush, mm_local_, {fu, 4, kPrefillRows});
    p_matmul_[f].name = fmt::format("matmul_{}", device_format_name(DeviceFormat(f)));
    if (coopmat) {
      p_matmul_cm_[f] =
          cm_hook ? rt_.pipeline_from("matmul_coopmat (test hook)", o.coopmat_test_spirv, 3, kMatmulPush,
                                      8 * c.subgroup_size, {fu})
                  : rt_.pipeline("matmul_coopmat", false, 3, kMatmulPush, 8 * c.subgroup_size, {fu});
      p_matmul_cm_[f].name = fmt::format("matmul_coopmat_{}", device_format_name(DeviceFormat(f)));
    }
    if (device_format_is_block(DeviceFormat(f))) {
      const bool nibbles = device_format_nibbles(DeviceFormat(f));
      p_matvec_[f] =
          rt_.pipeline("matvec", sg, 3, kMatmulPush, mvb_local,
                       {fu, mv_rows_, nibbles ? std::min(mv_parts, 4u) : std::max(mv_parts, 2u), mv_unroll});
    } else {
      p_matvec_[f] = rt_.pipeline("matmul", sg, 3, kMatmulPush, mv_local_, {fu, 1, kDecodeRows});
    }
    p_matvec_[f].name = fmt::format("matvec_{}", device_format_name(DeviceFormat(f)));
    if (q8 && device_format_is_block(DeviceFormat(f))) {
      p_matvec_q8_[f] = rt_.pipeline("matvec_q8", sg, 3, kMatmulPush, q8_local, {fu, q8_rows_});
      p_matvec_q8_[f].name = fmt::format("matvec_q8_{}", device_format_name(DeviceFormat(f)));
      for (uint32_t a = 0; a < 2; ++a) {
        p_matmul_glu_q8_[f][a] = rt_.pipeline("matvec_q8_glu", sg, 6, kGluPush, q8_local, {fu, glu_rows_, a});
        p_matmul_glu_q8_[f][a].name = fmt::format("matmul_glu_q8_{}_{}", a ? "gelu" : "silu", fname);
      }
    }
    p_embed_[f] = rt_.pipeline("embedding", false, 3, kEmbedPush, elem_local_, {fu});
    p_embed_[f].name = fmt::format("embed_{}", device_format_name(DeviceFormat(f)));
  }
  p_rmsnorm_ = rt_.pipeline("rmsnorm", sg, 5, kNormPush, red_local_, {0, 0});
  p_rmsnorm_.name = "rmsnorm";
  p_add_rmsnorm_ = rt_.pipeline("rmsnorm", sg, 5, kNormPush, red_local_, {1, 0});
  p_add_rmsnorm_.name = "add_rmsnorm";
  if (q8) {
    p_rmsnorm_q8_ = rt_.pipeline("rmsnorm", sg, 5, kNormPush, red_local_, {0, 1});
    p_rmsnorm_q8_.name = "rmsnorm_q8";
    p_add_rmsnorm_q8_ = rt_.pipeline("rmsnorm", sg, 5, kNormPush, red_local_, {1, 1});
    p_add_rmsnorm_q8_.name = "add_rmsnorm_q8";
    p_glu_silu_q8_ = rt_.pipeline("glu_q8", false, 4, kElemPush, elem_local_, {0});
    p_glu_silu_q8_.name = "glu_silu_q8";
    p_glu_gelu_q8_ = rt_.pipeline("glu_q8", false, 4, kElemPush, elem_local_, {1});
    p_glu_gelu_q8_.name = "glu_gelu_q8";
    p_quantize_ = rt_.pipeline("quantize", false, 2, kElemPush, elem_local_);
    p_quantize_.name = "quantize_q8";
  }
  p_rope_ = rt_.pipeline("rope", false, 3, kRopePush, elem_local_);
  p_rope_.name = "rope";
  // The KV shaders' _kvimage variants under --kv-memory image: the cache a storage image at the binding
  // their buffer takes otherwise.
  const char* kv_store_shader = kv_image ? "kv_store_kvimage" : "kv_store";
  const char* rope_kv_shader = kv_image ? "rope_kv_store_kvimage" : "rope_kv_store";
  const char* attn_shader = kv_image ? "attention_kvimage" : "attention";
  const vulkan::ImageBinding kv_at0{kv_image ? 0 : -1, true}, kv_at1{kv_image ? 1 : -1, true},
      kv_at5{kv_image ? 5 : -1, true};
  p_kv_store_ = rt_.pipeline(kv_store_shader, false, 4, kKvPush, elem_local_, {kv_f16 ? 1u : 0u}, kv_at0);
  p_kv_store_.name = "kv_store";
  p_rope_kv_store_ =
      rt_.pipeline(rope_kv_shader, false, 6, kRopeKvPush, elem_local_, {kv_f16 ? 1u : 0u}, kv_at5);
  p_rope_kv_store_.name = "rope_kv_store";
  p_attention_ = rt_.pipeline(attn_shader, sg, 5, kAttnPush, attn_local_, {kv_f16 ? 1u : 0u, 0}, kv_at1);
  p_attention_.name = "attention";
  p_attention_one_ =
      rt_.pipeline(attn_shader, sg, 5, kAttnPush, attn_one_local_, {kv_f16 ? 1u : 0u, 0}, kv_at1);
  p_attention_one_.name = "attention_one";
  if (q8) {
    p_attention_q8_ =
        rt_.pipeline(attn_shader, sg, 5, kAttnPush, attn_one_local_, {kv_f16 ? 1u : 0u, 1}, kv_at1);
    p_attention_q8_.name = "attention_q8";
  }
  p_glu_silu_ = rt_.pipeline("glu", false, 3, kElemPush, elem_local_, {0});
  p_glu_silu_.name = "glu_silu";
  p_glu_gelu_ = rt_.pipeline("glu", false, 3, kElemPush, elem_local_, {1});
  p_glu_gelu_.name = "glu_gelu";
  p_add_ = rt_.pipeline("add", false, 2, kElemPush, elem_local_);
  p_add_.name = "add";
  if (!o.test_pipeline.empty()) {
    vulkan::Pipeline* slot = nullptr;
    for (vulkan::Pipeline* p : all_pipelines()) {
      if (p->name == o.test_pipeline) slot = p;
    }
    if (!slot) fail("Vulkan backend: the test hook names no pipeline '{}'", o.test_pipeline);
    vulkan::Pipeline repl = rt_.pipeline_from(slot->name, o.test_spirv, slot->n_buffers, slot->push_bytes,
                                              slot->local_size, {}, slot->image);
    rt_.destroy(*slot);
    *slot = std::move(repl);
  }

  // The self-check needs a little room whatever the session's sizes.
  opts_.max_tokens = std::max<int64_t>(opts_.max_tokens, 8);  // its cases take up to 5 tokens
  const int64_t fused = 32 * fused_check_blocks();            // check_fused_rounding's row
  opts_.max_in_elems = std::max<int64_t>({opts_.max_in_elems, 4096, fused});
  opts_.max_out_elems = std::max<int64_t>({opts_.max_out_elems, 4096, fused});
  opts_.max_width = std::max<int64_t>({opts_.max_width, 512, fused});
  if (coopmat) {  // and the cooperative-matrix case, a tile and a part both ways of 256-wide rows
    opts_.max_tokens = std::max<int64_t>(opts_.max_tokens, kCoopmatCheckTokens);
    opts_.max_in_elems = std::max<int64_t>(opts_.max_in_elems, kCoopmatCheckTokens * 256);
    opts_.max_out_elems = std::max<int64_t>(opts_.max_out_elems, kCoopmatCheckTokens * kCoopmatCheckRows);
  }
  in_a_ = rt_.alloc(floats(opts_.max_in_elems));
  in_b_ = rt_.alloc(floats(opts_.max_in_elems));
  out_ = rt_.alloc(floats(opts_.max_out_elems));
  vec_ = rt_.alloc(floats(opts_.max_width));
  if (q8) {
    q8x_ = rt_.alloc(size_t(opts_.max_in_elems) + size_t(opts_.max_in_elems / 32) * 12);
    q8y_ = rt_.alloc(q8x_.bytes());
    glu_counters_ = rt_.alloc(size_t(opts_.max_in_elems / 32 + 1) * 4);
    rt_.fill(glu_counters_, 0, glu_counters_.bytes(), 0);
  }
  pos_dev_ = rt_.alloc(size_t(opts_.max_tokens) * 4);
  pos_held_.assign(size_t(opts_.max_tokens), 0);
  ids_dev_ = rt_.alloc(size_t(opts_.max_tokens) * 4);
  ids_held_.assign(size_t(opts_.max_tokens), 0);
  for (const VulkanBackendOptions::HostArray& a : o.resident) {
    mirrors_.add(a.data, a.bytes);  // the host copy is the current one
    mirror_dev_.push_back(rt_.alloc(a.bytes));
  }

  // Layer slots: every sequence's layers (sequence s's layer l is slot s * kv_layers + l).
  if (o.kv_seqs < 1) fail("internal: Vulkan KV caches for {} sequences", o.kv_seqs);
  const int64_t kv_slots = o.kv_layers * o.kv_seqs;
  if (o.kv_layers > 0 && kv_image) {
    if (o.kv_ctx <= 0 || o.kv_dim <= 0) fail("internal: Vulkan KV cache of {} x {}", o.kv_ctx, o.kv_dim);
    // A position's row is one line of kv_dim / 4 texels; a layer 2 n_ctx lines (K, then V).
    uint64_t side = std::min<uint64_t>(c.image2d_max, 65536);  // tl_texel_coord's range
    if (o.image_max > 0) side = std::min<uint64_t>(side, o.image_max);
    const uint64_t width = uint64_t(o.kv_dim) / 4, layer_lines = 2 * uint64_t(o.kv_ctx);
    const uint64_t layer_bytes = layer_lines * width * 8;
    if (width > side || layer_lines > side || layer_bytes > c.max_alloc_bytes) {
      fail(
          "Vulkan backend: --kv-memory image: one layer's KV cache is an image of {} x {} texels ({} bytes, "
          "a context of {}), over the device's 2D image side of {} or its largest allocation of {} bytes "
          "(profile {}); use a smaller context (-c) or --kv-memory buffer",
          width, layer_lines, layer_bytes, o.kv_ctx, side, c.max_alloc_bytes, c.profile);
    }
    layers_per_buf_ =
        std::min<int64_t>({kv_slots, int64_t(side / layer_lines),
                           int64_t(std::min<uint64_t>(c.max_alloc_bytes, UINT32_MAX) / layer_bytes)});
    for (int64_t l = 0; l < kv_slots; l += layers_per_buf_) {
      const int64_t nl = std::min(layers_per_buf_, kv_slots - l);
      kv_imgs_.push_back(
          rt_.alloc_image(uint32_t(width), uint32_t(uint64_t(nl) * layer_lines), vulkan::ImageUse::KvCache));
    }
  } else if (o.kv_layers > 0) {
    if (o.kv_ctx <= 0 || o.kv_dim <= 0) fail("internal: Vulkan KV cache of {} x {}", o.kv_ctx, o.kv_dim);
    const uint64_t layer_bytes = 2 * uint64_t(o.kv_ctx) * uint64_t(o.kv_dim) * (kv_f16 ? 2 : 4);
    uint64_t max_buf = std::min(c.max_alloc_bytes, c.max_storage_range);
    if (o.kv_max_buffer_bytes > 0) max_buf = std::min(max_buf, o.kv_max_buffer_bytes);
    if (layer_bytes > max_buf) {
      fail(
          "Vulkan backend: one layer's KV cache ({} bytes for a context of {}) exceeds the largest KV buffer "
          "of "
          "{} bytes (the device's allocation and storage-range limits, profile {}); use a smaller context "
          "(-c)",
          layer_bytes, o.kv_ctx, max_buf, c.profile);
    }
    layers_per_buf_ = std::min<int64_t>(kv_slots, int64_t(max_buf / layer_bytes));
    for (int64_t l = 0; l < kv_slots; l += layers_per_buf_) {
      const int64_t nl = std::min(layers_per_buf_, kv_slots - l);
      kv_bufs_.push_back(rt_.alloc(size_t(nl) * layer_bytes));
    }
  }

  cpu_pool_ = std::make_unique<ThreadPool>(1);
  BackendParams hp;
  hp.pool = cpu_pool_.get();
  hp.activations = ActivationMode::F32;
  hp.weights = o.weights;
  hp.max_in_elems = o.max_in_elems;
  cpu_ = host_backend().make(hp);
  if (o.self_check) {
    verdict_from_cache_ = have_entry && cached.checked && apply_cached_verdict(cached.failed);
    if (!verdict_from_cache_) run_self_check();
  }
  // A new entry when there was none (or a refresh), or when this start checked what an unchecked one held.
  if (cache && cache->enabled() && (!have_entry || (o.self_check && !verdict_from_cache_))) {
    CacheEntry e;
    e.binaries.push_back(rt_.pipeline_cache_data());
    e.checked = o.self_check;
    e.failed = failed_;
    cache->store(e);
  }
}

std::string VulkanBackend::pipeline_cache_key() const {
  const vulkan::Capabilities& c = caps();
  const VulkanBackendOptions& o = opts_;
  // The version changes with what a cached verdict means (the self-check's cases or measures): 2, the
  // rounding's near-ties (self_check.cpp rounding_error).
  std::string k = "tilellm vulkan pipeline cache 2\n";
  k += fmt::format("device {} | vendor 0x{:04x} device 0x{:04x} | driver {} {} {} | api {}\n", c.name,
                   c.vendor_id, c.device_id, c.driver_name, c.driver_info, c.driver_version, c.api_version);
  k += fmt::format(
      "profile {} | subgroups {} | activations {} | kv {} | matvec {} {} {} {} {} | coopmat {} | memory {} | "
      "kv memory {}\n",
      c.profile, o.subgroups, o.activations == ActivationMode::Quantized ? "q8" : "f32", type_name(o.kv_type),
      o.matvec_rows, o.matvec_parts, o.matvec_local, o.matvec_unroll, o.matvec_groups, o.coopmat,
      gpu_memory_name(o.memory), kv_memory_name(o.kv_memory));
  k += fmt::format("shaders {:016x}\n", vulkan::shaders_hash());
  if (!o.test_pipeline.empty()) {
    k += fmt::format("test hook {} {:016x}\n", o.test_pipeline,
                     cache_hash(o.test_spirv.data(), o.test_spirv.size() * 4));
  }
  if (!o.coopmat_test_spirv.empty())
    k += fmt::format("coopmat test hook {:016x}\n",
                     cache_hash(o.coopmat_test_spirv.data(), o.coopmat_test_spirv.size() * 4));
  return k;
}

VulkanBackend::~VulkanBackend() {
  rt_.finish();
  for (vulkan::Pipeline* p : all_pipelines()) rt_.destroy(*p);
}

std::vector<vulkan::Pipeline*> VulkanBackend::all_pipelines() {
  std::vector<vulkan::Pipeline*> v;
  for (int f = 0; f < kDeviceFormats; ++f) v.push_back(&p_embed_[f]);
  for (int f = 0; f < kDeviceFormats; ++f) v.push_back(&p_matmul_[f]);
  for (int f = 0; f < kDeviceFormats; ++f)
    v.insert(v.end(), {&p_matmul_glu_q8_[f][0], &p_matmul_glu_q8_[f][1]});
  for (int f = 0; f < kDeviceFormats; ++f) v.push_back(&p_matvec_[f]);
  for (int f = 0; f < kDeviceFormats; ++f) v.push_back(&p_matvec_q8_[f]);
  for (int f = 0; f < kDeviceFormats; ++f) v.push_back(&p_matmul_cm_[f]);
  for (int f = 0; f < kDeviceFormats; ++f) v.push_back(&p_matmul_img_[f]);
  for (int f = 0; f < kDeviceFormats; ++f) v.push_back(&p_matvec_img_[f]);
  for (int f = 0; f < kDeviceFormats; ++f) v.push_back(&p_matvec_q8_img_[f]);
  for (int f = 0; f < kDeviceFormats; ++f) v.push_back(&p_matmul_cm_img_[f]);
  for (vulkan::Pipeline* p :
       {&p_rmsnorm_, &p_add_rmsnorm_, &p_rope_, &p_kv_store_, &p_rope_kv_store_, &p_attention_, &p_glu_silu_,
        &p_glu_gelu_, &p_add_, &p_quantize_, &p_rmsnorm_q8_, &p_add_rmsnorm_q8_, &p_glu_silu_q8_,
        &p_glu_gelu_q8_, &p_attention_q8_, &p_attention_one_})
    v.push_back(p);
  return v;
}

std::vector<std::string> VulkanBackend::cpu_fallbacks() const {
  std::vector<std::string> v;
  for (vulkan::Pipeline* p : const_cast<VulkanBackend*>(this)->all_pipelines()) {
    if (p->on_cpu) v.push_back(p->name);
  }
  return v;
}

vulkan::Pipeline& VulkanBackend::product(Product k, const DeviceWeight& dw) {
  const int f = int(dw.fmt);
  const bool img = bool(dw.img);
  switch (k) {
    case Product::Matmul:
      return img ? p_matmul_img_[f] : p_matmul_[f];
    case Product::Matvec:
      return img ? p_matvec_img_[f] : p_matvec_[f];
    case Product::MatvecQ8:
      return img ? p_matvec_q8_img_[f] : p_matvec_q8_[f];
    case Product::Coopmat:
      break;
  }
  return img ? p_matmul_cm_img_[f] : p_matmul_cm_[f];
}

size_t VulkanBackend::image_weights() const {
  return size_t(
      std::count_if(weights_.begin(), weights_.end(), [](const auto& e) { return bool(e.second.img); }));
}

// The matrix in one image (backends/image_plan.h's plan, the device's limits after the profile's clamp):
// row r's device bytes at the start of lines r L .. r L + L - 1, the rest of them zeros. False, with a note
// naming why, when it does not fit (the weight then stays a buffer).
bool VulkanBackend::make_weight_image(DeviceWeight& dw, const std::string& name, DeviceRowWriter& rows) {
  size_t side = caps().image2d_max;
  if (opts_.image_max > 0) side = std::min<size_t>(side, opts_.image_max);
  side = std::min<size_t>(side, 65536);  // weights.glsl's coordinates are exact up to 2^16 lines
  // The shaders address the image's bytes with 32-bit offsets (weights.glsl).
  const uint64_t max_bytes = std::min<uint64_t>(caps().max_alloc_bytes, std::numeric_limits<uint32_t>::max());
  const ImagePlan plan = plan_weight_image(dw.row_bytes, dw.n_out, side, side, max_bytes);
  if (!plan.fits) {
    std::string line =
        fmt::format("weight {} stays a buffer: {} (profile {})", name, plan.why, caps().profile);
    std::fprintf(stderr, "note: Vulkan --gpu-memory image: %s\n", line.c_str());
    buffer_weights_.push_back(std::move(line));
    return false;
  }
  dw.img = rt_.alloc_image(uint32_t(plan.width), uint32_t(plan.height));
  dw.img_width = uint32_t(plan.width);
  dw.img_span = uint32_t(plan.width * plan.lines * kImageTexelBytes);
  dw.rows_per_buf = dw.n_out;
  // A slab of rows at a time (~4 MiB of lines), each row's bytes at the start of its span.
  const int64_t slab = std::max<int64_t>(1, int64_t(4 << 20) / int64_t(dw.img_span));
  std::vector<uint8_t> packed(size_t(std::min(slab, dw.n_out)) * dw.row_bytes);
  std::vector<uint8_t> lines(size_t(std::min(slab, dw.n_out)) * dw.img_span);
  for (int64_t r0 = 0; r0 < dw.n_out; r0 += slab) {
    const int64_t nr = std::min(slab, dw.n_out - r0);
    rows.write(r0, nr, packed.data());
    std::fill(lines.begin(), lines.end(), uint8_t(0));
    for (int64_t r = 0; r < nr; ++r)
      std::memcpy(lines.data() + size_t(r) * dw.img_span, packed.data() + size_t(r) * dw.row_bytes,
                  dw.row_bytes);
    rt_.upload_image(dw.img, uint32_t(r0 * int64_t(plan.lines)), uint32_t(nr * int64_t(plan.lines)),
                     lines.data());
  }
  rt_.finish();
  return true;
}

VulkanBackend::DeviceWeight VulkanBackend::make_device_weight(const Weight& w, WeightsMode mode,
                                                              bool may_image) {
  if (!w.data) fail("Vulkan backend: weight {} has no data", w.name);
  if (w.n_in <= 0 || w.n_out <= 0)
    fail("Vulkan backend: weight {} has shape {} x {}", w.name, w.n_out, w.n_in);
  DeviceWeight dw;
  dw.host_type = w.type;
  dw.n_in = w.n_in;
  dw.n_out = w.n_out;
  dw.fmt = device_format_for(w, mode);
  DeviceRowWriter rows(w, dw.fmt);
  dw.row_bytes = rows.row_bytes();
  if (may_image && p_matmul_img_[int(dw.fmt)].pipeline && make_weight_image(dw, w.name, rows)) return dw;
  const uint64_t limit = std::min(caps().max_alloc_bytes, caps().max_storage_range);
  // The shaders address bytes within a buffer with 32-bit offsets.
  uint64_t max_buf = std::min<uint64_t>(limit, std::numeric_limits<uint32_t>::max());
  if (opts_.max_buffer_bytes > 0) max_buf = std::min(max_buf, opts_.max_buffer_bytes);
  if (dw.row_bytes > max_buf) {
    fail(
        "Vulkan backend: one row of weight {} ({} bytes as {}) exceeds the device's largest buffer of {} "
        "bytes "
        "(max allocation {}, max storage buffer range {}, profile {})",
        w.name, dw.row_bytes, device_format_name(dw.fmt), max_buf, caps().max_alloc_bytes,
        caps().max_storage_range, caps().profile);
  }
  dw.rows_per_buf = std::min<int64_t>(w.n_out, int64_t(max_buf / dw.row_bytes));
  const int64_t slab = std::max<int64_t>(1, int64_t(4 << 20) / int64_t(dw.row_bytes));  // ~4 MiB
  std::vector<uint8_t> buf(size_t(std::min(slab, w.n_out)) * dw.row_bytes);
  for (int64_t b0 = 0; b0 < w.n_out; b0 += dw.rows_per_buf) {
    const int64_t nb = std::min(dw.rows_per_buf, w.n_out - b0);
    dw.bufs.push_back(rt_.alloc(size_t(nb) * dw.row_bytes));
    for (int64_t r0 = 0; r0 < nb; r0 += slab) {
      const int64_t nr = std::min(slab, nb - r0);
      rows.write(b0 + r0, nr, buf.data());
      rt_.upload(dw.bufs.back(), size_t(r0) * dw.row_bytes, buf.data(), size_t(nr) * dw.row_bytes);
    }
  }
  rt_.finish();
  return dw;
}

void VulkanBackend::upload_weight(const Weight& w) {
  upload_weight(w, opts_.memory == GpuMemory::Image);
}

void VulkanBackend::upload_weight(const Weight& w, bool may_image) {
  if (auto it = weights_.find(w.data); it != weights_.end()) {
    const DeviceWeight& dw = it->second;
    if (dw.host_type != w.type || dw.n_in != w.n_in || dw.n_out != w.n_out) {
      fail("Vulkan backend: weight {} ({} {} x {}) reuses the memory of an uploaded {} {} x {} weight",
           w.name, type_name(w.type), w.n_out, w.n_in, type_name(dw.host_type), dw.n_out, dw.n_in);
    }
    return;
  }
  if (opts_.weights != WeightsMode::Native && p_matmul_[int(converted_device_format(opts_.weights))].on_cpu &&
      !cpu_prepared_) {
    fail(
        "Vulkan backend: pipeline {} failed its self-check; load the model with load_weights so that its "
        "host "
        "fallback holds the converted weights",
        p_matmul_[int(converted_device_format(opts_.weights))].name);
  }
  weights_.emplace(w.data, make_device_weight(w, opts_.weights, may_image));
}

void VulkanBackend::load_weights(const WeightSet& ws) {
  if (const Weight* table = ws.embedding) {
    if (opts_.weights == WeightsMode::Native) {
      // The lookup reads a buffer; a tied output matrix shares it.
      if (opts_.memory == GpuMemory::Image && !weights_.count(table->data)) {
        std::string line =
            fmt::format("weight {} stays a buffer: the embedding kernel reads it{}", table->name,
                        std::any_of(ws.matrices.begin(), ws.matrices.end(),
                                    [table](const Weight* m) { return m != table && m->data == table->data; })
                            ? " (the output matrix is tied to it)"
                            : "");
        std::fprintf(stderr, "note: Vulkan --gpu-memory image: %s\n", line.c_str());
        buffer_weights_.push_back(std::move(line));
      }
      upload_weight(*table, false);
    } else if (!tables_.count(table->data)) {
      tables_.emplace(table->data, make_device_weight(*table, WeightsMode::Native));
    }
  }
  if (opts_.weights != WeightsMode::Native && !cpu_prepared_) {
    const DeviceFormat f = converted_device_format(opts_.weights);
    if (p_matmul_[int(f)].on_cpu || p_matvec_[int(f)].on_cpu || p_matmul_img_[int(f)].on_cpu ||
        p_matvec_img_[int(f)].on_cpu) {
      cpu_->load_weights(ws);
      cpu_prepared_ = true;
    }
  }
  for (const Weight* w : ws.matrices) upload_weight(*w);
  for (const WeightSet::Vector& v : ws.vectors) {
    if (v.n <= 0 || norms_.count(v.data)) continue;
    vulkan::Buffer b = rt_.alloc(size_t(v.n) * sizeof(float));
    rt_.upload(b, 0, v.data, size_t(v.n) * sizeof(float));
    norms_.emplace(v.data, std::move(b));
  }
  rt_.finish();
}

const VulkanBackend::DeviceWeight& VulkanBackend::find_weight(const Weight& w, const char* op) const {
  auto it = weights_.find(w.data);
  if (std::string_view(op) == "embed") {
    if (auto t = tables_.find(w.data); t != tables_.end()) it = t;
  }
  if (it == weights_.end()) fail("Vulkan backend: {}: weight {} was not uploaded to the device", op, w.name);
  const DeviceWeight& dw = it->second;
  if (dw.n_in != w.n_in || dw.n_out != w.n_out) {
    fail("Vulkan backend: {}: weight {} is {} x {} but was uploaded as {} x {}", op, w.name, w.n_out, w.n_in,
         dw.n_out, dw.n_in);
  }
  return dw;
}

std::string VulkanBackend::memory_summary() const {
  size_t weights = 0, kv = 0, other = 0;
  std::unordered_set<VkBuffer> seen;
  for (const auto* m : {&weights_, &tables_}) {
    for (const auto& e : *m) {
      for (const vulkan::Buffer& b : e.second.bufs) {
        if (seen.insert(b.get()).second) weights += b.bytes();
      }
      weights += e.second.img.bytes();
    }
  }
  for (const vulkan::Buffer& b : kv_bufs_) kv += b.bytes();
  for (const vulkan::Image& im : kv_imgs_) kv += im.bytes();
  for (const vulkan::Buffer& b : mirror_dev_) other += b.bytes();
  for (const auto& e : norms_) other += e.second.bytes();
  for (const vulkan::Buffer* b : {&in_a_, &in_b_, &out_, &vec_, &pos_dev_, &ids_dev_}) other += b->bytes();
  for (const RopeSlot& r : rope_) other += r.dev.bytes();
  constexpr double kMiB = 1024.0 * 1024.0;
  return fmt::format(
      "Vulkan device memory: weights {:.1f} MiB, KV cache {:.1f} MiB, activations and scratch {:.1f} MiB",
      double(weights) / kMiB, double(kv) / kMiB, double(other) / kMiB);
}

void VulkanBackend::elementwise_groups(int64_t n, uint32_t local, uint32_t& gx, uint32_t& gy) const {
  const uint64_t groups = (uint64_t(n) + local - 1) / local;
  gx = uint32_t(std::min<uint64_t>(groups, caps().max_group_count[0]));
  gy = uint32_t((groups + gx - 1) / std::max<uint32_t>(gx, 1));
  if (gx == 0) gy = 0;
}

void VulkanBackend::check_tokens(int64_t n_tok, const char* op) const {
  if (n_tok > opts_.max_tokens)
    fail("Vulkan backend: {} of {} tokens exceeds the {} it was sized for", op, n_tok, opts_.max_tokens);
}

void VulkanBackend::check_kv(const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                             const char* op) const {
  if (kv_bufs_.empty() && kv_imgs_.empty())
    fail("Vulkan backend: {}: the backend was made without a KV cache", op);
  check_tokens(n_tok, op);
  check_device_kv(kv, opts_.kv_seqs, opts_.kv_layers, opts_.kv_ctx, opts_.kv_dim, opts_.kv_type, layer, pos,
                  n_tok, "Vulkan backend", op);
}

VulkanBackend::KvTarget VulkanBackend::kv_target(const KvCache& kv, int64_t layer,
                                                 uint32_t& layer_off) const {
  const int64_t slot = int64_t(kv.seq()) * opts_.kv_layers + layer;
  const int64_t b = slot / layers_per_buf_;
  layer_off =
      uint32_t(uint64_t(slot % layers_per_buf_) * 2 * uint64_t(opts_.kv_ctx) * uint64_t(opts_.kv_dim));
  KvTarget t;
  if (kv_imgs_.empty()) {
    t.buf = &kv_bufs_[size_t(b)];
  } else {
    t.img = &kv_imgs_[size_t(b)];
  }
  return t;
}

void VulkanBackend::kv_upload(const KvTarget& t, int64_t kv_dim, size_t off, const void* src, size_t bytes) {
  if (t.buf) return rt_.upload(*t.buf, off, src, bytes);
  const size_t row = size_t(kv_dim) * 2;  // an image holds halves
  if (off % row != 0 || bytes % row != 0)
    fail("internal: Vulkan KV image copy of {} bytes at {}, not whole rows of {}", bytes, off, row);
  rt_.upload_image(*t.img, uint32_t(off / row), uint32_t(bytes / row), src);
}

void VulkanBackend::kv_download(const KvTarget& t, int64_t kv_dim, size_t off, void* dst, size_t bytes) {
  if (t.buf) return rt_.download(*t.buf, off, dst, bytes);
  const size_t row = size_t(kv_dim) * 2;
  if (off % row != 0 || bytes % row != 0)
    fail("internal: Vulkan KV image copy of {} bytes at {}, not whole rows of {}", bytes, off, row);
  rt_.download_image(*t.img, uint32_t(off / row), uint32_t(bytes / row), dst);
}

// Positions [p0, p1) of every layer's K and V planes between kv's sequence cache on the device and a host
// cache of the same geometry (whose planes may be padded: copied plane by plane). Returns with the device
// work finished.
void VulkanBackend::copy_kv(const KvCache& kv, int64_t p0, int64_t p1, bool to_device) {
  const int32_t pos0 = 0;
  check_kv(kv, 0, &pos0, 0, to_device ? "kv_to_device" : "kv_to_host");
  if (p0 < 0 || p1 > opts_.kv_ctx || p0 > p1)
    fail("Vulkan backend: KV positions [{}, {}) outside the cache of {}", p0, p1, opts_.kv_ctx);
  if (p0 < p1) {
    const size_t row = kv.row_bytes(), elem = opts_.kv_type == GgmlType::F16 ? 2 : 4;
    const size_t plane = size_t(opts_.kv_ctx) * size_t(opts_.kv_dim) * elem;
    const size_t bytes = size_t(p1 - p0) * size_t(opts_.kv_dim) * elem;
    for (int64_t l = 0; l < opts_.kv_layers; ++l) {
      uint32_t off = 0;
      const KvTarget target = kv_target(kv, l, off);
      for (int kind = 0; kind < 2; ++kind) {
        const size_t dev =
            size_t(off) * elem + size_t(kind) * plane + size_t(p0) * size_t(opts_.kv_dim) * elem;
        uint8_t* host = kv.plane(l, kind) + size_t(p0) * row;
        if (to_device) {
          kv_upload(target, opts_.kv_dim, dev, host, bytes);
        } else {
          kv_download(target, opts_.kv_dim, dev, host, bytes);
        }
      }
    }
  }
  rt_.finish();
}

}  // namespace tilellm
