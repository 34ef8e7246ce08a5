// Matmul on the device, the kernel picked by the weight's device format (matmul_<type>.cl): for one token
// (decode) the matvec kernel, one work-group per 4 rows (2 rows of both matrices for the gate/up GLU kernel),
// reading each input once for those rows; for more, the matmul kernel: the tiled GEMM (kernels/gemm.cl), one
// work-group per tile of tr rows x tt tokens (and K slice, where too few tiles split K: gemm_split_for), or,
// where the device cannot hold its smallest tile, the row kernel, one work-group per (output row, tile of
// kMatmulTile tokens). Under --activations q8 on a device with an integer dot product, the block formats'
// prompt products take the integer GEMM instead (kernels/gemm_q8.cl: uses_q8), over the input rounded to int8
// once for all the weights that share it (quantize_q8), and decode's products the integer matvecs
// (uses_q8_matvec), whose input the kernel before them (a residual product, the gate/up kernel, attention)
// rounds in its own launch (rounded_: two slots). matmul_shared places the shared input on the device once
// for all its weights.
//
// The norm left to the readers (matmul_add_rmsnorm, decode): the output and down products end their block
// with the residual add and the next block's RMSNorm. Here the product itself adds its rows into the
// residual, writes them times the norm's weight and one sum of squares per work-group, and the group that
// finishes last turns the sums into the norm's scale (kernels/quants.cl); the q/k/v and gate/up products
// that read the norm next multiply their dot products by it. So a decode step launches no norm kernel after
// its first (an H200 spent 13.7% of a 7B decode step's kernel time in the 63 add_rmsnorm launches, ~4 of
// their ~8 us the launch itself: docs/PERF.md 2026-12-04 17:15). Anything else that reads the norm's output
// gets it scaled first (settle_norm: rmsnorm.cpp, resident.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backends/opencl/opencl_backend.h"
#include "backends/q8_round.h"
#include "base/error.h"

