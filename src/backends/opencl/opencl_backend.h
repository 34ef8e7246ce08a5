// The OpenCL backend: every op of backends/backend.h on an OpenCL 1.2+ device, one host file and one kernel
// file per op (embedding, rmsnorm, matmul, rope, kv_store, attention, glu, add), each the CPU backend's float
// path computed on the device (exact dequantized weights, float32 arithmetic); under --activations q8 on a
// device with an integer dot product, the block formats' products take their input rounded to int8 per 32
// (kernels/gemm_q8.cl: the prompt GEMM and decode's matvecs).
//
// Memory (all allocated in the constructor and upload_*; nothing is allocated while ops run):
//  - Weights: uploaded once into one device buffer each, keyed by the host Weight's data pointer. Q4_0, Q4_1,
//    Q8_0, F16 and F32 keep their block format; Q4_K goes up as KQ4 (Q4_1's nibble rows with a float scale
//    and offset per 32), Q5_K, Q6_K, Q5_0 and Q5_1 as KQ8 (signed byte codes, float scale and offset per 16),
//    both exact; BF16 is dequantized at upload to F32, exactly (docs/OPENCL.md). With --weights int4b64 /
//    int8b0 / f16 / f32 (options.weights) every matrix is converted at upload instead, with the conversion
//    every backend shares (format/asym_quant.h), into the device formats INT4B64 / INT8B0
//    (kernels/quants.cl), F16 or F32 (int4b0 has no device format: refused by name); the embedding table
//    keeps its GGUF type for the lookup, as on the CPU (a tied output matrix is then held twice: table and
//    converted).
//    With --gpu-memory image, F16, Q4_0, Q4_1 and Q8_0 matrices go into one 2D image each instead (the same
//    device rows, 128-byte aligned: kernels/matmul_image.cl), where the image fits the device's limits.
//  - FB-KV on the device: [seq < kv_seqs][layer][K|V][pos < n_ctx][kv_dim] in the cache type (one cache per
//    sequence of a BatchSession, one for a Session), one buffer when it fits the device's largest
//    allocation, else whole layers split over as few buffers as fit. The host KvCache passed to
//    kv_store/attention only supplies (and must match) the geometry and names its sequence (KvCache::seq());
//    its memory is not used.
//  - Self-check: at construction every kernel runs a small random case against the host backend (the
//    registry's cpu backend, float path); a kernel that fails is replaced by the host backend for its op,
//    with a warning naming it (self_check.cpp).
//  - The OpenCL runtime is the ICD loader opened at run time (loader.h): the binary does not link it.
//  - Program binary cache (backends/program_cache.h), when the options turn it on: the programs' binaries and
//  the
//    self-check's verdict are stored after the first start on a device and loaded at the next, which then
//    neither compiles nor re-runs the self-check (the cached verdict's fallbacks apply, with their warnings).
//  - Activations are device-resident. The Backend interface passes host float pointers, and the CPU backend
//    must keep paying nothing for that, so the interface is unchanged: instead the session hands the backend
//    its activation scratch (ForwardScratch's float arrays) at construction, and the backend mirrors each
//    array in a device buffer of the same size. An op whose operand lies in a mirrored array runs on the
//    device copy; the backend tracks, per array, the byte range where one copy is newer than the other (at
//    most one side is ever newer), and copies only when the other side needs it: a device op uploads the
//    host's newer range first, a CPU-fallback op downloads the device's newer range first and marks what it
//    writes as host-newer. So a forward pass downloads only what the host reads: the logits, which land in
//    an array the backend does not mirror (any such pointer is copied per op: uploaded before, downloaded
//    after, blocking), plus whatever a CPU-fallback op needs. An operand at an offset into a mirrored array
//    (the forward's last rows selected for the logits) is copied device-to-device into fixed scratch, so the
//    kernels need no offset arguments. The host must not read or write a mirrored array between ops except
//    through to_host()/host_wrote() (the layer loop never does).
//  - Small inputs go up once: norm weights at upload_model; token ids once per embed; positions and RoPE
//    table rows only when they differ from what the device already holds (the ops of one forward all pass
//    the same positions), each from a host staging array the backend owns, with non-blocking writes.
//  - One in-order queue; nothing blocks except a download, a blocking upload of an unmirrored input, or
//    reusing a host staging array (or host-writing a mirrored array) whose upload may still be in flight.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/device_options.h"
#include "backends/device_rows.h"
#include "backends/host_mirrors.h"
#include "backends/modes.h"
#include "backends/opencl/device.h"
#include "backends/program_cache.h"
#include "base/thread_pool.h"

