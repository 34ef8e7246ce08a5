// OpenclBackend construction: programs and kernels built once, weights uploaded once, scratch and the device
// FB-KV allocated once; the shared checks every op file uses.
#include "backends/opencl/opencl_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_set>

#include "backends/device_rows.h"
#include "backends/registry.h"
#include "base/error.h"
#include "base/fp16.h"
#include "format/asym_quant.h"
#include "format/quants.h"

namespace tilellm {
namespace {

constexpr const char* kMatmulKernels[9] = {"matmul_f32",    "matmul_f16",  "matmul_q4_0",
                                           "matmul_q4_1",   "matmul_q8_0", "matmul_int4b64",
                                           "matmul_int8b0", "matmul_kq8",  "matmul_kq4"};
constexpr const char* kMatvecKernels[9] = {"matvec_f32",    "matvec_f16",  "matvec_q4_0",
                                           "matvec_q4_1",   "matvec_q8_0", "matvec_int4b64",
                                           "matvec_int8b0", "matvec_kq8",  "matvec_kq4"};
constexpr const char* kMatvecGluKernels[9] = {nullptr,
                                              nullptr,
                                              "matvec_glu_q4_0",
                                              "matvec_glu_q4_1",
                                              "matvec_glu_q8_0",
                                              "matvec_glu_int4b64",
                                              "matvec_glu_int8b0",
                                              "matvec_glu_kq8",
                                              "matvec_glu_kq4"};
// The integer prompt products (kernels/gemm_q8.cl): the block formats whose codes fit 8 bits with one
// (scale, offset) per block of 32 or more.
constexpr const char* kMatmulQ8Kernels[9] = {nullptr,
                                             nullptr,
                                             "matmul_q8_q4_0",
                                             "matmul_q8_q4_1",
                                             "matmul_q8_q8_0",
                                             "matmul_q8_int4b64",
                                             "matmul_q8_int8b0",
                                             nullptr,
                                             "matmul_q8_kq4"};
// Decode's integer products (the same formats).
constexpr const char* kMatvecQ8Kernels[9] = {nullptr,
                                             nullptr,
                                             "matvec_q8_q4_0",
                                             "matvec_q8_q4_1",
                                             "matvec_q8_q8_0",
                                             "matvec_q8_int4b64",
                                             "matvec_q8_int8b0",
                                             nullptr,
                                             "matvec_q8_kq4"};
constexpr const char* kMatvecGluQ8Kernels[9] = {nullptr,
                                                nullptr,
                                                "matvec_glu_q8_q4_0",
                                                "matvec_glu_q8_q4_1",
                                                "matvec_glu_q8_q8_0",
                                                "matvec_glu_q8_int4b64",
                                                "matvec_glu_q8_int8b0",
                                                nullptr,
                                                "matvec_glu_q8_kq4"};
constexpr const char* kEmbedKernels[9] = {"embed_f32", "embed_f16", "embed_q4_0", "embed_q4_1", "embed_q8_0",
                                          nullptr,     nullptr,     "embed_kq8",  "embed_kq4"};

size_t floats(int64_t n) {
  return size_t(std::max<int64_t>(n, 1)) * sizeof(float);
}

// Bumped whenever something outside the program texts changes what a cached entry means: the self-check's
// cases or tolerance (its verdict is cached), or how binaries are made or used.
constexpr const char* kCacheKeyVersion =
    "tilellm-opencl-programs 6";  // 2: fused, KQ8 and split-attention checks; 3: KQ4 and Q5_K checks;
                                  // 4: split-K checks; 5: the integer decode products' checks;
                                  // 6: attention's output rounding in the producers' check

// The program cache's key (program_cache.h): every input of the binaries and of the self-check's verdict, as
// length-prefixed fields so that no two different inputs make the same text.
std::string program_cache_key(const opencl::Capabilities& c, const std::string& options,
                              const std::vector<std::string>& texts, const std::string& hook_kernel) {
  std::string k;
  auto field = [&k](std::string_view name, std::string_view v) {
    k += fmt::format("{} {}:", name, v.size());
    k += v;
    k += '\n';
  };
  field("version", kCacheKeyVersion);
  field("platform", c.platform);
  field("platform-version", c.platform_version);
  field("device", c.name);
  field("vendor", c.vendor);
  field("device-version", c.device_version);
  field("driver-version", c.driver_version);
  field("c-version", c.c_version);
  field("profile", c.profile);
  field("options", options);
  field("test-hook", hook_kernel);
  for (const std::string& t : texts) field("program", t);
  return k;
}

}  // namespace

OpenclBackend::OpenclBackend(const OpenclBackendOptions& o)
    : opts_(o), rt_(o.device, o.profile, o.profiling) {
  rt_.set_flush_every(o.flush_every);
  if (o.max_tokens <= 0 || o.max_in_elems <= 0 || o.max_out_elems <= 0 || o.max_width <= 0) {
    fail("internal: OpenCL backend sized for {} tokens, {}/{} elements, width {}", o.max_tokens,
         o.max_in_elems, o.max_out_elems, o.max_width);
  }
  // The kernels index with 32-bit ints within one activation array.
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  if (o.max_in_elems > kMaxInt || o.max_out_elems > kMaxInt || o.kv_dim > kMaxInt) {
    fail("OpenCL backend: activations of {} elements exceed the kernels' 32-bit indexing",
         std::max(o.max_in_elems, o.max_out_elems));
  }
  const bool kv_f16 = o.kv_type == GgmlType::F16;
  if (!kv_f16 && o.kv_type != GgmlType::F32)
    fail("OpenCL backend: KV cache type {} is not f16 or f32", type_name(o.kv_type));
  // The generated header's per-backend constants: the cache type, the matmul's GEMM tile (kernels/gemm.cl)
  // and the tokens per work-group of the row kernels it replaces where no tile fits.
  gemm_ = o.tiled_matmul ? gemm_tiles_for(caps()) : GemmTiles{};
  if (o.tiled_matmul && !o.gemm_tile.empty()) {
    const std::optional<GemmTiles> asked = gemm_tile_named(o.gemm_tile);
    if (!asked) fail("OpenCL backend: --cl-gemm-tile {} is not a tile of the GEMM", o.gemm_tile);
    if (asked->items() > caps().max_work_group_size || asked->local_bytes() > caps().local_mem_bytes) {
      fail(
          "OpenCL backend: --cl-gemm-tile {} needs work-groups of {} items and {} bytes of local memory; {} "
          "(profile {}) allows {} items and {} bytes",
          o.gemm_tile, asked->items(), asked->local_bytes(), caps().name, caps().profile,
          caps().max_work_group_size, caps().local_mem_bytes);
    }
    gemm_ = *asked;
  }
  // The image matmuls (--gpu-memory image) are a program of their own, built only when they can be used.
  const bool images = o.memory == GpuMemory::Image && caps().images;
  std::vector<std::string_view> ops = {
      "embedding",   "rmsnorm",        "matmul_f32",    "matmul_f16", "matmul_q4_0", "matmul_q4_1",
      "matmul_q8_0", "matmul_int4b64", "matmul_int8b0", "matmul_kq8", "matmul_kq4",  "rope",
      "kv_store",    "attention",      "glu",           "add",        "gemm_split"};
  // The integer prompt products (kernels/gemm_q8.cl) with the device's dot product unless --cl-int-gemm off,
  // or four integer multiply-adds where a test asks: only under --activations q8 and with a GEMM tile.
  using IntDot = opencl::Capabilities::IntDot;
  if (o.tiled_matmul && o.activations == ActivationMode::Quantized && (o.int_gemm || o.q8_plain_dot))
    q8_dot_ = o.q8_plain_dot ? 0 : caps().int_dot == IntDot::Khr ? 1 : caps().int_dot == IntDot::Ptx ? 2 : -1;
  if (q8_dot_ >= 0) ops.push_back("matmul_q8");
  prompt_gemm_ = !o.tiled_matmul                              ? "the row kernels (a test's switch)"
                 : o.activations != ActivationMode::Quantized ? "float GEMM (--activations f32)"
                 : q8_dot_ < 0 && !o.int_gemm                 ? "float GEMM (--cl-int-gemm off)"
                 : q8_dot_ < 0                                ? "float GEMM (no integer dot product)"
                 : q8_dot_ == 0                               ? "integer GEMM (plain integer products)"
                 : q8_dot_ == 1                               ? "integer GEMM (cl_khr_integer_dot_product)"
                                                              : "integer GEMM (PTX dp4a)";
  std::string defines;
  std::unique_ptr<ProgramCache> cache;
  std::optional<CacheEntry> entry;
  for (;;) {
    defines = fmt::format(
        "#define TL_KV_F16 {}\n#define TL_MM_TILE {}\n#define TL_GEMM {}\n#define TL_MV_UNROLL {}\n",
        kv_f16 ? 1 : 0, kMatmulTile, gemm_.on() ? 1 : 0, o.matvec_unroll);
    if (gemm_.on()) {
      defines += fmt::format(
          "#define TL_GEMM_RM {}\n#define TL_GEMM_TM {}\n#define TL_GEMM_WR {}\n#define TL_GEMM_WT {}\n"
          "#define TL_GEMM_AHEAD {}\n#define TL_GEMM_STAGES {}\n",
          gemm_.rm, gemm_.tm, gemm_.wr, gemm_.wt, gemm_.ahead() ? 1 : 0, gemm_.stages);
    }
    defines += fmt::format("#define TL_Q8_GEMM {}\n#define TL_Q8_DOT {}\n#define TL_EXACT_DIV {}\n",
                           q8_dot_ >= 0 ? 1 : 0, std::max(q8_dot_, 0),
                           caps().fp32_correctly_rounded_div_sqrt ? 1 : 0);
    // The programs: one from every op file, the image matmuls when used, and the test hook's replacement
    // kernel when one is set. All come from the binary cache when it holds an entry for exactly these texts
    // on this device, else from source.
    std::vector<std::string> labels = {"ops"},
                             texts = {rt_.program_text(opencl::Runtime::op_sources(ops), defines)};
    if (images) {
      labels.push_back("image matmuls");
      texts.push_back(rt_.program_text(opencl::Runtime::op_sources({"matmul_image"}), defines));
    }
    if (!o.test_kernel_name.empty()) {
      labels.push_back("test hook " + o.test_kernel_name);
      texts.push_back(rt_.program_text(o.test_kernel_source, defines));
    }
    cache = std::make_unique<ProgramCache>(
        o.cache, program_cache_key(caps(), rt_.build_options(), texts, o.test_kernel_name), "opencl",
        "OpenCL program cache");
    entry = cache->load();
    std::vector<opencl::ProgramHandle> programs;
    if (entry && entry->binaries.size() == texts.size()) {
      try {
        for (size_t i = 0; i < texts.size(); ++i)
          programs.push_back(rt_.build_binary(labels[i], entry->binaries[i]));
      } catch (const Error& e) {
        std::fprintf(
            stderr,
            "note: OpenCL program cache: %s: the driver rejected a cached binary (%s); rebuilding it\n",
            cache->path().c_str(), e.what());
        programs.clear();
      }
    }
    programs_from_cache_ = !programs.empty();
    if (!programs_from_cache_) {
      entry.reset();
      try {
        for (size_t i = 0; i < texts.size(); ++i) programs.push_back(rt_.build_text(labels[i], texts[i]));
      } catch (const Error& e) {
        // A compiler that lists a dot product yet does not build the integer GEMM with it: the programs
        // again without it (the float GEMM serves prompts), with a note naming the cause.
        if (q8_dot_ <= 0) throw;
        std::fprintf(stderr, "note: OpenCL integer prompt GEMM not built on %s (%s); float GEMM\n",
                     caps().name.c_str(), e.what());
        q8_dot_ = -1;
        prompt_gemm_ = "float GEMM (the integer kernels did not build)";
        ops.pop_back();
        continue;
      }
    }
    program_ = std::move(programs[0]);
    if (images) image_program_ = std::move(programs[1]);
    if (!o.test_kernel_name.empty()) test_program_ = std::move(programs.back());
    for (int i = 0; i < kFormats; ++i) {
      if (kEmbedKernels[i]) k_embed_[i] = rt_.kernel(program_, kEmbedKernels[i]);
    }
    for (int i = 0; i < kFormats; ++i) {
      k_matmul_[i] = rt_.kernel(program_, kMatmulKernels[i]);
      k_matvec_[i] = rt_.kernel(program_, kMatvecKernels[i]);
      if (kMatvecGluKernels[i]) k_matvec_glu_[i] = rt_.kernel(program_, kMatvecGluKernels[i]);
    }
    // A compiler may allow a kernel fewer items than the device (registers), or take local memory of its
    // own beside the tiles', and a driver may refuse to launch a tile every limit it reports allows
    // (NVIDIA's OpenCL: CL_OUT_OF_RESOURCES for 128x64x2, exactly its 48 KiB): then the next smaller tile.
    size_t fits = SIZE_MAX, local = 0;
    for (const opencl::Kernel& k : k_matmul_) {
      fits = std::min(fits, k.max_wg);
      local = std::max(local, k.local_bytes + (gemm_.on() ? gemm_.local_bytes() : 0));
    }
    const bool local_fits = local <= caps().local_mem_bytes;
    const bool launches = !gemm_.on() || fits < gemm_.items() || !local_fits || gemm_launches();
    if (!gemm_.on() || (fits >= gemm_.items() && local_fits && launches)) break;
    if (!o.gemm_tile.empty() && !local_fits) {
      fail(
          "OpenCL backend: --cl-gemm-tile {} takes {} bytes of local memory as compiled ({} for its "
          "tiles); {} (profile {}) allows {}",
          o.gemm_tile, local, gemm_.local_bytes(), caps().name, caps().profile, caps().local_mem_bytes);
    }
    if (!o.gemm_tile.empty() && !launches) {
      fail(
          "OpenCL backend: --cl-gemm-tile {} ({} items, {} bytes of local memory) is within the limits {} "
          "(profile {}) reports, but its driver refuses to launch it (CL_OUT_OF_RESOURCES)",
          o.gemm_tile, gemm_.items(), gemm_.local_bytes(), caps().name, caps().profile);
    }
    if (!o.gemm_tile.empty()) {
      fail(
          "OpenCL backend: --cl-gemm-tile {} needs work-groups of {} items; the compiler allows its kernels "
          "{}",
          o.gemm_tile, gemm_.items(), fits);
    }
    // The next tile's arrays must leave room for the kernels' own local memory, or be smaller than the tile
    // the driver refused.
    size_t max_local = SIZE_MAX;
    if (!local_fits)
      max_local =
          caps().local_mem_bytes - std::min<size_t>(caps().local_mem_bytes, local - gemm_.local_bytes());
    else if (!launches)
      max_local = gemm_.local_bytes() - 1;
    gemm_ = gemm_tiles_for(caps(), fits, max_local);
  }
  k_rmsnorm_ = rt_.kernel(program_, "rmsnorm");
  k_add_rmsnorm_ = rt_.kernel(program_, "add_rmsnorm");
  k_rms_scale_ = rt_.kernel(program_, "rms_scale");
  k_rope_ = rt_.kernel(program_, "rope");
  k_kv_store_ = rt_.kernel(program_, "kv_store");
  k_rope_kv_store_ = rt_.kernel(program_, "rope_kv_store");
  k_attention_ = rt_.kernel(program_, "attention");
  k_attention_merge_ = rt_.kernel(program_, "attention_merge");
  k_attention_tiled_ = rt_.kernel(program_, "attention_tiled");
  k_glu_silu_ = rt_.kernel(program_, "glu_silu");
  k_glu_gelu_ = rt_.kernel(program_, "glu_gelu");
  k_add_ = rt_.kernel(program_, "add");
  k_gemm_split_sum_ = rt_.kernel(program_, "gemm_split_sum");
  if (q8_dot_ >= 0 && gemm_.on()) {
    k_quantize_q8_ = rt_.kernel(program_, "quantize_q8");
    for (int i = 0; i < kFormats; ++i) {
      if (kMatmulQ8Kernels[i]) k_matmul_q8_[i] = rt_.kernel(program_, kMatmulQ8Kernels[i]);
      if (kMatvecQ8Kernels[i]) k_matvec_q8_[i] = rt_.kernel(program_, kMatvecQ8Kernels[i]);
      if (kMatvecGluQ8Kernels[i]) k_matvec_glu_q8_[i] = rt_.kernel(program_, kMatvecGluQ8Kernels[i]);
    }
    // A compiler may allow these kernels fewer items than the float GEMM's tile (registers): then the
    // float GEMM serves the prompt.
    for (const opencl::Kernel& k : k_matmul_q8_) {
      if (k.handle && k.max_wg < gemm_.items() && q8_dot_ >= 0) {
        q8_dot_ = -1;
        prompt_gemm_ = fmt::format("float GEMM ({} allows {} items, the tile {} needs {})", k.name, k.max_wg,
                                   gemm_.name(), gemm_.items());
      }
    }
  } else {
    q8_dot_ = -1;
  }
  if (!gemm_.on()) prompt_gemm_ = "the row kernels (no GEMM tile fits the device)";
  if (images) image_kernels();
  if (!o.test_kernel_name.empty()) {
    opencl::Kernel* slot = nullptr;
    for (opencl::Kernel* k : all_kernels()) {
      if (k->name == o.test_kernel_name) slot = k;
    }
    if (!slot) fail("OpenCL backend: the test hook names no kernel '{}'", o.test_kernel_name);
    *slot = rt_.kernel(test_program_, o.test_kernel_name.c_str());
  }

  // The self-check (self_check.cpp) needs a little room whatever the session's sizes: up to 18 tokens (the
  // tiled attention's prompt), inputs and outputs of a few hundred floats, rows of 64.
  opts_.max_tokens = std::max<int64_t>(opts_.max_tokens, 18);
  opts_.max_in_elems = std::max<int64_t>(opts_.max_in_elems, 4096);
  opts_.max_out_elems = std::max<int64_t>(opts_.max_out_elems, 4096);
  opts_.max_width = std::max<int64_t>(opts_.max_width, 64);
  in_a_ = rt_.alloc(floats(opts_.max_in_elems));
  in_b_ = rt_.alloc(floats(opts_.max_in_elems));
  out_ = rt_.alloc(floats(opts_.max_out_elems));
  attn_part_ = rt_.alloc(kAttnPartFloats * sizeof(float));
  vec_ = rt_.alloc(floats(opts_.max_width));
  // Any pass's rounded input (kernels/gemm_q8.cl): 10 words a block of 32, each token's row padded by up to
  // 3 words to a multiple of 4.
  if (q8_dot_ >= 0) {
    q8x_ = rt_.alloc(size_t(10 * (opts_.max_in_elems / 32) + 4 * opts_.max_tokens) * sizeof(uint32_t));
    // Decode's second slot and the producers' exchange (kernels/gemm_q8.cl tl_q8_hand_in): every slot
    // empty and every count 0, as each launch leaves them.
    q8y_ = rt_.alloc(size_t(10 * (opts_.max_in_elems / 32) + 4) * sizeof(uint32_t));
    const std::vector<int32_t> empty(size_t(opts_.max_in_elems), int32_t(0xfff0dead));  // TL_NORM_EMPTY
    const std::vector<int32_t> zeros(size_t(opts_.max_in_elems / 32 + 1), 0);
    q8_xch_ =
        rt_.alloc(empty.size() * sizeof(int32_t), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, empty.data());
    q8_count_ =
        rt_.alloc(zeros.size() * sizeof(int32_t), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, zeros.data());
  }
  // A split product's slices: the rule keeps slices x groups within the target, so target tiles of tr x tt
  // outputs hold any split it makes (gemm_split_for; it splits less where they would not fit).
  if (gemm_.on() && (opts_.gemm_split > 0 || opts_.gemm_split_blocks > 0)) {
    int64_t want = kMaxGemmSlices * opts_.max_out_elems;
    if (opts_.gemm_split_blocks == 0) {
      const int64_t target = int64_t(opts_.gemm_split) * int64_t(std::max<uint32_t>(caps().compute_units, 1));
      want = std::min(want, target * int64_t(gemm_.tr()) * int64_t(gemm_.tt()));
    }
    gemm_parts_floats_ = std::min<int64_t>(want, int64_t(caps().max_alloc_bytes / sizeof(float)));
    gemm_parts_ = rt_.alloc(floats(gemm_parts_floats_));
  }
  // A residual product's scale and partial sums: one per group of 4 rows of a norm (up to max_width; the
  // self-check's norm of 256), each slot starting empty (TL_NORM_EMPTY in kernels/quants.cl); its counter
  // starts at 0.
  {
    std::vector<uint32_t> empty(std::max<size_t>(size_t(opts_.max_width), 256) / 4 + 2, 0xfff0deadu);
    empty[0] = 0x3f800000u;  // the scale slot: 1.0f
    norm_part_ =
        rt_.alloc(empty.size() * sizeof(uint32_t), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, empty.data());
  }
  const int32_t zero = 0;
  norm_count_ = rt_.alloc(sizeof(int32_t), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &zero);
  for (Staged* st : {&ids_, &pos_}) {
    st->host.assign(size_t(opts_.max_tokens), 0);
    st->dev = rt_.alloc(size_t(opts_.max_tokens) * sizeof(int32_t));
  }
  for (RopeRows& r : rope_) {
    r.rows.assign(size_t(opts_.max_tokens * opts_.max_width), 0.0f);
    r.dev = rt_.alloc(floats(opts_.max_tokens * opts_.max_width));
  }
  for (const OpenclBackendOptions::HostArray& a : o.resident) {
    mirrors_.add(a.data, a.bytes);  // the host copy is the current one
    mirror_dev_.push_back(rt_.alloc(a.bytes));
    mirror_upload_epoch_.push_back(0);
  }

  if (o.kv_layers > 0) {
    if (o.kv_ctx <= 0 || o.kv_dim <= 0) fail("internal: OpenCL KV cache of {} x {}", o.kv_ctx, o.kv_dim);
    const uint64_t layer_bytes = 2 * uint64_t(o.kv_ctx) * uint64_t(o.kv_dim) * (kv_f16 ? 2 : 4);
    const uint64_t max_alloc = o.kv_max_buffer_bytes > 0
                                   ? std::min(o.kv_max_buffer_bytes, caps().max_alloc_bytes)
                                   : caps().max_alloc_bytes;
    if (layer_bytes > max_alloc) {
      fail(
          "OpenCL backend: one layer's KV cache ({} bytes for a context of {}) exceeds the largest KV buffer "
          "of {} bytes (device allocation limit, profile {}); use a smaller context (-c)",
          layer_bytes, o.kv_ctx, max_alloc, caps().profile);
    }
    if (o.kv_seqs < 1) fail("internal: OpenCL KV caches for {} sequences", o.kv_seqs);
    const int64_t slots = o.kv_layers * o.kv_seqs;
    layers_per_buf_ = std::min<int64_t>(slots, int64_t(max_alloc / layer_bytes));
    for (int64_t l = 0; l < slots; l += layers_per_buf_) {
      const int64_t nl = std::min(layers_per_buf_, slots - l);
      kv_bufs_.push_back(rt_.alloc(size_t(nl) * layer_bytes));
    }
  }

  // The host backend's float path: the self-check's reference, and the fallback of a kernel that fails it.
  cpu_pool_ = std::make_unique<ThreadPool>(1);
  BackendParams hp;
  hp.pool = cpu_pool_.get();
  hp.activations = ActivationMode::F32;
  hp.weights = o.weights;
  hp.max_in_elems = o.max_in_elems;
  cpu_ = host_backend().make(hp);
  if (o.self_check) {
    verdict_from_cache_ = entry && entry->checked && o.reuse_verdict && apply_cached_verdict(entry->failed);
    if (!verdict_from_cache_) {
      run_self_check();
      self_check_ran_ = true;
    }
  }
  // Stored after the self-check, whose verdict goes with the binaries: a new entry after a build from source,
  // or the cached binaries with a new verdict (the entry had none, or the check was forced).
  if (cache->enabled() && (!programs_from_cache_ || self_check_ran_)) {
    CacheEntry e;
    if (programs_from_cache_) {
      e.binaries = std::move(entry->binaries);
    } else {
      // In the order of the texts above: ops, image matmuls, test hook.
      e.binaries.push_back(rt_.program_binary(program_));
      if (image_program_) e.binaries.push_back(rt_.program_binary(image_program_));
      if (test_program_) e.binaries.push_back(rt_.program_binary(test_program_));
    }
    e.checked = self_check_ran_;
    e.failed = failed_;
    cache->store(e);
  }
}

OpenclBackend::~OpenclBackend() {
  // Non-blocking uploads may still read host arrays (mirrors, staging) that die with or after us.
  clFinish(rt_.queue());
}

void OpenclBackend::upload_weight(const Weight& w) {
  upload_weight_in(w, opts_.memory == GpuMemory::Image);
}

void OpenclBackend::upload_weight_in(const Weight& w, bool as_image) {
  if (!w.data) fail("OpenCL backend: weight {} has no data", w.name);
  if (auto it = weights_.find(w.data); it != weights_.end()) {
    // The same tensor again (a tied output is the embedding): nothing to do. Different tensor metadata at
    // the same address means the caller broke the contract above.
    const DeviceWeight& dw = it->second;
    if (dw.host_type != w.type || dw.n_in != w.n_in || dw.n_out != w.n_out) {
      fail("OpenCL backend: weight {} ({} {} x {}) reuses the memory of an uploaded {} {} x {} weight",
           w.name, type_name(w.type), w.n_out, w.n_in, type_name(dw.host_type), dw.n_out, dw.n_in);
    }
    return;
  }
  if (w.n_in <= 0 || w.n_out <= 0)
    fail("OpenCL backend: weight {} has shape {} x {}", w.name, w.n_out, w.n_in);
  if (w.n_in > std::numeric_limits<int32_t>::max() || w.n_out > std::numeric_limits<int32_t>::max()) {
    fail("OpenCL backend: weight {} ({} x {}) exceeds the kernels' 32-bit indexing", w.name, w.n_out, w.n_in);
  }
  if (opts_.weights != WeightsMode::Native) {
    // The CPU backend's fallback multiplies by what it holds: only upload_model prepares it in this mode.
    const DevFormat f = converted_format(opts_.weights);
    if (matmul_kernel(f).on_cpu && !cpu_prepared_) {
      fail(
          "OpenCL backend: kernel {} failed its self-check; upload the model with upload_model so that its "
          "CPU fallback holds the converted weights",
          matmul_kernel(f).name);
    }
  }
  weights_.emplace(w.data, make_device_weight(w, opts_.weights, as_image));
}

size_t OpenclBackend::device_row_bytes(GgmlType t, int64_t n_in) {
  const int f = native_device_format(t);
  return f >= 0 ? tilellm::device_row_bytes(DeviceFormat(f), n_in) : row_size(t, n_in);
}

OpenclBackend::DeviceWeight OpenclBackend::make_device_weight(const Weight& w, WeightsMode mode,
                                                              bool as_image) {
  if (mode != WeightsMode::Native) {
    if (as_image)
      note_buffer_weight(w.name, fmt::format("--weights {} converts into buffers", weights_mode_name(mode)));
    return convert_device_weight(w, mode);
  }
  DeviceWeight dw;
  dw.host_type = w.type;
  dw.n_in = w.n_in;
  dw.n_out = w.n_out;
  // The device rows every GPU backend shares (backends/device_rows.h): block rows split, K-quants as codes
  // and groups, F16 / F32 as in the file; a type no kernel reads dequantized exactly to F32.
  const bool native = native_device_format(w.type) >= 0;
  dw.fmt = native ? DevFormat(native_device_format(w.type)) : DevFormat::F32;
  if (!native && as_image)
    note_buffer_weight(w.name, fmt::format("no image kernel reads {}", type_name(w.type)));
  DeviceRowWriter rows(w, DeviceFormat(int(dw.fmt)));
  dw.row_bytes = rows.row_bytes();
  if (native && as_image &&
      make_weight_image(dw, w.name, [&rows](int64_t r, uint8_t* dst) { rows.write(r, 1, dst); }))
    return dw;
  const size_t bytes = dw.row_bytes * size_t(w.n_out);
  if (bytes > caps().max_alloc_bytes) {
    fail(
        "OpenCL backend: weight {} ({} bytes as {}) exceeds the device's largest allocation of {} bytes "
        "(profile {})",
        w.name, bytes, device_format_name(DeviceFormat(int(dw.fmt))), caps().max_alloc_bytes, caps().profile);
  }
  upload_rows(dw, rows);
  return dw;
}

void OpenclBackend::upload_rows(DeviceWeight& dw, DeviceRowWriter& rows) {
  dw.buf = rt_.alloc(dw.row_bytes * size_t(dw.n_out), CL_MEM_READ_ONLY);
  const int64_t slab = std::max<int64_t>(1, int64_t(16 << 20) / int64_t(dw.row_bytes));  // ~16 MiB
  std::vector<uint8_t> buf(size_t(std::min(slab, dw.n_out)) * dw.row_bytes);
  for (int64_t r0 = 0; r0 < dw.n_out; r0 += slab) {
    const int64_t nr = std::min(slab, dw.n_out - r0);
    rows.write(r0, nr, buf.data());
    rt_.write(dw.buf, size_t(r0) * dw.row_bytes, buf.data(), size_t(nr) * dw.row_bytes);
    rt_.finish();  // `buf` is reused by the next slab
  }
}

OpenclBackend::DeviceWeight OpenclBackend::convert_device_weight(const Weight& w, WeightsMode mode) {
  DeviceWeight dw;
  dw.host_type = w.type;
  dw.n_in = w.n_in;
  dw.n_out = w.n_out;
  dw.fmt = converted_format(mode);
  // Both integer formats are read in blocks of 32 (as the CPU tiles need too).
  const bool blocks = mode == WeightsMode::Int4B64 || mode == WeightsMode::Int8B0;
  if (blocks && w.n_in % 32 != 0) {
    fail("OpenCL backend: weight {}: {} inputs is not a multiple of 32, which --weights {} needs", w.name,
         w.n_in, weights_mode_name(mode));
  }
  DeviceRowWriter rows(w, DeviceFormat(int(dw.fmt)));
  dw.row_bytes = rows.row_bytes();
  const size_t bytes = dw.row_bytes * size_t(w.n_out);
  if (bytes > caps().max_alloc_bytes) {
    fail(
        "OpenCL backend: weight {} converted to {} ({} bytes) exceeds the device's largest allocation of {} "
        "bytes (profile {})",
        w.name, weights_mode_name(mode), bytes, caps().max_alloc_bytes, caps().profile);
  }
  upload_rows(dw, rows);
  return dw;
}

OpenclBackend::DevFormat OpenclBackend::converted_format(WeightsMode m) {
  switch (m) {
    case WeightsMode::Int4B64:
      return DevFormat::Int4B64;
    case WeightsMode::Int8B0:
      return DevFormat::Int8B0;
    case WeightsMode::F16:
      return DevFormat::F16;
    case WeightsMode::F32:
      return DevFormat::F32;
    case WeightsMode::Int4B0:
      fail("OpenCL backend: --weights int4b0 has no device format (int4b64, int8b0, f16 and f32 do)");
    case WeightsMode::Native:
      break;
  }
  fail("internal: --weights native has no converted device format");
}

opencl::Kernel& OpenclBackend::matmul_kernel(DevFormat f) {
  return k_matmul_[int(f)];
}

opencl::Kernel& OpenclBackend::matvec_kernel(DevFormat f) {
  return k_matvec_[int(f)];
}

opencl::Kernel& OpenclBackend::embed_kernel(DevFormat f) {
  if (!k_embed_[int(f)].handle) fail("internal: no OpenCL embedding kernel for device format {}", int(f));
  return k_embed_[int(f)];
}

std::vector<opencl::Kernel*> OpenclBackend::all_kernels() {
  std::vector<opencl::Kernel*> v;
  for (int i = 0; i < kFormats; ++i) {
    if (k_embed_[i].handle) v.push_back(&k_embed_[i]);
  }
  for (int i = 0; i < kFormats; ++i) v.push_back(&k_matmul_[i]);
  for (int i = 0; i < kFormats; ++i) {
    if (k_matmul_q8_[i].handle) v.push_back(&k_matmul_q8_[i]);
  }
  if (k_quantize_q8_.handle) v.push_back(&k_quantize_q8_);
  for (opencl::Kernel* ks : {k_matvec_q8_, k_matvec_glu_q8_}) {
    for (int i = 0; i < kFormats; ++i) {
      if (ks[i].handle) v.push_back(&ks[i]);
    }
  }
  for (int i = 0; i < kFormats; ++i) v.push_back(&k_matvec_[i]);
  for (int i = 0; i < kFormats; ++i) {
    if (k_matvec_glu_[i].handle) v.push_back(&k_matvec_glu_[i]);
  }
  for (opencl::Kernel* k : {&k_rmsnorm_, &k_rope_, &k_kv_store_, &k_attention_, &k_glu_silu_, &k_glu_gelu_,
                            &k_add_, &k_add_rmsnorm_, &k_rope_kv_store_, &k_attention_merge_,
                            &k_attention_tiled_, &k_rms_scale_, &k_gemm_split_sum_}) {
    v.push_back(k);
  }
  for (opencl::Kernel* ks : {k_matmul_img_, k_matvec_img_}) {
    for (int i = 0; i < kImageKernels; ++i) {
      if (ks[i].handle) v.push_back(&ks[i]);
    }
  }
  return v;
}

OpenclBackend::DeviceMemory OpenclBackend::device_memory() const {
  DeviceMemory m;
  std::unordered_set<cl_mem> seen;  // a tied output's matrix and its table may share one buffer
  auto weight = [&](const DeviceWeight& dw) {
    if (dw.img && seen.insert(dw.img.get()).second)
      m.weights += size_t(dw.img_width) * size_t(dw.img_lines) * size_t(dw.n_out) * 16;  // RGBA32UI texels
    if (dw.buf.get() && seen.insert(dw.buf.get()).second) m.weights += dw.buf.bytes;
  };
  for (const auto& e : weights_) weight(e.second);
  for (const auto& e : tables_) weight(e.second);
  for (const opencl::Buffer& b : kv_bufs_) m.kv += b.bytes;
  for (const opencl::Buffer& b : mirror_dev_) m.other += b.bytes;
  for (const auto& e : norms_) m.other += e.second.bytes;
  for (const opencl::Buffer* b :
       {&in_a_, &in_b_, &attn_part_, &gemm_parts_, &out_, &vec_, &norm_part_, &norm_count_, &ids_.dev,
        &pos_.dev, &rope_[0].dev, &rope_[1].dev, &q8x_, &q8y_, &q8_xch_, &q8_count_})
    m.other += b->bytes;
  return m;
}

std::string OpenclBackend::memory_summary() const {
  const DeviceMemory m = device_memory();
  constexpr double kMiB = 1024.0 * 1024.0;
  // Decode's block-format products: integers where the prompt GEMM is (q8_dot_) and --cl-int-matvec is on.
  const std::string decode = q8_dot_ < 0         ? "float products"
                             : !opts_.int_matvec ? "float products (--cl-int-matvec off)"
                             : round_in_producers_
                                 ? "integer products"
                                 : "integer products (each input rounded in a launch of its own)";
  return fmt::format(
      "OpenCL device memory: weights {:.1f} MiB, KV cache {:.1f} MiB, activations and scratch {:.1f} MiB; "
      "prompts: {}; decode: {}",
      double(m.weights) / kMiB, double(m.kv) / kMiB, double(m.other) / kMiB, prompt_gemm_, decode);
}

std::vector<std::string> OpenclBackend::cpu_fallbacks() const {
  std::vector<std::string> v;
  auto note = [&v](const opencl::Kernel& k) {
    if (k.on_cpu) v.push_back(k.name);
  };
  for (const opencl::Kernel& k : k_embed_) note(k);
  for (const opencl::Kernel& k : k_matmul_) note(k);
  for (const opencl::Kernel& k : k_matmul_q8_) note(k);
  note(k_quantize_q8_);
  for (const opencl::Kernel& k : k_matvec_q8_) note(k);
  for (const opencl::Kernel& k : k_matvec_glu_q8_) note(k);
  for (const opencl::Kernel& k : k_matvec_) note(k);
  for (const opencl::Kernel& k : k_matvec_glu_) note(k);
  for (const opencl::Kernel* k :
       {&k_rmsnorm_, &k_rope_, &k_kv_store_, &k_attention_, &k_glu_silu_, &k_glu_gelu_, &k_add_,
        &k_add_rmsnorm_, &k_rope_kv_store_, &k_attention_merge_, &k_attention_tiled_, &k_rms_scale_,
        &k_gemm_split_sum_}) {
    note(*k);
  }
  for (const opencl::Kernel& k : k_matmul_img_) note(k);
  for (const opencl::Kernel& k : k_matvec_img_) note(k);
  return v;
}

void OpenclBackend::upload_model(const WeightSet& ws) {
  const Weight* table = ws.embedding;
  if (table) {
    const bool tied = std::any_of(ws.matrices.begin(), ws.matrices.end(),
                                  [table](const Weight* w) { return w->data == table->data; });
    // The embedding kernel reads its table from a buffer, so the table stays one in either memory mode.
    if (opts_.memory == GpuMemory::Image && !weights_.count(table->data)) {
      note_buffer_weight(table->name, tied ? "the embedding kernel reads it (the output matrix is tied to it)"
                                           : "the embedding kernel reads it");
    }
    if (opts_.weights == WeightsMode::Native) {
      upload_weight_in(*table, false);
    } else if (!tables_.count(table->data)) {
      // The lookup reads the table's GGUF type, as the CPU backend does in every --weights mode.
      tables_.emplace(table->data, make_device_weight(*table, WeightsMode::Native, false));
    }
  }
  if (opts_.weights != WeightsMode::Native) {
    if (matmul_kernel(converted_format(opts_.weights)).on_cpu && !cpu_prepared_) {
      // Its matrices then multiply on the CPU backend, which must hold the same converted weights.
      cpu_->load_weights(ws);
      cpu_prepared_ = true;
    }
  }
  for (const Weight* w : ws.matrices) upload_weight(*w);
  // Norm weights too, so that rmsnorm sends nothing up (a vector shared by several norms is uploaded once).
  for (const WeightSet::Vector& v : ws.vectors) {
    if (v.n <= 0 || norms_.count(v.data)) continue;
    norms_.emplace(v.data, rt_.alloc(size_t(v.n) * sizeof(float), CL_MEM_READ_ONLY, v.data));
  }
  rt_.finish();
}

const OpenclBackend::DeviceWeight& OpenclBackend::find_weight(const Weight& w, const char* op) const {
  auto it = weights_.find(w.data);
  if (std::string_view(op) == "embed") {
    if (auto t = tables_.find(w.data); t != tables_.end()) it = t;
  }
  if (it == weights_.end()) fail("OpenCL backend: {}: weight {} was not uploaded to the device", op, w.name);
  const DeviceWeight& dw = it->second;
  if (dw.n_in != w.n_in || dw.n_out != w.n_out) {
    fail("OpenCL backend: {}: weight {} is {} x {} but was uploaded as {} x {}", op, w.name, w.n_out, w.n_in,
         dw.n_out, dw.n_in);
  }
  return dw;
}

size_t OpenclBackend::reduction_wg(const opencl::Kernel& k, size_t want, size_t local_floats_per_item) const {
  size_t limit = std::min(want, k.max_wg);
  if (local_floats_per_item > 0) {
    limit = std::min<size_t>(limit, caps().local_mem_bytes / (local_floats_per_item * sizeof(float)));
  }
  if (limit == 0) fail("OpenCL backend: kernel {} cannot fit one work-item's local memory", k.name);
  size_t wg = 1;
  while (wg * 2 <= limit) wg *= 2;
  return wg;
}

void OpenclBackend::check_tokens(int64_t n_tok, const char* op) const {
  if (n_tok > opts_.max_tokens) {
    fail("OpenCL backend: {} of {} tokens exceeds the {} it was sized for", op, n_tok, opts_.max_tokens);
  }
}

void OpenclBackend::check_kv(const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                             const char* op) const {
  if (kv_bufs_.empty()) fail("OpenCL backend: {}: the backend was made without a KV cache", op);
  check_tokens(n_tok, op);
  check_device_kv(kv, opts_.kv_seqs, opts_.kv_layers, opts_.kv_ctx, opts_.kv_dim, opts_.kv_type, layer, pos,
                  n_tok, "OpenCL backend", op);
}

const opencl::Buffer& OpenclBackend::kv_buffer(const KvCache& kv, int64_t layer, uint64_t& layer_off) const {
  const int64_t slot = int64_t(kv.seq()) * opts_.kv_layers + layer;
  const int64_t b = slot / layers_per_buf_;
  layer_off = uint64_t(slot % layers_per_buf_) * 2 * uint64_t(opts_.kv_ctx) * uint64_t(opts_.kv_dim);
  return kv_bufs_[size_t(b)];
}

void OpenclBackend::read_kv(KvCache& kv) {
  copy_kv(kv, 0, opts_.kv_ctx, /*to_device=*/false);
}

void OpenclBackend::kv_to_device(const KvCache& kv, int64_t p0, int64_t p1) {
  copy_kv(kv, p0, p1, /*to_device=*/true);
}

void OpenclBackend::kv_to_host(KvCache& kv, int64_t p0, int64_t p1) {
  copy_kv(kv, p0, p1, /*to_device=*/false);
}

// Positions [p0, p1) of every layer's K and V planes, between kv's sequence cache on the device
// ([layer][K|V][pos][kv_dim] in the cache type, split over kv_bufs_) and the host cache (its planes may be
// padded: copied plane by plane). Blocking both ways, and the queue is finished even when the range is empty.
void OpenclBackend::copy_kv(const KvCache& kv, int64_t p0, int64_t p1, bool to_device) {
  if (kv_bufs_.empty()) fail("OpenCL backend: the backend was made without a KV cache");
  const int32_t pos0 = 0;
  check_kv(kv, 0, &pos0, 0, to_device ? "kv_to_device" : "kv_to_host");
  if (p0 < 0 || p1 > opts_.kv_ctx || p0 > p1)
    fail("OpenCL backend: KV positions [{}, {}) outside the cache of {}", p0, p1, opts_.kv_ctx);
  rt_.finish();
  if (p0 == p1) return;
  const size_t row = kv.row_bytes(), plane = size_t(opts_.kv_ctx) * row;
  const size_t elem = opts_.kv_type == GgmlType::F16 ? 2 : 4;
  const size_t bytes = size_t(p1 - p0) * row;
  for (int64_t l = 0; l < opts_.kv_layers; ++l) {
    uint64_t off = 0;
    const opencl::Buffer& buf = kv_buffer(kv, l, off);
    for (int kind = 0; kind < 2; ++kind) {
      const size_t dev = size_t(off) * elem + size_t(kind) * plane + size_t(p0) * row;
      uint8_t* host = kv.plane(l, kind) + size_t(p0) * row;
      if (to_device) {
        rt_.write_now(buf, dev, host, bytes);
      } else {
        rt_.read(buf, dev, host, bytes);
      }
    }
  }
}

}  // namespace tilellm