namespace tilellm {

// Candidates, largest first. The first, 128 rows x 64 tokens over 128 items with 8 x 8 outputs each (24 KiB
// of local memory; per k 4 float4 local loads for 64 multiply-adds), ran prompts fastest on the H200 of the
// tiles measured there (docs/PERF.md 2026-12-04 17:15 and 17:50: 7B Q4_0 pp512 1784 t/s against 1258 for the
// next one, 64 x 64 over 128 items with 8 x 4 outputs, 3 loads for 32). The smaller ones fit 8 KiB and
// 4 KiB (PowerVR Rogue's whole local memory). A compiler that cannot give 128 items the first tile's
// registers reports a smaller work-group limit for its kernel, and the next tile is built (OpenclBackend).
namespace {
constexpr OpenclBackend::GemmTiles kCandidates[] = {{8, 8, 16, 8}, {8, 4, 8, 16}, {4, 4, 8, 8}, {4, 4, 4, 4}};
}  // namespace

std::string OpenclBackend::GemmTiles::name() const {
  return fmt::format("{}x{}{}", tr(), tt(), stages == 2 ? "x2" : "");
}

std::vector<OpenclBackend::GemmTiles> OpenclBackend::gemm_tile_choices() {
  std::vector<GemmTiles> v;
  for (GemmTiles g : kCandidates) {
    v.push_back(g);
    g.stages = 2;
    v.push_back(g);
  }
  return v;
}

std::optional<OpenclBackend::GemmTiles> OpenclBackend::gemm_tile_named(std::string_view name) {
  for (const GemmTiles& g : gemm_tile_choices()) {
    if (g.name() == name) return g;
  }
  return std::nullopt;
}

OpenclBackend::GemmTiles OpenclBackend::gemm_tiles_for(const opencl::Capabilities& caps, size_t max_items,
                                                       size_t max_local_bytes) {
  static_assert(
      std::ranges::all_of(kCandidates, [](const GemmTiles& g) { return size_t(g.tr()) <= g.items(); }),
      "gemm.cl decodes each row of a tile with one item");
  const GemmTiles* fit = nullptr;
  for (const GemmTiles& g : kCandidates) {
    if (g.items() > std::min(caps.max_work_group_size, max_items) ||
        g.local_bytes() > std::min<uint64_t>(caps.local_mem_bytes, max_local_bytes))
      continue;
    if (g.items() % std::max<size_t>(caps.wg_multiple, 1) == 0) return g;  // no idle SIMD lanes
    if (!fit) fit = &g;
  }
  return fit ? *fit : GemmTiles{};
}

// A product's tiles alone may leave most of a large GPU idle: a prompt of 64 tokens over a 4096-row matrix is
// 32 tiles of 128 x 64 for an H200's 132 compute units (before the tiles grew to 64 tokens and passes to
// 512 tokens, 7B Q4_0 pp512 ran 541 t/s at 64 tokens a pass against 1257 at 512: docs/PERF.md 2026-12-04),
// and a 2048-row matrix at 512 tokens is 128. Splitting K over slices multiplies the groups without shrinking
// the tile (whose size is what makes it fast) for the price of writing and adding the slices: at most target
// tiles of floats, small beside the product's weights and multiply-adds. A slice keeps at least
// kMinSliceBlocks blocks, so that its tile's loads and stores stay a small part of its work. A product takes
// as many slices as keep its groups within gemm_split (N) a compute unit, the groups a unit runs at once,
// and splits only where that is 2 or more: past one such wave, a split only adds a partial wave. On the H200
// (docs/PERF.md 2026-12-05 04:05 and 05:29) every measured split fits N = 3: the best slice counts kept the
// groups at or under 3 x 132 (7B Q4_0 pp64 538 -> 1565 t/s, TinyLlama pp512 8407 -> 10 469), while those
// that went past it lost (the 7B's 256-tile products at 512 tokens in 2 slices: 1797 -> 1547; TinyLlama's
// 2048-row ones in 5: 10 469 -> 9665), and so did leaving 172 tiles unsplit at 128 tokens (1666 -> 1408).
OpenclBackend::GemmSplit OpenclBackend::gemm_split_for(int64_t n_out, int64_t n_tok, int64_t n_in) const {
  constexpr int64_t kMinSliceBlocks = 4;
  const int64_t nbt = (n_in + 31) / 32;
  GemmSplit one{1, nbt};
  if (!gemm_.on() || gemm_parts_floats_ == 0 || k_gemm_split_sum_.on_cpu) return one;
  int64_t slices = 1;
  if (opts_.gemm_split_blocks > 0) {
    slices = (nbt + opts_.gemm_split_blocks - 1) / opts_.gemm_split_blocks;
  } else {
    const int64_t groups = ((n_out + gemm_.tr() - 1) / gemm_.tr()) * ((n_tok + gemm_.tt() - 1) / gemm_.tt());
    const int64_t target = int64_t(opts_.gemm_split) * int64_t(std::max<uint32_t>(caps().compute_units, 1));
    slices = std::min({target / std::max<int64_t>(groups, 1), nbt / kMinSliceBlocks, kMaxGemmSlices});
  }
  slices = std::min(slices, gemm_parts_floats_ / std::max<int64_t>(n_tok * n_out, 1));
  if (slices < 2) return one;
  const int64_t blocks = (nbt + slices - 1) / slices;
  return {(nbt + blocks - 1) / blocks, blocks};  // no empty slice
}

// One group of every format's GEMM kernel over a product of one row, one token and one zero block (a zeroed
// row of 256 bytes holds any format's block and parameters), enqueued: every limit a driver reports can allow
// a tile it then refuses (NVIDIA's OpenCL: CL_OUT_OF_RESOURCES for 128x64x2, exactly its 48 KiB of local
// memory; docs/PERF.md 2026-12-05 05:29).
bool OpenclBackend::gemm_launches() const {
  const std::vector<uint8_t> zeros(256, 0);
  const opencl::Buffer w = rt_.alloc(zeros.size(), CL_MEM_READ_WRITE, zeros.data());
  const opencl::Buffer x = rt_.alloc(32 * sizeof(float), CL_MEM_READ_WRITE, zeros.data());
  const opencl::Buffer y = rt_.alloc(sizeof(float));
  const cl_ulong row_bytes = zeros.size();
  const cl_int n_in = 32, one = 1;
  const size_t group[3] = {size_t(gemm_.wr), size_t(gemm_.wt), 1};
  bool launched = true;
  for (const opencl::Kernel& k : k_matmul_) {
    opencl::set_arg(k, 0, w);
    opencl::set_arg(k, 1, row_bytes);
    opencl::set_arg(k, 2, n_in);
    opencl::set_arg(k, 3, one);
    opencl::set_arg(k, 4, one);
    opencl::set_arg(k, 5, x);
    opencl::set_arg(k, 6, y);
    opencl::set_local_arg(k, 7, gemm_.local_bytes());
    opencl::set_arg(k, 8, one);
    launched = launched && rt_.try_launch(k, 3, group, group);
  }
  rt_.finish();
  rt_.reset_kernel_times();  // with profiling on, --profile's table starts from the model's launches
  return launched;
}

// [slices][n] (gemm_parts_) -> y, in slice order (gemm_split.cl).
void OpenclBackend::enqueue_split_sum(const GemmSplit& sp, int64_t n, const opencl::Buffer& y) {
  const opencl::Kernel& ks = k_gemm_split_sum_;
  const cl_int n_slices = cl_int(sp.slices), ni = cl_int(n);
  opencl::set_arg(ks, 0, gemm_parts_);
  opencl::set_arg(ks, 1, n_slices);
  opencl::set_arg(ks, 2, ni);
  opencl::set_arg(ks, 3, y);
  const size_t g[1] = {size_t(n)};
  rt_.launch(ks, 1, g, nullptr);
}

// The GEMM kernels' common launch (kernels/gemm.cl, gemm_q8.cl): one group per tile and K slice, a split
// product's slices summed after.
void OpenclBackend::enqueue_gemm(const opencl::Kernel& k, const DeviceWeight& dw, int64_t n_tok,
                                 const opencl::Buffer& x, size_t local_bytes, const opencl::Buffer& y) {
  const GemmSplit sp = gemm_split_for(dw.n_out, n_tok, dw.n_in);
  const cl_ulong row_bytes = dw.row_bytes;
  const cl_int n_in = cl_int(dw.n_in), n_out = cl_int(dw.n_out), nt = cl_int(n_tok);
  const cl_int blocks = cl_int(sp.blocks);
  opencl::set_arg(k, 0, dw.buf);
  opencl::set_arg(k, 1, row_bytes);
  opencl::set_arg(k, 2, n_in);
  opencl::set_arg(k, 3, n_out);
  opencl::set_arg(k, 4, nt);
  opencl::set_arg(k, 5, x);
  opencl::set_arg(k, 6, sp.slices > 1 ? gemm_parts_ : y);
  opencl::set_local_arg(k, 7, local_bytes);
  opencl::set_arg(k, 8, blocks);
  const size_t row_tiles = size_t((dw.n_out + gemm_.tr() - 1) / gemm_.tr());
  const size_t tok_tiles = size_t((n_tok + gemm_.tt() - 1) / gemm_.tt());
  const size_t global[3] = {row_tiles * size_t(gemm_.wr), tok_tiles * size_t(gemm_.wt), size_t(sp.slices)};
  const size_t local[3] = {size_t(gemm_.wr), size_t(gemm_.wt), 1};
  rt_.launch(k, 3, global, local);
  if (sp.slices > 1) enqueue_split_sum(sp, n_tok * dw.n_out, y);
}

void OpenclBackend::enqueue_matmul(const DeviceWeight& dw, int64_t n_tok, const opencl::Buffer& x,
                                   const opencl::Buffer& y) {
  const opencl::Kernel& k = matmul_kernel(dw.fmt);
  if (gemm_.on()) return enqueue_gemm(k, dw, n_tok, x, gemm_.local_bytes(), y);
  // About one 32-weight block per item (idle items would only lengthen the reduction), but at least one
  // SIMD width (the preferred multiple): a group of one item is legal yet trips some compilers (PoCL 5.0
  // fails to link such a kernel when it uses subgroups).
  const int64_t want = std::clamp<int64_t>(dw.n_in / 32, int64_t(std::min<size_t>(k.wg_multiple, 64)), 64);
  const size_t wg = reduction_wg(k, size_t(want), 1);
  const cl_ulong row_bytes = dw.row_bytes;
  const cl_int n_in = cl_int(dw.n_in), n_out = cl_int(dw.n_out);
  opencl::set_arg(k, 0, dw.buf);
  opencl::set_arg(k, 1, row_bytes);
  opencl::set_arg(k, 2, n_in);
  opencl::set_arg(k, 3, n_out);
  const cl_int nt = cl_int(n_tok);
  opencl::set_arg(k, 4, nt);
  opencl::set_arg(k, 5, x);
  opencl::set_arg(k, 6, y);
  opencl::set_local_arg(k, 7, wg * sizeof(float));
  const size_t tiles = size_t((n_tok + kMatmulTile - 1) / kMatmulTile);
  const size_t global[2] = {size_t(dw.n_out) * wg, tiles}, local[2] = {wg, 1};
  rt_.launch(k, 2, global, local);
}

bool OpenclBackend::uses_q8(const DeviceWeight& dw, int64_t n_tok) const {
  const opencl::Kernel& k = k_matmul_q8_[int(dw.fmt)];
  return q8_dot_ >= 0 && n_tok > 1 && k.handle && !k.on_cpu && !k_quantize_q8_.on_cpu && !dw.img &&
         dw.n_in % 32 == 0;
}

bool OpenclBackend::uses_q8_matvec(const DeviceWeight& dw, bool glu) const {
  const opencl::Kernel& k = (glu ? k_matvec_glu_q8_ : k_matvec_q8_)[int(dw.fmt)];
  return q8_dot_ >= 0 && opts_.int_matvec && k.handle && !k.on_cpu && !k_quantize_q8_.on_cpu && !dw.img &&
         dw.n_in % 32 == 0;
}

void OpenclBackend::rounded_matmul_input(const Weight& w, const float* x, int64_t n_tok, float* out) const {
  const DeviceWeight& dw = find_weight(w, "rounded_matmul_input");
  if (n_tok == 1 && opts_.one_token_matvec ? uses_q8_matvec(dw, false) : uses_q8(dw, n_tok))
    return round_activations_q8(x, n_tok * w.n_in, out);
  Backend::rounded_matmul_input(w, x, n_tok, out);
}

void OpenclBackend::enqueue_quantize_q8(const opencl::Buffer& x, int64_t n_in, int64_t n_tok, int slot) {
  if (n_tok * n_in > opts_.max_in_elems || n_tok > opts_.max_tokens || (slot != 0 && n_tok != 1))
    fail("internal: a rounded input of {} tokens x {} past the backend's {} tokens and {} elements", n_tok,
         n_in, opts_.max_tokens, opts_.max_in_elems);
  if (rounded_.slot == slot) rounded_ = {};
  const opencl::Kernel& k = k_quantize_q8_;
  const cl_int ni = cl_int(n_in), nt = cl_int(n_tok);
  opencl::set_arg(k, 0, x);
  opencl::set_arg(k, 1, ni);
  opencl::set_arg(k, 2, nt);
  opencl::set_arg(k, 3, q8_slot(slot));
  const size_t global[2] = {size_t(n_in / 32), size_t(n_tok)};
  rt_.launch(k, 2, global, nullptr);
}

int OpenclBackend::rounded_slot(const void* x, int64_t n) const {
  return x && rounded_.y == static_cast<const uint8_t*>(x) && rounded_.n == n ? rounded_.slot : -1;
}

void OpenclBackend::forget_rounding(const void* p, size_t bytes) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  if (rounded_.y && b < rounded_.y + size_t(rounded_.n) * sizeof(float) && rounded_.y < b + bytes)
    rounded_ = {};
}