namespace tilellm {

// The device (DeviceOptions::device) indexes opencl::list_devices(); kernel timing reads the queue's
// profiling timestamps.
struct OpenclBackendOptions : DeviceOptions {
  std::string profile = "none";  // opencl::profiles() name
  // Most bytes in one KV buffer; 0: the device's largest allocation. Lower values split the cache sooner
  // (tests of the split use it; so could a driver whose large allocations are slow).
  uint64_t kv_max_buffer_bytes = 0;
  // The program binary cache. Off unless asked for, so that a backend a test or a library caller makes
  // touches no disk; the CLI turns it on (--cl-cache).
  ProgramCacheOptions cache;
  // With the cache on and a cached verdict, the self-check is skipped and that verdict applied; false: the
  // self-check runs anyway and its verdict replaces the cached one.
  bool reuse_verdict = true;
  // Where matmul weights live (--gpu-memory): buffers, or 2D images read by kernels/matmul_image.cl for the
  // formats it has kernels for (F16, Q4_0, Q4_1, Q8_0) where the image fits the device's limits; any other
  // weight stays a buffer with a note on stderr (buffer_weights()). The embedding table always stays a
  // buffer (the embedding kernel reads buffers; a tied output matrix shares it).
  GpuMemory memory = GpuMemory::Buffer;
  // Test clamps of the 2D image limits below the device's and the profile's (0: no further clamp), so tests
  // can force the wrapped row mapping and the fallback to a buffer.
  size_t image_max_width = 0, image_max_height = 0;
  // Test switches of the prefill matmul: `tiled_matmul = false` builds the row kernels instead of the tiled
  // GEMM (what a device too small for any GEMM tile runs); `one_token_matvec = false` sends one-token
  // products to the matmul kernel too (what a matvec kernel that failed the self-check leads to).
  bool tiled_matmul = true;
  bool one_token_matvec = true;
  // Test switch: `fuse_norms = false` runs matmul_add_rmsnorm as the unfused ops (the reference of the
  // fused path's tests).
  bool fuse_norms = true;
  // Key blocks (of 32) per work-group before attention splits a row's keys over work-groups (tests set 1
  // to split short contexts).
  int64_t attention_chunk_blocks = 4;
  // Key blocks attention takes in one pass (one trip to memory for their keys, one for their values), at
  // most the kernel's TL_ATTN_PASS (4) and what local memory holds (tests set fewer to run several passes).
  int64_t attention_pass_blocks = 4;
  // Split K of the prompt products (--cl-gemm-split): a product runs its K blocks in as many slices as keep
  // its work-groups within gemm_split per compute unit (the groups a unit runs at once), where that is 2 or
  // more (matmul.cpp, gemm_split_for); 0: never split. `gemm_split_blocks` > 0 (tests) fixes the blocks of
  // a slice instead, splitting every tiled product with more blocks than that.
  int gemm_split = 3;
  int64_t gemm_split_blocks = 0;
  // Units (half blocks) a decode matvec item loads before it converts any (--cl-matvec-unroll; quants.cl
  // TL_MV_UNROLL): 0, the formats' own loop (the 4-bit ones one unit ahead, the 8-bit ones none); 1 to 8.
  int matvec_unroll = 0;
  // Work-items of a decode matvec's group (--cl-matvec-items; matmul.cpp matvec_block_wg): 0, the rule
  // there (64, or 128 for rows of 8192 inputs and more); else a power of two from 16 to 256.
  int matvec_items = 0;
  // Launches between submissions of the queue to the device (--cl-flush; Runtime::set_flush_every): 0,
  // none but the blocking reads; else 1 to 64. Off by default: on an H100's NVIDIA OpenCL a token's
  // launches ran as fast with a flush after 2 launches, every 8 or none (docs/PERF.md 2026-12-07 07:38);
  // the option is there for drivers that hold queued work until a flush.
  int flush_every = 0;
  // Prompt products under --activations q8 (ActivationMode::Quantized, the default) on a device with an
  // integer dot product (Capabilities::int_dot): the input rounded to int8 per block of 32 and the block
  // formats' products in integers (kernels/gemm_q8.cl); F32, or a device without one, keeps the float GEMM.
  // `int_gemm` false (--cl-int-gemm off) keeps the float GEMM (on an H100's NVIDIA OpenCL the integer one
  // ran 7B prompts 2.1x as fast: docs/PERF.md 2026-12-06), and decode's products float too. With it on,
  // `int_matvec` (--cl-int-matvec) takes decode's products of those formats into integers as well
  // (gemm_q8.cl's matvec_q8_*: the input rounded the same way, once per launch).
  // `q8_plain_dot` (tests) builds that GEMM with four integer multiply-adds in place of the dot product, on
  // any device, whatever int_gemm says.
  ActivationMode activations = ActivationMode::Quantized;
  bool int_gemm = true;
  bool int_matvec = true;
  bool q8_plain_dot = false;
  // The GEMM tile (--cl-gemm-tile): empty, the largest that fits the device (gemm_tiles_for); else a
  // GemmTiles::name() of gemm_tile_choices(), refused with the device's limits where it does not fit.
  std::string gemm_tile;
  // Test hook: replaces the kernel named `test_kernel_name` by one of that name built from
  // `test_kernel_source` (after the usual header and helpers), before the self-check runs, so a test can
  // show a broken kernel caught. Empty: no replacement.
  std::string test_kernel_name, test_kernel_source;
};

class OpenclBackend final : public Backend {
 public:
  // Tokens one work-group of the row kernels multiplies (TL_MM_TILE; used where no GEMM tile fits): each
  // weight block is decoded once per tile of tokens rather than once per token.
  static constexpr int kMatmulTile = 4;

  // The tiled GEMM's shape (kernels/gemm.cl): rm x tm outputs per work-item, wr x wt work-items per group,
  // so a group computes tr() rows by tt() tokens. wr == 0: no GEMM, the row kernels run.
  struct GemmTiles {
    int rm = 0, tm = 0, wr = 0, wt = 0;
    // 1, or 2: the tiles held twice, the next block written into one while the other is read (one barrier
    // a block instead of two; TL_GEMM_STAGES, gemm.cl).
    int stages = 1;
    constexpr bool on() const { return wr > 0; }
    constexpr int tr() const { return rm * wr; }
    constexpr int tt() const { return tm * wt; }
    constexpr size_t items() const { return size_t(wr) * size_t(wt); }
    // Whether the kernel reads the next block before the current one's products (TL_GEMM_AHEAD, gemm.cl):
    // on tiles of 128 rows, where an H200 ran prompts faster with it; on 64 x 64 it ran them slower.
    constexpr bool ahead() const { return tr() >= 128; }
    // The weight and activation tiles of one 32-weight block, [32][tr] and [32][tt] floats, per stage.
    size_t local_bytes() const { return size_t(stages) * 32 * size_t(tr() + tt()) * sizeof(float); }
    // "128x64", "128x64x2" (two stages): the --cl-gemm-tile words.
    std::string name() const;
  };
  // The tiles --cl-gemm-tile can ask for, largest first: every candidate of gemm_tiles_for in one and in two
  // stages; {} for a name not among them.
  static std::vector<GemmTiles> gemm_tile_choices();
  static std::optional<GemmTiles> gemm_tile_named(std::string_view name);
  // The largest candidate tile whose group fits the capabilities (local memory, the work-group limit,
  // `max_items` and `max_local_bytes`), preferring one whose group is a multiple of the preferred work-group
  // multiple; {} if none.
  static GemmTiles gemm_tiles_for(const opencl::Capabilities& caps, size_t max_items = SIZE_MAX,
                                  size_t max_local_bytes = SIZE_MAX);

