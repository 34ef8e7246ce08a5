// --degrade tile-mask=F on the CPU backend (backends/cpu/tile_mask.cpp): the weakest row tiles of the
// feed-forward gate/up matrices are chosen at load, their rows read as zero while masking is on, every other
// output is bit for bit the unmasked one, and with masking off nothing differs at all.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "base/cpu_isa.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "format/quants.h"

namespace tilellm {
namespace {

struct Owned {
  std::vector<uint8_t> bytes;
  Weight w;
};

// Random Q8_0 rows (codes and positive scales), with the rows of the tiles in `weak` scaled down 100x.
Owned q8_rows(const char* name, int64_t n_in, int64_t n_out, std::vector<int64_t> weak, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.01f, 0.05f);
  Owned o;
  o.w.name = name;
  o.w.type = GgmlType::Q8_0;
  o.w.n_in = n_in;
  o.w.n_out = n_out;
  o.w.row_bytes = row_size(GgmlType::Q8_0, n_in);
  o.bytes.resize(o.w.row_bytes * size_t(n_out));
  for (auto& b : o.bytes) b = uint8_t(byte(rng));
  const size_t bs = type_traits(GgmlType::Q8_0).type_size;
  for (int64_t r = 0; r < n_out; ++r) {
    const bool is_weak = std::find(weak.begin(), weak.end(), r / kTileRows) != weak.end();
    for (size_t off = 0; off < o.w.row_bytes; off += bs) {
      const uint16_t d = fp32_to_fp16(scale(rng) * (is_weak ? 0.01f : 1.0f));
      std::memcpy(&o.bytes[size_t(r) * o.w.row_bytes + off], &d, 2);
    }
  }
  o.w.data = o.bytes.data();
  return o;
}

TEST(TileMask, masks_the_weakest_feed_forward_tiles_only_while_on) {
  select_cpu_isa("best");  // the tiles need a vector kernel; an earlier test of this program may pick another
  const int64_t n_in = 96, n_ff = 83, n_tok = 5;  // 6 tiles, the last one 3 rows
  Owned up = q8_rows("blk.0.ffn_up.weight", n_in, n_ff, {1, 4}, 11);
  Owned q = q8_rows("blk.0.attn_q.weight", n_in, n_ff, {0, 2}, 12);  // weak too, but not feed-forward
  WeightSet ws;
  ws.matrices = {&up.w, &q.w};
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n_tok * n_in));
  for (auto& v : x) v = nd(rng);

  ThreadPool pool(2);
  CpuBackend plain(pool, ActivationMode::Quantized, n_tok * n_in);
  plain.prepare_weights(ws, WeightsMode::Native);
  CpuBackend masked(pool, ActivationMode::Quantized, n_tok * n_in);
  masked.set_tile_mask_fraction(0.34);  // floor(0.34 * 6) = 2 tiles
  masked.prepare_weights(ws, WeightsMode::Native);
  EXPECT_FALSE(plain.has_tile_mask());
  ASSERT_TRUE(masked.has_tile_mask()) << "Q8_0 is tiled on every CPU with a vector tile kernel";

  for (int64_t nt : {int64_t(1), n_tok}) {
    for (bool on : {false, true, false}) {
      masked.set_tile_mask(on);
      for (const Owned* o : {&up, &q}) {
        std::vector<float> a(size_t(nt * n_ff), -7.0f), b(size_t(nt * n_ff), -7.0f);
        plain.matmul(o->w, x.data(), nt, a.data());
        masked.matmul(o->w, x.data(), nt, b.data());
        for (int64_t t = 0; t < nt; ++t) {
          for (int64_t r = 0; r < n_ff; ++r) {
            const size_t i = size_t(t * n_ff + r);
            const bool zeroed = on && o == &up && (r / kTileRows == 1 || r / kTileRows == 4);
            if (zeroed) {
              ASSERT_EQ(b[i], 0.0f) << o->w.name << " row " << r;
            } else {
              ASSERT_EQ(b[i], a[i]) << o->w.name << " row " << r << " masking " << on;
              ASSERT_NE(a[i], 0.0f);
            }
          }
        }
      }
    }
  }
  // Gate and up through one shared call (the feed-forward input) mask each matrix by its own tiles.
  Owned gate = q8_rows("blk.0.ffn_gate.weight", n_in, n_ff, {5}, 13);
  WeightSet ws2;
  ws2.matrices = {&gate.w, &up.w};
  CpuBackend m2(pool, ActivationMode::Quantized, n_tok * n_in);
  m2.set_tile_mask_fraction(0.2);  // 1 tile each: gate's tile 5 (rows 80-82), up's weakest of 1 and 4
  m2.prepare_weights(ws2, WeightsMode::Native);
  m2.set_tile_mask(true);
  std::vector<float> g(size_t(n_tok * n_ff)), u(size_t(n_tok * n_ff));
  const Weight* both[2] = {&gate.w, &up.w};
  float* ys[2] = {g.data(), u.data()};
  m2.matmul_shared(both, ys, 2, x.data(), n_tok);
  int zero_gate = 0, zero_up = 0;
  for (int64_t r = 0; r < n_ff; ++r) zero_gate += g[size_t(r)] == 0.0f, zero_up += u[size_t(r)] == 0.0f;
  EXPECT_EQ(zero_gate, 3);
  EXPECT_EQ(zero_up, 16);
  EXPECT_EQ(g[80], 0.0f);
}

}  // namespace
}  // namespace tilellm