bool OpenclBackend::rounds_output(const float* y, int64_t n) {
  return q8_dot_ >= 0 && opts_.int_matvec && round_in_producers_ && !k_quantize_q8_.on_cpu && n % 32 == 0 &&
         n <= opts_.max_in_elems && is_mirror_start(y, n);
}

int OpenclBackend::enqueue_round_decode_input(const opencl::Buffer& x, int64_t n) {
  const int slot = rounded_.slot == 0 ? 1 : 0;
  enqueue_quantize_q8(x, n, 1, slot);
  return slot;
}

void OpenclBackend::enqueue_matmul_q8(const DeviceWeight& dw, int64_t n_tok, const opencl::Buffer& y) {
  // One stage of tiles: 10 words a row or token of the tile (kernels/gemm_q8.cl).
  const size_t local = size_t(10 * (gemm_.tr() + gemm_.tt())) * sizeof(uint32_t);
  enqueue_gemm(k_matmul_q8_[int(dw.fmt)], dw, n_tok, q8x_, local, y);
}

void OpenclBackend::enqueue_matvec(const DeviceWeight& dw, const opencl::Buffer& x, const opencl::Buffer& y,
                                   const PendingNorm* scale, const float* x_host) {
  if (!dw.float_rows()) {
    const DeviceWeight* dws[1] = {&dw};
    const opencl::Buffer* ys[1] = {&y};
    enqueue_matvec_blocks(dws, ys, 1, x, scale, nullptr, nullptr, x_host);
    return;
  }
  if (scale) fail("internal: a float-row matvec given a pending norm");
  constexpr int64_t kRows = 4;  // TL_MV_ROWS (common.cl)
  const opencl::Kernel& k = matvec_kernel(dw.fmt);
  // About one 4-float chunk per item per pass, at least one SIMD width, at most 64.
  const int64_t want = std::clamp<int64_t>(dw.n_in / 4, int64_t(std::min<size_t>(k.wg_multiple, 64)), 64);
  const size_t wg = reduction_wg(k, size_t(want), 4);
  const cl_ulong row_bytes = dw.row_bytes;
  const cl_int n_in = cl_int(dw.n_in), n_out = cl_int(dw.n_out);
  opencl::set_arg(k, 0, dw.buf);
  opencl::set_arg(k, 1, row_bytes);
  opencl::set_arg(k, 2, n_in);
  opencl::set_arg(k, 3, n_out);
  opencl::set_arg(k, 4, x);
  opencl::set_arg(k, 5, y);
  opencl::set_local_arg(k, 6, wg * 4 * sizeof(float));
  const size_t global[1] = {size_t((dw.n_out + kRows - 1) / kRows) * wg}, local[1] = {wg};
  rt_.launch(k, 1, global, local);
}