  explicit OpenclBackend(const OpenclBackendOptions& o);
  ~OpenclBackend() override;
  OpenclBackend(const OpenclBackend&) = delete;
  OpenclBackend& operator=(const OpenclBackend&) = delete;
  std::string_view name() const override { return "opencl"; }
  const opencl::Capabilities& caps() const { return rt_.caps(); }
  // The device runtime (queue, buffers, programs), for benchmarks that measure the device beside the ops
  // (gemv-bw's bandwidth peaks); ops never need it.
  opencl::Runtime& runtime() { return rt_; }
  // The GEMM tile the matmul kernels were built with (off: the row kernels).
  const GemmTiles& gemm_tiles() const { return gemm_; }
  // How a tiled prompt product of this shape runs its K blocks: `slices` slices of `blocks` blocks of 32
  // (the last one possibly shorter); {1, all} when it is not split (matmul.cpp).
  struct GemmSplit {
    int64_t slices = 1, blocks = 0;
  };
  // The most slices a product is split into.
  static constexpr int64_t kMaxGemmSlices = 16;
  GemmSplit gemm_split_for(int64_t n_out, int64_t n_tok, int64_t n_in) const;
  // Whether the driver launches every format's GEMM kernel with the tile (matmul.cpp).
  bool gemm_launches() const;

  // Uploads one weight matrix (or embedding table), keyed by its data pointer, which must stay valid and
  // unchanged while the backend lives (the mapped model file); ops on a weight not uploaded throw. The
  // matrix is held as options.weights says (converted, or its GGUF type).
  void upload_weight(const Weight& w);
  // Uploads every matrix of a model (the tied output shares the embedding's buffer) and its norm vectors.
  void upload_model(const WeightSet& ws);
  void load_weights(const WeightSet& ws) override { upload_model(ws); }
  // The pass's positions go up once, at its start (non-blocking): every op of the pass finds them in device
  // memory (dev_positions), which is where a recorded step would read them too.
  void begin_forward(const ForwardStep& step) override;
  // --gpu-memory image: weights held in images, and one line per weight that stayed a buffer, saying why.
  size_t image_weights() const;
  const std::vector<std::string>& buffer_weights() const { return buffer_weights_; }
  // Bytes of one device row of a type a kernel reads (split block rows, or the file's rows).
  static size_t device_row_bytes(GgmlType t, int64_t n_in);
  // Device memory this backend holds: the weights (buffers and images; one shared by a tied output and
  // its embedding table counted once), the FB-KV cache, and the rest (resident activations, scratch, norm
  // vectors, staged ids and positions, RoPE rows).
  struct DeviceMemory {
    size_t weights = 0, kv = 0, other = 0;
  };
  DeviceMemory device_memory() const;
  std::string memory_summary() const override;
  std::string files_dir() const override { return cache_files_dir(opts_.cache, "opencl"); }
  bool needs_host_kv() const override { return kv_on_cpu(); }
  // Names of the kernels that failed the self-check and whose ops run on the CPU backend.
  std::vector<std::string> cpu_fallbacks() const;
  // Which start path this backend took: programs loaded from cached binaries (else built from source), and
  // whether the self-check ran here (else its verdict came from the cache, or it was turned off).
  bool programs_from_cache() const { return programs_from_cache_; }
  bool self_check_ran() const { return self_check_ran_; }
  bool verdict_from_cache() const { return verdict_from_cache_; }
  // Device buffers the KV cache is split over (1 unless one buffer cannot hold it).
  size_t kv_buffers() const { return kv_bufs_.size(); }
  // Makes the host copy of `bytes` bytes at p current (p: anywhere; only mirrored arrays need a copy).
  void to_host(const void* p, size_t bytes);
  // Declares that the host wrote `bytes` bytes at p of a mirrored array; the next device op uploads them.
  // Call it before writing: it waits for an upload that may still read that memory.
  void host_wrote(void* p, size_t bytes);
  // Device-to-host copies of activations so far (downloads of mirrored arrays and per-op reads of unmirrored
  // outputs): tests count them to show what a forward pass reads back.
  uint64_t downloads() const { return downloads_; }
  // Copies the device KV cache into a host cache of the same geometry (tests; moving KV between backends).
  void read_kv(KvCache& kv);
  void kv_to_device(const KvCache& kv, int64_t p0, int64_t p1) override;
  void kv_to_host(KvCache& kv, int64_t p0, int64_t p1) override;

