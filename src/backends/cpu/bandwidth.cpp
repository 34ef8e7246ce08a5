// The CPU's memory probes for gemv-bw and bench --membw (backends/registry.h, MemoryProbe): a pure read
// (read_stream: four independent 512-bit load streams on AVX-512 CPUs, four 64-bit sums elsewhere, so the
// probe issues loads as wide as the kernels it is compared with) and a memcpy (read + write bytes counted),
// each split over the pool's threads in 1 MiB pieces. The cache is the last-level cache sysfs reports
// (64 MiB when it reports none); flush() writes every cache line of a buffer 1.5x that size.
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/registry.h"
#include "base/aligned.h"
#include "base/isa_target.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm {
namespace {

#if TILELLM_ISA_COMPILES(AVX512VNNI)
TILELLM_ISA_FN(AVX512VNNI) uint64_t read_stream_avx512(const uint8_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    a0 = _mm512_or_si512(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_or_si512(a1, _mm512_loadu_si512(p + i + 64));
    a2 = _mm512_or_si512(a2, _mm512_loadu_si512(p + i + 128));
    a3 = _mm512_or_si512(a3, _mm512_loadu_si512(p + i + 192));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_or_si512(_mm512_or_si512(a0, a1), _mm512_or_si512(a2, a3)));
  uint64_t r = 0;
  for (uint64_t v : lanes) r |= v;
  for (; i < n; ++i) r |= p[i];
  return r;
}
#endif

// Reads n bytes and returns a value that depends on every byte, so the reads cannot be optimised away.
uint64_t read_stream_scalar(const uint8_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, sizeof w);
    s0 += w[0];
    s1 += w[1];
    s2 += w[2];
    s3 += w[3];
  }
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}
using ReadFn = uint64_t (*)(const uint8_t*, size_t);
TILELLM_ISA_PROVIDER(ReadFn, avx512_read_stream, AVX512VNNI, read_stream_avx512)

uint64_t read_stream(const uint8_t* p, size_t n) {
  static const IsaTable<ReadFn> t = {{CpuIsa::Scalar, read_stream_scalar},
                                     {CpuIsa::Avx512Vnni, avx512_read_stream()}};
  return t.get()(p, n);
}

size_t llc_bytes() {
  for (int idx = 3; idx >= 2; --idx) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/size");
    std::string s;
    if (in >> s && !s.empty()) {
      size_t v = std::stoull(s);
      if (s.back() == 'K') v <<= 10;
      if (s.back() == 'M') v <<= 20;
      return v;
    }
  }
  return size_t(64) << 20;
}

class CpuProbe final : public MemoryProbe {
 public:
  explicit CpuProbe(ThreadPool& pool) : pool_(pool), llc_(llc_bytes()) {}

  size_t cache_bytes() const override { return llc_; }
  size_t max_buffer_bytes() const override { return SIZE_MAX; }

  double read_gbs(size_t bytes) override {
    const AlignedBuffer& src = buffer(src_, bytes);
    std::vector<uint64_t> sink(size_t(pool_.size()) * 8, 0);  // one cache line per thread
    const double s = timed(bytes, [&](int64_t b, int64_t e, int t) {
      sink[size_t(t) * 8] += read_stream(src.as<uint8_t>() + b, size_t(e - b));
    });
    volatile uint64_t keep = 0;
    for (uint64_t v : sink) keep = keep + v;
    return double(bytes) / s / 1e9;
  }

  double copy_gbs(size_t bytes) override {
    const AlignedBuffer& src = buffer(src_, bytes);
    const AlignedBuffer& dst = buffer(dst_, bytes);
    const double s = timed(bytes, [&](int64_t b, int64_t e, int) {
      std::memcpy(dst.as<uint8_t>() + b, src.as<uint8_t>() + b, size_t(e - b));
    });
    return 2.0 * double(bytes) / s / 1e9;
  }

  void flush() override {
    AlignedBuffer& f = buffer(flush_, llc_ * 3 / 2);
    uint8_t* p = f.as<uint8_t>();
    const int64_t lines = int64_t(f.size() / 64);
    pool_.parallel_for(lines, 4096, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) p[i * 64] = uint8_t(p[i * 64] + 1);
    });
  }

 private:
  // A buffer of exactly `bytes` bytes (zero-filled when made: every page is touched before any timing).
  static AlignedBuffer& buffer(AlignedBuffer& b, size_t bytes) {
    if (b.size() != bytes) b = AlignedBuffer(bytes);
    return b;
  }
  // Seconds f takes over [0, bytes) in 1 MiB pieces over the pool.
  template <class F>
  double timed(size_t bytes, F&& f) {
    constexpr int64_t kPiece = 1 << 20;
    const int64_t n = (int64_t(bytes) + kPiece - 1) / kPiece;
    const auto t0 = std::chrono::steady_clock::now();
    pool_.parallel_for(
        n, 1, [&](int64_t b, int64_t e, int t) { f(b * kPiece, std::min(e * kPiece, int64_t(bytes)), t); });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  ThreadPool& pool_;
  size_t llc_;
  AlignedBuffer src_, dst_, flush_;
};

}  // namespace

std::unique_ptr<MemoryProbe> make_cpu_memory_probe(ThreadPool& pool) {
  return std::make_unique<CpuProbe>(pool);
}

}  // namespace tilellm