size_t OpenclBackend::matvec_block_wg(const opencl::Kernel& k, int64_t n_in) const {
  // About one half block (16 weights) per item per pass, at least one SIMD width, at most 64 for rows
  // shorter than 8192 and 128 from there on. Measured on the H200 (docs/OPENCL.md): 64 items beat 128 over
  // a 7B-shaped decode whose rows are mostly 4096 long (274 against 265 t/s), while rows of 11008 and 14336
  // ran 3-13% faster with 128 (fewer passes per item) and those of 4096 were even or slower. One rule for
  // the matvec and the GLU kernel, so that both sum the same units in the same order.
  // --cl-matvec-items fixes the size instead (within the kernel's and the local memory's limits).
  if (opts_.matvec_items > 0) return reduction_wg(k, size_t(opts_.matvec_items), 4);
  const int64_t cap = n_in >= 8192 ? 128 : 64;
  const int64_t want = std::clamp<int64_t>(n_in / 16, int64_t(std::min<size_t>(k.wg_multiple, cap)), cap);
  return reduction_wg(k, size_t(want), 4);
}

namespace {

// The x_scale argument of the block-format matvec and GLU kernels (quants.cl): the buffer whose first float
// is the pending norm's scale, or null when x carries none.
void set_scale_arg(const opencl::Kernel& k, cl_uint i, const opencl::Buffer& part, bool scaled) {
  if (scaled)
    opencl::set_arg(k, i, part);
  else
    opencl::set_null_arg(k, i);
}

}  // namespace

