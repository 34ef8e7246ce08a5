// Random cases for the GPU backends' self-checks (check_cases.h).
#include "backends/check_cases.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "base/fp16.h"
#include "format/asym_quant.h"
#include "format/quants.h"

namespace tilellm {

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = d(rng);
    while (x == 0.0f);  // a zero would hide a missed write
  }
  return v;
}

// Random rows of a block type the kernels read: random quantized fields, sane half scales.
std::vector<uint8_t> random_rows(GgmlType t, int64_t n_in, int64_t n_out, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.004f, 0.05f), sym(-1.0f, 1.0f);
  std::vector<uint8_t> b(row_size(t, n_in) * size_t(n_out));
  for (uint8_t& x : b) x = uint8_t(byte(rng));
  const size_t bs = type_traits(t).type_size;
  auto put_half = [](uint8_t* p, float f) {
    const uint16_t h = fp32_to_fp16(f);
    std::memcpy(p, &h, 2);
  };
  for (size_t i = 0; i < b.size() / bs; ++i) {
    uint8_t* blk = b.data() + i * bs;
    if (t == GgmlType::F32) {
      const float f = sym(rng);
      std::memcpy(blk, &f, 4);
    } else if (t == GgmlType::F16) {
      put_half(blk, sym(rng));
    } else if (t == GgmlType::Q6_K) {
      put_half(blk + offsetof(BlockQ6_K, d), scale(rng) / 16.0f);  // d last; int8 sub-block scales
    } else {
      put_half(blk, scale(rng));                                    // Q4_0, Q4_1, Q8_0, Q4_K, Q5_K: d first
      if (t == GgmlType::Q4_1) put_half(blk + 2, 0.1f * sym(rng));  // Q4_1: then m
      if (t == GgmlType::Q4_K || t == GgmlType::Q5_K)
        put_half(blk + 2, scale(rng));  // Q4_K, Q5_K: then dmin (6-bit mins)
    }
  }
  return b;
}

// max |ref - got| / max |ref|; infinity when sizes differ or anything is NaN.
double relative_error(const std::vector<float>& ref, const std::vector<float>& got) {
  if (ref.size() != got.size()) return INFINITY;
  double err = 0.0, mag = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::abs(double(ref[i]) - double(got[i]));
    if (std::isnan(d)) return INFINITY;
    err = std::max(err, d);
    mag = std::max(mag, std::abs(double(ref[i])));
  }
  return err / std::max(mag, 1e-30);
}

Weight check_weight(GgmlType t, const uint8_t* data, int64_t n_in, int64_t n_out) {
  Weight w;
  w.name = "self-check " + std::string(type_name(t));
  w.type = t;
  w.data = data;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = row_size(t, n_in);
  return w;
}

ConvertedRows::ConvertedRows(WeightsMode mode, int64_t n_in, int64_t rows, std::mt19937& rng)
    : src(random_floats(size_t(n_in * rows), rng)), exact_values(src.size()) {
  const AsymFormat kind = mode == WeightsMode::Int4B64 ? AsymFormat::Int4B64 : AsymFormat::Int8B0;
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row_asym(kind, src.data() + r * n_in, n_in, exact_values.data() + r * n_in);
  w.name = std::string("self-check ") + weights_mode_name(mode);
  w.type = GgmlType::F32;
  w.data = reinterpret_cast<const uint8_t*>(src.data());
  w.n_in = n_in;
  w.n_out = rows;
  w.row_bytes = size_t(n_in) * sizeof(float);
  exact = w;
  exact.data = reinterpret_cast<const uint8_t*>(exact_values.data());
}