  void embed(const Weight& table, const int32_t* ids, int64_t n_tok, float scale, float* out) override;
  void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) override;
  void matmul(const Weight& w, const float* x, int64_t n_tok, float* y) override;
  void matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tok) override;
  // x rounded to int8 per block of 32 where the product takes the integer GEMM (uses_q8), else x.
  void rounded_matmul_input(const Weight& w, const float* x, int64_t n_tok, float* out) const override;
  void rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const int32_t* pos,
            const RopeTable& table, RopeMode mode) override;
  void kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                int64_t n_tok) override;
  // One launch (kv_store.cl's rope_kv_store) when q, k, v are device-resident arrays; else the unfused ops.
  void rope_kv_store(float* q, float* k, const float* v, KvCache& kv, int64_t layer, const int32_t* pos,
                     int64_t n_tok, const RopeShape& r) override;
  // Decode with Norm-mode RoPE, q/k/v of one block format in one launch into device arrays: the products
  // turn q and k and write the cache rows themselves (kernels/quants.cl); else the unfused ops.
  void matmul_rope_kv_store(const Weight* const* wqkv, const float* x, int64_t n_tok, float* q, float* k,
                            float* v, KvCache& kv, int64_t layer, const int32_t* pos,
                            const RopeShape& r) override;
  void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok,
                 const AttnParams& p, float* out) override;
  void glu(const float* gate, const float* up, float* out, int64_t n, FfnAct act) override;
  // Decode over block-format weights: both products and the activation in one kernel (matmul.cpp).
  void matmul_glu(const Weight& w_gate, const Weight& w_up, const float* x, int64_t n_tok, FfnAct act,
                  float* out, float* up) override;
  void add(float* acc, const float* x, int64_t n) override;
  void add_rmsnorm(float* acc, const float* x, const float* w, float* y, int64_t n_rows, int64_t n,
                   float eps) override;
  // Decode, a block-format matrix, acc and y device-resident arrays: the product adds its rows into acc,
  // writes y unscaled and the norm's scale for the products that read y next (matmul.cpp, "The norm left to
  // the readers"); o is not written. Else the unfused ops.
  void matmul_add_rmsnorm(const Weight& wo, const float* x, int64_t n_tok, float* o, float* acc,
                          const float* g, float* y, float eps) override;
  std::vector<KernelTime> kernel_times() const override { return rt_.kernel_times(); }
  void reset_kernel_times() override { rt_.reset_kernel_times(); }

 private:
  // The weight formats device kernels read (kernels/matmul_<format>.cl), in the order of the kernel tables
  // below; the converted formats have no embedding kernel (tables keep their GGUF type).
  // Kq8: Q5_K, Q6_K and Q5_0 / Q5_1, as signed byte codes and float (scale, offset) per 16 (exact).
  // Kq4: Q4_K, as Q4_1's split rows with float (scale, offset) per 32 (exact, half of Kq8's bytes).
  enum class DevFormat : int { F32, F16, Q4_0, Q4_1, Q8_0, Int4B64, Int8B0, Kq8, Kq4 };
  static constexpr int kFormats = 9;

 public:
  // Slots of the image kernel tables (matmul_image.cpp): none, F16, Q4_0, Q4_1, Q8_0, KQ4.
  static constexpr int kImageKernels = 6;
  // Whether attention over n_tok tokens with these heads takes attention_tiled (attention.cpp).
  bool attention_tiled(int64_t n_tok, const AttnParams& p) const;

 private:
  struct DeviceWeight {
    opencl::Buffer buf;  // [n_out][row_bytes] in `fmt` (block formats' rows split: kernels/quants.cl)
    // --gpu-memory image: instead of buf, [n_out * img_lines][img_width] RGBA32UI texels, each row's
    // row_bytes zero-padded to 128-byte multiples (kernels/matmul_image.cl); null for a buffer weight.
    opencl::MemHandle img;
    int img_width = 0, img_lines = 0;
    DevFormat fmt;       // as stored on the device (the host type, F32 when dequantized, or converted)
    GgmlType host_type;  // as in the model file
    size_t row_bytes;
    int64_t n_in, n_out;
    bool float_rows() const { return fmt == DevFormat::F32 || fmt == DevFormat::F16; }
  };
  static DevFormat converted_format(WeightsMode m);  // int4b64, int8b0, f16 (not native)
  DeviceWeight make_device_weight(const Weight& w, WeightsMode mode, bool as_image);
  // Converted upload (int4b64, int8b0, f16) of a matrix, from its exact float values, a slab of rows at a
  // time.
  DeviceWeight convert_device_weight(const Weight& w, WeightsMode mode);
  // dw's buffer made and filled from `rows` (dw's format and shape), a slab of rows at a time.
  void upload_rows(DeviceWeight& dw, DeviceRowWriter& rows);
  void upload_weight_in(const Weight& w, bool as_image);
  // The image path (matmul_image.cpp): its kernels (built only for --gpu-memory image on a device with
  // images), an image for dw from its device rows (device_row(r, dst) writes row r's row_bytes at dst), or
  // false and a note when it stays a buffer.
  void image_kernels();  // the image matmuls' kernels, from image_program_
  bool has_image_kernel(DevFormat f) const;
  opencl::Kernel& matmul_image_kernel(DevFormat f);
  opencl::Kernel& matvec_image_kernel(DevFormat f);
  bool make_weight_image(DeviceWeight& dw, const std::string& name,
                         const std::function<void(int64_t, uint8_t*)>& device_row);
  void note_buffer_weight(const std::string& name, const std::string& why);
  const DeviceWeight& find_weight(const Weight& w, const char* op) const;
  opencl::Kernel& matmul_kernel(DevFormat f);
  opencl::Kernel& matvec_kernel(DevFormat f);
  opencl::Kernel& embed_kernel(DevFormat f);
  std::vector<opencl::Kernel*> all_kernels();
  // The KV ops share the cache: if either kernel failed, both run on the CPU over the host cache.
  bool kv_on_cpu() const { return k_kv_store_.on_cpu || k_attention_.on_cpu; }
  // Enqueue the KV kernels on an explicit cache buffer (the session's, or the self-check's own); k, v, q,
  // out: [n_tok][...] floats from offset 0; pos: [n_tok] int32.
  void enqueue_kv_store(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx, int64_t kv_dim,
                        int64_t n_tok, const opencl::Buffer& k, const opencl::Buffer& v,
                        const opencl::Buffer& pos);
  // q, k rotated in place and k, v stored; rows: the tokens' RoPE table rows (dev_rope_rows).
  void enqueue_rope_kv_store(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx, int64_t n_tok,
                             const RopeShape& r, const opencl::Buffer& q, const opencl::Buffer& k,
                             const opencl::Buffer& v, const opencl::Buffer& rows, const opencl::Buffer& pos);
  // host_pos: pos's values on the host (the chunk grid of a split attention is sized from them).
  // y_slot >= 0: the kernel that writes out also rounds it into that q8 slot where it can (not tiled, whole
  // blocks a head, integer products built; with split keys, a merge group that holds a head's row);
  // returns whether it did.
  bool enqueue_attention(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx, int64_t kv_dim,
                         int64_t n_tok, const AttnParams& p, const opencl::Buffer& q, const int32_t* host_pos,
                         const opencl::Buffer& pos, const opencl::Buffer& out, int y_slot = -1);
  // Prompts of kTiledTokens or more: attention_tiled (attention.cl) where it applies (attention_tiled()):
  // work-groups of kAttnTileItems items over kAttnTileTokens tokens of a head, keys in chunks of
  // kAttnTileKeys (the kernel's TL_ATTN_WG, TL_ATTN_TQ, TL_ATTN_KC).
  static constexpr int64_t kTiledTokens = 8;
  static constexpr size_t kAttnTileItems = 128, kAttnTileTokens = 16, kAttnTileKeys = 32;
  // Its local-memory arguments' bytes, in order (the launch sets them; attention_tiled() sums them).
  static std::array<size_t, 5> attention_tiled_local(int64_t head_dim);
  void enqueue_attention_tiled(const opencl::Buffer& cache, uint64_t layer_off, int64_t n_ctx, int64_t kv_dim,
                               int64_t n_tok, const AttnParams& p, const opencl::Buffer& q,
                               const opencl::Buffer& pos, const opencl::Buffer& out);
  // The per-token attention kernel's launch (attention.cl): keys per block (TL_ATTN_BLOCK, also the items
  // per split), the most blocks a pass (TL_ATTN_PASS); items per key and blocks per pass for a head size
  // and chunk (split 0: no launch fits the device's local memory); the local memory they take.
  static constexpr size_t kAttnBlock = 32;
  static constexpr int64_t kAttnPass = 4;
  struct AttnLaunch {
    int split = 0, pass_blocks = 0;
  };
  AttnLaunch attention_launch(int64_t head_dim, int64_t chunk_blocks) const;
  static size_t attention_local(int64_t head_dim, int64_t split, int64_t pass_blocks);
  // How many chunks of key blocks (chunk_blocks each) the attention of these rows runs in: 1 unless the
  // longest row has more than opts_.attention_chunk_blocks blocks, bounded by the partial-sums buffer.
  int64_t attention_chunks(int64_t n_tok, const AttnParams& p, const int32_t* pos,
                           int64_t& chunk_blocks) const;
  // Floats of attn_part_: the chunks' unnormalized sums and (m, l) of a split attention (4 MiB).
  static constexpr size_t kAttnPartFloats = size_t(1) << 20;
  void run_self_check();
  // Marks the kernels a cached verdict names as failed (with the self-check's warnings); false, marking
  // nothing, when it names a kernel this backend does not have.
  bool apply_cached_verdict(const std::vector<CacheEntry::Failed>& failed);
  void warn_cpu_fallback(const opencl::Kernel& k, double err, bool cached) const;
  // Enqueues y = W x, x and y on the device from offset 0.
  void enqueue_matmul(const DeviceWeight& dw, int64_t n_tok, const opencl::Buffer& x,
                      const opencl::Buffer& y);
  // A norm whose scale a product left to its readers (matmul_add_rmsnorm): y, the norm's n floats at the
  // start of a mirrored array, holds acc * g on the device, and norm_part_[0] the scale. Kept until y is
  // written again or read by anything but a block-format matvec.
  struct PendingNorm {
    const uint8_t* y = nullptr;  // null: none
    int64_t n = 0;
  };
  // A product that adds its rows into a residual: acc += W x, y = acc * g, the norm's scale (eps) into
  // norm_part_[0] (its partial sums after it, counted in norm_count_).
  struct Residual {
    const opencl::Buffer* acc;
    const opencl::Buffer* g;
    float eps;
  };
  // The q/k/v launch's RoPE and KV write (matmul_rope_kv_store): the token's table row [n_half][cos, sin],
  // the layer's cache buffer and offset, the positions.
  struct RopeKv {
    const opencl::Buffer* cs;
    int head_dim, n_half;
    const opencl::Buffer* cache;
    uint64_t layer_off;
    int64_t n_ctx;
    const opencl::Buffer* pos;
  };
  // Applies a pending norm's scale (rms_scale) when [p, p + bytes) meets its floats, or forgets it when an
  // op is about to overwrite all of them (`overwrite`).
  void settle_norm(const void* p, size_t bytes, bool overwrite);
  // The pending norm when x (n floats, one token) is its output and every weight of ws runs a block-format
  // matvec on the device (which can take the scale); else none, the norm settled if x meets it.
  std::optional<PendingNorm> scaled_input(const Weight* const* ws, int n, const float* x, int64_t n_in,
                                          int64_t n_tok);
  // y[0, n) *= the scale in norm_part_[0].
  void enqueue_rms_scale(const opencl::Buffer& y, int64_t n);
  // Enqueues y = rmsnorm(x) * w for rows of n floats; y_slot >= 0 (one row, n % 32 == 0, y not x): y also
  // rounded into that q8 slot (rmsnorm.cl yq).
  void enqueue_rmsnorm(const opencl::Buffer& x, const opencl::Buffer& w, const opencl::Buffer& y,
                       int64_t n_rows, int64_t n, float eps, int y_slot);
  // Enqueues y = W x for one token with the matvec kernel (`scale`: x is a pending norm's output).
  void enqueue_matvec(const DeviceWeight& dw, const opencl::Buffer& x, const opencl::Buffer& y,
                      const PendingNorm* scale = nullptr, const float* x_host = nullptr);
  // One launch of a block format's matvec over 1 to 3 weights of that format and row size sharing x
  // (kernels/quants.cl), y[i] = W[i] x.
  // The local size of the block-format matvec and GLU kernels for rows of n_in weights.
  size_t matvec_block_wg(const opencl::Kernel& k, int64_t n_in) const;
  // `scale`: x is a pending norm's output; `res`: the product is added into a residual (one weight);
  // `rope`: the weights are q, k, v, turned and written into the cache. The integer products (uses_q8_matvec)
  // read x's rounding from the slot rounded_ names for `x_host`, else round x first. `round_out` (with res):
  // the launch also rounds its output y into a slot (not the one it reads), returned (-1: none).
  int enqueue_matvec_blocks(const DeviceWeight* const* dws, const opencl::Buffer* const* ys, int n,
                            const opencl::Buffer& x, const PendingNorm* scale = nullptr,
                            const Residual* res = nullptr, const RopeKv* rope = nullptr,
                            const float* x_host = nullptr, bool round_out = false);
  // Decode's gate and up products and their GLU (TL_MATVEC_GLU_BLOCK32): y = act(g x) * (u x); g and u of
  // one block format and shape. x_host, round_out and the result as enqueue_matvec_blocks's.
  int enqueue_matvec_glu(const DeviceWeight& g, const DeviceWeight& u, FfnAct act, const opencl::Buffer& x,
                         const opencl::Buffer& y, const PendingNorm* scale = nullptr,
                         const float* x_host = nullptr, bool round_out = false);
  // How many of the n weights from ws go in one decode launch with ws[0] (1 when not decoding, or when the
  // next one differs in format or row size, sits in an image, or writes to staging).
  int matvec_run(const Weight* const* ws, float* const* ys, int n, int64_t n_tok);
  // The same for a weight held in an image (matmul_image.cpp).
  void enqueue_matmul_image(const DeviceWeight& dw, int64_t n_tok, const opencl::Buffer& x,
                            const opencl::Buffer& y);
  void enqueue_matvec_image(const DeviceWeight& dw, const opencl::Buffer& x, const opencl::Buffer& y);

  // The mirrored host arrays (backends/host_mirrors.h: which copy is newer where) are mirrors_; array i's
  // device copy is mirror_dev_[i] and the epoch_ of its last non-blocking upload mirror_upload_epoch_[i] (in
  // flight while equal). The index of the array holding [p, p + bytes), or -1 when p is in none; a range
  // that starts in one but runs past its end is an error naming the op.
  int find_mirror(const void* p, size_t bytes, const char* op) const { return mirrors_.find(p, bytes, op); }
  // Whether p is the first float of a mirrored array (dev_out then gives that array's own buffer).
  bool is_mirror_start(const float* p, int64_t n);
  // A norm's weight vector on the device: the uploaded copy of a model norm, else w sent up now (vec_).
  const opencl::Buffer& norm_weight(const float* w, int64_t n);
  // Uploads the host-newer range of mirror i (non-blocking, from the host array).
  void upload_dirty(size_t i);
  // The device buffer holding an op's input of n floats at p, from offset 0: the mirror itself, or `staging`
  // filled from an offset into a mirror (device copy) or from unmirrored host memory (blocking write). A
  // pending norm there is settled first unless the caller takes its scale (`keep_norm`).
  const opencl::Buffer& dev_in(const float* p, int64_t n, const opencl::Buffer& staging, const char* op,
                               bool keep_norm = false);
  // The device buffer an op writes its n floats for p into, from offset 0: the mirror itself, else `staging`
  // (which may be the buffer dev_in filled, for ops in place). Call dev_done() after the launch.
  const opencl::Buffer& dev_out(float* p, int64_t n, const opencl::Buffer& staging, const char* op);
  // Records an output written into `written` (what dev_out returned): marks the mirror's range device-newer,
  // or copies staging into the mirror at p's offset, or downloads it to unmirrored p (blocking).
  void dev_done(float* p, int64_t n, const opencl::Buffer& written);
  // Before a CPU-fallback op: its inputs' host copies made current, its outputs marked host-newer.
  void host_in(const float* p, int64_t n) { to_host(p, size_t(n) * sizeof(float)); }
  void host_out(float* p, int64_t n) { host_wrote(p, size_t(n) * sizeof(float)); }
  // Blocking completions of the queue (reads, blocking writes, finish) bump the epoch: a non-blocking upload
  // recorded with the current epoch may still be reading its host memory.
  void download(const opencl::Buffer& b, size_t off, void* dst, size_t bytes);
  void wait_for_upload(uint64_t epoch);
  // The device copies of the call's token ids / positions (uploaded from host staging only when they
  // differ from what the device holds), and the RoPE rows of the positions of `table`.
  const opencl::Buffer& dev_ids(const int32_t* ids, int64_t n_tok);
  const opencl::Buffer& dev_positions(const int32_t* pos, int64_t n_tok);
  const opencl::Buffer& dev_rope_rows(const RopeTable& table, const int32_t* pos, int64_t n_tok);
  // The work-group size of a reduction kernel: the largest power of two within the kernel's and device's
  // limits, the local memory it needs (`local_floats_per_item` floats per item) and `want`.
  size_t reduction_wg(const opencl::Kernel& k, size_t want, size_t local_floats_per_item) const;
  void check_tokens(int64_t n_tok, const char* op) const;
  void check_kv(const KvCache& kv, int64_t layer, const int32_t* pos, int64_t n_tok, const char* op) const;
  void copy_kv(const KvCache& kv, int64_t p0, int64_t p1, bool to_device);
  // The device buffer holding `layer` and the element offset of its K plane in it.
  // The buffer of one layer of one sequence's cache, and the layer's offset in it (elements).
  const opencl::Buffer& kv_buffer(const KvCache& kv, int64_t layer, uint64_t& layer_off) const;

  OpenclBackendOptions opts_;
  opencl::Runtime rt_;

  // One program built from every op file; kernels chosen by weight type / activation / cache type.
  opencl::ProgramHandle program_;
  opencl::ProgramHandle test_program_;  // the test hook's replacement kernel, when set
  bool programs_from_cache_ = false, self_check_ran_ = false, verdict_from_cache_ = false;
  std::vector<CacheEntry::Failed> failed_;  // the self-check's verdict: kernels that failed it
  // k_matvec_: the one-token (decode) products, used for n_tok == 1 unless they failed the self-check (then
  // k_matmul_ serves decode too).
  // k_embed_: the formats an embedding table keeps (not the --weights conversions: their slots stay empty).
  opencl::Kernel k_embed_[kFormats], k_matmul_[kFormats], k_matvec_[kFormats];
  // k_matvec_glu_: decode's gate and up products with their GLU, block formats only (float slots empty).
  opencl::Kernel k_matvec_glu_[kFormats];
  GemmTiles gemm_;  // the shape k_matmul_ were built with (TL_GEMM_* in the generated header)
  opencl::Kernel k_rmsnorm_, k_rope_, k_kv_store_, k_attention_, k_glu_silu_, k_glu_gelu_, k_add_;
  opencl::Kernel k_add_rmsnorm_, k_rope_kv_store_, k_attention_merge_, k_attention_tiled_;
  // rms_scale: a pending norm's scale applied; its self-check covers the products' norm arguments too, and
  // when it fails no product leaves a norm pending.
  opencl::Kernel k_rms_scale_;
  // gemm_split_sum (gemm_split.cl): the slices of a split prompt product added into its output.
  opencl::Kernel k_gemm_split_sum_;
  // The prompt products in integers (kernels/gemm_q8.cl), built when q8_dot_ >= 0 (the TL_Q8_DOT the
  // program was built with): quantize_q8 rounds an input into q8x_ (10 words a block, rows padded to 4), and
  // k_matmul_q8_ (block formats Q4_0, Q4_1, Q8_0, Int4B64, Int8B0, Kq4; the other slots empty) multiply it.
  int q8_dot_ = -1;
  std::string prompt_gemm_;  // which prompt products run and why (memory_summary: `run`'s memory line)
  opencl::Kernel k_quantize_q8_, k_matmul_q8_[kFormats];
  // Decode's integer products (the same formats; int_matvec): one to three matrices, and gate/up with the
  // GLU, their arguments those of k_matvec_ and k_matvec_glu_ but for x, the rounded input.
  opencl::Kernel k_matvec_q8_[kFormats], k_matvec_glu_q8_[kFormats];
  opencl::Buffer q8x_;
  // Decode's rounded inputs in two slots, q8x_ (slot 0, the prompts' too) and q8y_ (slot 1, one token), so
  // that a launch can read one while it writes the other: the residual products and the gate/up kernel
  // round their output in their own launch, as attention does (attention.cl yq; the products through
  // kernels/gemm_q8.cl tl_q8_hand_in; q8_xch_: [max_in_elems]
  // exchange slots, TL_NORM_EMPTY between launches; q8_count_: [max_in_elems / 32] counts, 0 between
  // launches). rounded_: which slot holds the rounding of which array (a mirror's start, n floats; a pending
  // norm's output rounded before its scale), until that array is written or its norm settled
  // (forget_rounding). round_in_producers_: false when the self-check found the producers' rounding wrong
  // (then every integer product rounds its input in a launch of its own).
  struct Rounded {
    const uint8_t* y = nullptr;
    int64_t n = 0;
    int slot = -1;
  };
  Rounded rounded_;
  opencl::Buffer q8y_, q8_xch_, q8_count_;
  bool round_in_producers_ = true;
  const opencl::Buffer& q8_slot(int s) const { return s == 0 ? q8x_ : q8y_; }
  // The slot holding x's rounding (n floats), or -1.
  int rounded_slot(const void* x, int64_t n) const;
  void forget_rounding(const void* p, size_t bytes);
  // Whether a decode producer of n floats into y (a mirror's start) rounds them for the products after it.
  bool rounds_output(const float* y, int64_t n);
  // The self-check of the producers' rounding (self_check.cpp); round_in_producers_ false if it fails.
  void check_producer_rounding(std::mt19937& rng);
  void warn_producer_rounding(bool cached) const;
  // One token's x rounded into the slot rounded_ does not hold; returns that slot.
  int enqueue_round_decode_input(const opencl::Buffer& x, int64_t n);
  // A decode kernel's yq, yq_xch, yq_count arguments from index i: slot y_slot's buffer and the exchange, or
  // nulls (y_slot -1: the output is not rounded).
  void set_rounding_args(const opencl::Kernel& k, cl_uint i, int y_slot) const;
  // The integer GEMM for this weight and tokens (a prompt, a kernel that passed its self-check).
  bool uses_q8(const DeviceWeight& dw, int64_t n_tok) const;
  // The integer decode product for this weight (glu: the gate/up kernel), a kernel that passed its check.
  bool uses_q8_matvec(const DeviceWeight& dw, bool glu) const;
  // x (n_tok rows of n_in, on the device) rounded into slot `slot` (1: one token only).
  void enqueue_quantize_q8(const opencl::Buffer& x, int64_t n_in, int64_t n_tok, int slot = 0);
  void enqueue_matmul_q8(const DeviceWeight& dw, int64_t n_tok, const opencl::Buffer& y);
  // A GEMM kernel (the float one of gemm.cl or an integer one of gemm_q8.cl; their arguments are the same but
  // for x's type) over dw and n_tok tokens of x into y, local_bytes of tiles; split K where gemm_split_for
  // says.
  void enqueue_gemm(const opencl::Kernel& k, const DeviceWeight& dw, int64_t n_tok, const opencl::Buffer& x,
                    size_t local_bytes, const opencl::Buffer& y);
  // A split product's slices (gemm_parts_, [slices][n]) added into y.
  void enqueue_split_sum(const GemmSplit& sp, int64_t n, const opencl::Buffer& y);
  // --gpu-memory image: the image kernels, slots as matmul_image.cpp maps them (slot 0 stays empty).
  opencl::ProgramHandle image_program_;
  opencl::Kernel k_matmul_img_[kImageKernels], k_matvec_img_[kImageKernels];
  std::vector<std::string> buffer_weights_;

  std::unordered_map<const uint8_t*, DeviceWeight> weights_;  // by host Weight::data
  // Embedding tables in their GGUF type when the matrices are converted (weights_ then holds a tied output
  // matrix converted under the same key); embed looks here first.
  std::unordered_map<const uint8_t*, DeviceWeight> tables_;

  // The CPU reference for the self-check, kept as the fallback of ops whose kernel failed it (float path).
  std::unique_ptr<ThreadPool> cpu_pool_;
  std::unique_ptr<Backend> cpu_;  // the registry's host backend, float path, in options.weights' mode
  bool cpu_prepared_ = false;     // cpu_ holds the model's converted matrices (a converted kernel failed)

  // Scratch, sized once from the options, for operands that are not (or not at offset 0 of) a mirror.
  opencl::Buffer in_a_, in_b_;  // [max_in_elems] floats: op inputs
  opencl::Buffer attn_part_;    // [kAttnPartFloats]: a split attention's chunk sums (attention.cl)
  // A split prompt product's slices, [slices][n_tok][n_out] floats (gemm.cl), [gemm_parts_floats_]; empty
  // when no product can split (gemm_split 0, or no GEMM tile).
  opencl::Buffer gemm_parts_;
  int64_t gemm_parts_floats_ = 0;
  opencl::Buffer out_;  // [max_out_elems] floats: op outputs
  opencl::Buffer vec_;  // [max_width] floats: a norm weight vector not uploaded by upload_model
  // A residual product's norm (kernels/quants.cl): [0] the scale, [1 + g] group g's sum of squares; the
  // groups counted in norm_count_ (one int, 0 between launches). [2 + max(max_width, 256) / 4] floats.
  opencl::Buffer norm_part_, norm_count_;
  PendingNorm pending_;

  HostMirrors mirrors_{"OpenCL backend"};                   // the options' resident arrays
  std::vector<opencl::Buffer> mirror_dev_;                  // [i]: mirrors_[i]'s device copy, same bytes
  std::vector<uint64_t> mirror_upload_epoch_;               // [i]: epoch_ of mirrors_[i]'s last upload
  std::unordered_map<const float*, opencl::Buffer> norms_;  // norm weights by host address: [n] floats
  uint64_t epoch_ = 1;
  uint64_t downloads_ = 0;

  // Small inputs staged on the host (so the non-blocking upload may run while the caller's arrays change),
  // with their device copies; `epoch` as mirror_upload_epoch_.
  struct Staged {
    std::vector<int32_t> host;  // [max_tokens]
    opencl::Buffer dev;         // [max_tokens] int32
    int64_t n = -1;             // entries the device holds; -1: none
    uint64_t epoch = 0;
  };
  Staged ids_, pos_;
  // st's device copy holding ints[0..n), uploaded (non-blocking, from st.host) only when it holds others.
  const opencl::Buffer& staged(Staged& st, const int32_t* ints, int64_t n);
  // RoPE rows of the last positions of up to two tables (global and sliding-window layers alternate).
  struct RopeRows {
    std::vector<float> rows;  // [max_tokens][max_width] floats: the host copy of what the device holds
    opencl::Buffer dev;       // the same on the device
    int64_t n_tok = -1, n_half = 0;
    uint64_t epoch = 0, last_use = 0;
  };
  RopeRows rope_[2];
  uint64_t rope_uses_ = 0;

  // Device FB-KV: kv_bufs_[b] holds layer slots [b * layers_per_buf_, ...), each [K|V][n_ctx][kv_dim];
  // sequence s's layer l is slot s * kv_layers + l.
  std::vector<opencl::Buffer> kv_bufs_;
  int64_t layers_per_buf_ = 0;
};

}  // namespace tilellm