void OpenclBackend::set_rounding_args(const opencl::Kernel& k, cl_uint i, int y_slot) const {
  if (y_slot >= 0) {
    opencl::set_arg(k, i, q8_slot(y_slot));
    opencl::set_arg(k, i + 1, q8_xch_);
    opencl::set_arg(k, i + 2, q8_count_);
  } else {
    for (cl_uint j = i; j < i + 3; ++j) opencl::set_null_arg(k, j);
  }
}

int OpenclBackend::enqueue_matvec_blocks(const DeviceWeight* const* dws, const opencl::Buffer* const* ys,
                                         int n, const opencl::Buffer& x, const PendingNorm* scale,
                                         const Residual* res, const RopeKv* rope, const float* x_host,
                                         bool round_out) {
  if (n < 1 || n > 3) fail("internal: one matvec launch takes 1 to 3 weights, not {}", n);
  if (res && n != 1) fail("internal: a residual product takes one weight, not {}", n);
  if (rope && (n != 3 || res)) fail("internal: RoPE in a matvec launch takes q, k, v alone");
  constexpr int64_t kRows = 4;  // TL_MVB_ROWS (quants.cl)
  const DeviceWeight& dw = *dws[0];
  // The integer products take x rounded: in the slot where the product before left it (rounded_), else
  // rounded into the other slot before the launch. A pending norm's scale still multiplies their sums (the
  // rounding is of x as it is, the scale a factor of every block's d).
  const bool q8 = uses_q8_matvec(dw, false);
  const opencl::Kernel& k = q8 ? k_matvec_q8_[int(dw.fmt)] : matvec_kernel(dw.fmt);
  int x_slot = q8 ? rounded_slot(x_host, dw.n_in) : -1;
  if (q8 && x_slot < 0) x_slot = enqueue_round_decode_input(x, dw.n_in);
  const int y_slot = res && round_out ? (x_slot >= 0 ? 1 - x_slot : 0) : -1;
  const size_t wg = matvec_block_wg(k, dw.n_in);
  const cl_ulong row_bytes = dw.row_bytes;
  const cl_int n_in = cl_int(dw.n_in);
  size_t groups = 0;
  for (int i = 0; i < 3; ++i) {
    // Unused slots repeat the first weight and output with no rows: no group reads or writes them.
    const DeviceWeight& di = *dws[i < n ? i : 0];
    if (i < n && (di.fmt != dw.fmt || di.row_bytes != dw.row_bytes || di.n_in != dw.n_in))
      fail("internal: weights of one matvec launch differ in format or row size");
    const cl_int rows = i < n ? cl_int(di.n_out) : 0;
    opencl::set_arg(k, cl_uint(i), di.buf);
    opencl::set_arg(k, cl_uint(5 + i), rows);
    opencl::set_arg(k, cl_uint(9 + i), *ys[i < n ? i : 0]);
    groups += size_t((rows + kRows - 1) / kRows);
  }
  opencl::set_arg(k, 3, row_bytes);
  opencl::set_arg(k, 4, n_in);
  opencl::set_arg(k, 8, q8 ? q8_slot(x_slot) : x);
  opencl::set_local_arg(k, 12, std::max<size_t>(wg, 8) * 4 * sizeof(float));
  if (scale && scale->n != dw.n_in)
    fail("internal: a norm of {} floats scales rows of {}", scale->n, dw.n_in);
  set_scale_arg(k, 13, norm_part_, scale != nullptr);
  const float eps = res ? res->eps : 0.0f;
  if (res) {
    opencl::set_arg(k, 14, *res->acc);
    opencl::set_arg(k, 15, *res->g);
    opencl::set_arg(k, 16, norm_part_);
    opencl::set_arg(k, 17, norm_count_);
  } else {
    for (cl_uint i = 14; i < 18; ++i) opencl::set_null_arg(k, i);
  }
  opencl::set_arg(k, 18, eps);
  const cl_int hd = rope ? rope->head_dim : 0, half = rope ? rope->n_half : 0,
               ctx = rope ? cl_int(rope->n_ctx) : 0;
  const cl_ulong off = rope ? rope->layer_off : 0;
  if (rope) {
    opencl::set_arg(k, 19, *rope->cs);
    opencl::set_arg(k, 22, *rope->cache);
    opencl::set_arg(k, 25, *rope->pos);
  } else {
    for (cl_uint i : {19u, 22u, 25u}) opencl::set_null_arg(k, i);
  }
  opencl::set_arg(k, 20, hd);
  opencl::set_arg(k, 21, half);
  opencl::set_arg(k, 23, off);
  opencl::set_arg(k, 24, ctx);
  set_rounding_args(k, 26, y_slot);
  const size_t global[1] = {groups * wg}, local[1] = {wg};
  rt_.launch(k, 1, global, local);
  return y_slot;
}