void cache_rows(const KvCache& ref, const uint8_t* dev, std::span<const int32_t> pos,
                std::vector<float>& want, std::vector<float>& have) {
  const bool f16 = ref.type() == GgmlType::F16;
  const size_t elem = f16 ? 2 : 4, row = size_t(ref.kv_dim()) * elem, plane = size_t(ref.n_ctx()) * row;
  auto value = [f16](const uint8_t* p) {
    if (f16) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return fp16_to_fp32(h);
    }
    float f;
    std::memcpy(&f, p, 4);
    return f;
  };
  auto take = [&](int kind, int64_t p) {
    const uint8_t* r = ref.plane(0, kind) + size_t(p) * row;
    const uint8_t* d = dev + size_t(kind) * plane + size_t(p) * row;
    for (size_t i = 0; i < row; i += elem) {
      want.push_back(value(r + i));
      have.push_back(value(d + i));
    }
  };
  for (int kind = 0; kind < 2; ++kind) {
    if (pos.empty()) {
      for (int64_t p = 0; p < ref.n_ctx(); ++p) take(kind, p);
    } else {
      for (int32_t p : pos) take(kind, p);
    }
  }
}

void check_elementwise(Backend& host, Backend& dev, int64_t norm_width, bool add_rows, std::mt19937& rng,
                       const std::function<void(ElementwiseOp, double)>& verdict) {
  {
    const int64_t rows = 3, n = norm_width;
    const std::vector<float> x = random_floats(size_t(rows * n), rng), w = random_floats(size_t(n), rng);
    std::vector<float> ref(x.size()), got(x.size());
    host.rmsnorm(x.data(), w.data(), ref.data(), rows, n, 1e-5f);
    dev.rmsnorm(x.data(), w.data(), got.data(), rows, n, 1e-5f);
    verdict(ElementwiseOp::Rmsnorm, relative_error(ref, got));
    const std::vector<float> r = random_floats(size_t(rows * n), rng);
    std::vector<float> acc_ref = x, acc_got = x;
    host.add(acc_ref.data(), r.data(), rows * n);
    host.rmsnorm(acc_ref.data(), w.data(), ref.data(), rows, n, 1e-5f);
    dev.add_rmsnorm(acc_got.data(), r.data(), w.data(), got.data(), rows, n, 1e-5f);
    verdict(ElementwiseOp::AddRmsnorm, std::max(relative_error(acc_ref, acc_got), relative_error(ref, got)));
  }
  {
    const int64_t n_tok = 3, heads = 2, hd = 16;
    const RopeTable table(8, hd, 10000.0f, 1.0f);
    const int32_t pos[3] = {7, 0, 3};
    double err = 0.0;
    for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
      std::vector<float> ref = random_floats(size_t(n_tok * heads * hd), rng), got = ref;
      host.rope(ref.data(), n_tok, heads, hd, hd, pos, table, mode);
      dev.rope(got.data(), n_tok, heads, hd, hd, pos, table, mode);
      err = std::max(err, relative_error(ref, got));
    }
    verdict(ElementwiseOp::Rope, err);
  }
  const int64_t n = 100;
  std::vector<float> g = random_floats(size_t(n), rng), u = random_floats(size_t(n), rng);
  for (float& v : g) v *= 6.0f;  // both tails of the activations
  for (FfnAct act : {FfnAct::SiLU, FfnAct::GeluTanh}) {
    std::vector<float> ref(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    host.glu(g.data(), u.data(), ref.data(), n, act);
    dev.glu(g.data(), u.data(), got.data(), n, act);
    verdict(act == FfnAct::SiLU ? ElementwiseOp::GluSilu : ElementwiseOp::GluGelu, relative_error(ref, got));
  }
  std::vector<float> ref = g, got = g;
  host.add(ref.data(), u.data(), n);
  dev.add(got.data(), u.data(), n);
  verdict(ElementwiseOp::Add, relative_error(ref, got));
  if (!add_rows) return;
  const std::vector<float> bias = random_floats(20, rng);
  ref = g, got = g;
  host.add_rows(ref.data(), bias.data(), 5, 20);
  dev.add_rows(got.data(), bias.data(), 5, 20);
  verdict(ElementwiseOp::AddRows, relative_error(ref, got));
}

}  // namespace tilellm