int OpenclBackend::enqueue_matvec_glu(const DeviceWeight& g, const DeviceWeight& u, FfnAct act,
                                      const opencl::Buffer& x, const opencl::Buffer& y,
                                      const PendingNorm* scale, const float* x_host, bool round_out) {
  constexpr int64_t kRows = 2;  // rows of each matrix per group (TL_MATVEC_GLU_BLOCK32)
  const bool q8 = uses_q8_matvec(g, true);
  const opencl::Kernel& k = q8 ? k_matvec_glu_q8_[int(g.fmt)] : k_matvec_glu_[int(g.fmt)];
  int x_slot = q8 ? rounded_slot(x_host, g.n_in) : -1;
  if (q8 && x_slot < 0) x_slot = enqueue_round_decode_input(x, g.n_in);
  const int y_slot = round_out ? (x_slot >= 0 ? 1 - x_slot : 0) : -1;
  const size_t wg = matvec_block_wg(k, g.n_in);
  const cl_ulong row_bytes = g.row_bytes;
  const cl_int n_in = cl_int(g.n_in), n_out = cl_int(g.n_out), gelu = act == FfnAct::SiLU ? 0 : 1;
  opencl::set_arg(k, 0, g.buf);
  opencl::set_arg(k, 1, u.buf);
  opencl::set_arg(k, 2, row_bytes);
  opencl::set_arg(k, 3, n_in);
  opencl::set_arg(k, 4, n_out);
  opencl::set_arg(k, 5, q8 ? q8_slot(x_slot) : x);
  opencl::set_arg(k, 6, y);
  opencl::set_arg(k, 7, gelu);
  opencl::set_local_arg(k, 8, std::max<size_t>(wg, 8) * 4 * sizeof(float));
  if (scale && scale->n != g.n_in) fail("internal: a norm of {} floats scales rows of {}", scale->n, g.n_in);
  set_scale_arg(k, 9, norm_part_, scale != nullptr);
  set_rounding_args(k, 10, y_slot);
  const size_t global[1] = {size_t((g.n_out + kRows - 1) / kRows) * wg}, local[1] = {wg};
  rt_.launch(k, 1, global, local);
  return y_slot;
}

void OpenclBackend::matmul_glu(const Weight& w_gate, const Weight& w_up, const float* x, int64_t n_tok,
                               FfnAct act, float* out, float* up) {
  if (n_tok == 1 && opts_.one_token_matvec) {
    const DeviceWeight& g = find_weight(w_gate, "matmul");
    const DeviceWeight& u = find_weight(w_up, "matmul");
    const opencl::Kernel& k = k_matvec_glu_[int(g.fmt)];
    if (k.handle && !k.on_cpu && !g.img && !u.img && u.fmt == g.fmt && u.row_bytes == g.row_bytes &&
        u.n_in == g.n_in && u.n_out == g.n_out) {
      const Weight* ws[2] = {&w_gate, &w_up};
      const std::optional<PendingNorm> scale = scaled_input(ws, 2, x, g.n_in, n_tok);
      const opencl::Buffer& xb = dev_in(x, g.n_in, in_a_, "matmul", scale.has_value());
      const opencl::Buffer& yb = dev_out(out, g.n_out, out_, "matmul");
      const int slot =
          enqueue_matvec_glu(g, u, act, xb, yb, scale ? &*scale : nullptr, x, rounds_output(out, g.n_out));
      dev_done(out, g.n_out, yb);
      if (slot >= 0) rounded_ = {reinterpret_cast<const uint8_t*>(out), g.n_out, slot};
      return;
    }
  }
  // Prefill, images, float rows, a failed kernel: the two products and the glu kernel.
  Backend::matmul_glu(w_gate, w_up, x, n_tok, act, out, up);
}

void OpenclBackend::matmul(const Weight& w, const float* x, int64_t n_tok, float* y) {
  const Weight* ws[1] = {&w};
  float* ys[1] = {y};
  matmul_shared(ws, ys, 1, x, n_tok);
}

void OpenclBackend::matmul_shared(const Weight* const* ws, float* const* ys, int n, const float* x,
                                  int64_t n_tok) {
  if (n <= 0 || n_tok <= 0) return;
  const int64_t n_in = ws[0]->n_in;
  for (int i = 0; i < n; ++i) {
    if (ws[i]->n_in != n_in)
      fail("matmul_shared: weight {} reads {} inputs, not {}", ws[i]->name, ws[i]->n_in, n_in);
  }
  // x may be a norm whose scale the product before left pending: taken by the kernels, or applied now.
  const std::optional<PendingNorm> pending = scaled_input(ws, n, x, n_in, n_tok);
  const PendingNorm* scale = pending ? &*pending : nullptr;
  const opencl::Buffer* xb = nullptr;  // placed on the device by the first weight that runs there
  bool rounded = false;                // xb rounded into q8x_ (the integer GEMM's input), once for all
  for (int i = 0; i < n; ++i) {
    const DeviceWeight& dw = find_weight(*ws[i], "matmul");
    // Decode: up to three block-format weights of one format whose outputs are device arrays of their own
    // go in one launch (enqueue_matvec_blocks): each launch costs a few microseconds on its own.
    if (const int run = matvec_run(ws + i, ys + i, n - i, n_tok); run > 1) {
      if (!xb) xb = &dev_in(x, n_in, in_a_, "matmul", scale != nullptr);
      const DeviceWeight* dws[3];
      const opencl::Buffer* ybs[3];
      for (int j = 0; j < run; ++j) {
        dws[j] = &find_weight(*ws[i + j], "matmul");
        ybs[j] = &dev_out(ys[i + j], dws[j]->n_out, out_, "matmul");
      }
      enqueue_matvec_blocks(dws, ybs, run, *xb, scale, nullptr, nullptr, x);
      for (int j = 0; j < run; ++j) dev_done(ys[i + j], dws[j]->n_out, *ybs[j]);
      i += run - 1;
      continue;
    }
    // A weight held in an image (--gpu-memory image) takes the image kernels (matmul_image.cpp).
    const bool img = bool(dw.img);
    // One token takes the matvec kernel unless it failed the self-check (or a test turned it off); the CPU
    // runs what no kernel can.
    const bool vec = n_tok == 1 && opts_.one_token_matvec &&
                     !(img ? matvec_image_kernel(dw.fmt) : matvec_kernel(dw.fmt)).on_cpu;
    if (!vec && !uses_q8(dw, n_tok) && (img ? matmul_image_kernel(dw.fmt) : matmul_kernel(dw.fmt)).on_cpu) {
      host_in(x, n_tok * n_in);
      host_out(ys[i], n_tok * dw.n_out);
      // The host weight (the mapped file) is still there; in a converted mode upload_model gave cpu_ the
      // same conversion.
      cpu_->matmul(*ws[i], x, n_tok, ys[i]);
      continue;
    }
    if (!xb) xb = &dev_in(x, n_tok * n_in, in_a_, "matmul", scale != nullptr);
    const opencl::Buffer& yb = dev_out(ys[i], n_tok * dw.n_out, out_, "matmul");
    if (vec) {
      img ? enqueue_matvec_image(dw, *xb, yb) : enqueue_matvec(dw, *xb, yb, scale, x);
    } else {
      if (img) {
        enqueue_matmul_image(dw, n_tok, *xb, yb);
      } else if (uses_q8(dw, n_tok)) {
        if (!rounded) enqueue_quantize_q8(*xb, n_in, n_tok);
        rounded = true;
        enqueue_matmul_q8(dw, n_tok, yb);
      } else {
        enqueue_matmul(dw, n_tok, *xb, yb);
      }
    }
    dev_done(ys[i], n_tok * dw.n_out, yb);
  }
}

int OpenclBackend::matvec_run(const Weight* const* ws, float* const* ys, int n, int64_t n_tok) {
  if (n_tok != 1 || !opts_.one_token_matvec) return 1;
  const DeviceWeight& first = find_weight(*ws[0], "matmul");
  auto fits = [&](const DeviceWeight& dw, float* y) {
    // The output must be the start of a mirrored array: dev_out then returns that array's own buffer, not
    // the shared staging buffer.
    return !dw.img && !dw.float_rows() && dw.fmt == first.fmt && dw.row_bytes == first.row_bytes &&
           !matvec_kernel(dw.fmt).on_cpu && is_mirror_start(y, dw.n_out);
  };
  int run = 0;
  while (run < std::min(n, 3) && fits(find_weight(*ws[run], "matmul"), ys[run])) ++run;
  return std::max(run, 1);
}

std::optional<OpenclBackend::PendingNorm> OpenclBackend::scaled_input(const Weight* const* ws, int n,
                                                                      const float* x, int64_t n_in,
                                                                      int64_t n_tok) {
  if (!pending_.y || reinterpret_cast<const uint8_t*>(x) != pending_.y || n_tok != 1 || n_in != pending_.n ||
      !opts_.one_token_matvec)
    return std::nullopt;  // dev_in settles a pending norm that x meets
  for (int i = 0; i < n; ++i) {
    const DeviceWeight& dw = find_weight(*ws[i], "matmul");
    if (dw.img || dw.float_rows() || matvec_kernel(dw.fmt).on_cpu) {
      settle_norm(x, size_t(n_in) * sizeof(float), false);
      return std::nullopt;
    }
  }
  return pending_;
}

void OpenclBackend::matmul_add_rmsnorm(const Weight& wo, const float* x, int64_t n_tok, float* o, float* acc,
                                       const float* g, float* y, float eps) {
  const int64_t n = wo.n_out;
  if (n_tok == 1 && opts_.fuse_norms && opts_.one_token_matvec && !k_rms_scale_.on_cpu &&
      n <= opts_.max_width && y != acc && y != x && is_mirror_start(acc, n) && is_mirror_start(y, n)) {
    const DeviceWeight& dw = find_weight(wo, "matmul");
    if (!dw.img && !dw.float_rows() && !matvec_kernel(dw.fmt).on_cpu) {
      const opencl::Buffer& xb = dev_in(x, dw.n_in, in_a_, "matmul_add_rmsnorm");
      const opencl::Buffer& ab = dev_in(acc, n, in_b_, "matmul_add_rmsnorm");  // the mirror's own buffer
      const opencl::Buffer& gb = norm_weight(g, n);
      const opencl::Buffer& yb = dev_out(y, n, out_, "matmul_add_rmsnorm");  // forgets a norm pending there
      const DeviceWeight* dws[1] = {&dw};
      const opencl::Buffer* ybs[1] = {&yb};
      const Residual res{&ab, &gb, eps};
      const int slot = enqueue_matvec_blocks(dws, ybs, 1, xb, nullptr, &res, nullptr, x, rounds_output(y, n));
      dev_done(acc, n, ab);
      dev_done(y, n, yb);
      pending_ = {reinterpret_cast<const uint8_t*>(y), n};
      if (slot >= 0) rounded_ = {reinterpret_cast<const uint8_t*>(y), n, slot};
      return;
    }
  }
  Backend::matmul_add_rmsnorm(wo, x, n_tok, o, acc, g, y, eps);
}

}  // namespace tilellm
