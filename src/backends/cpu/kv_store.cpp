// Writes the K and V rows of new tokens into the FB-KV cache at their positions
// (converting to the cache type).
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/isa_target.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tilellm {
namespace {

// Rounds n floats to halves, nearest-even: vcvtps2ph where the running ISA has F16C (the same rounding as
// fp32_to_fp16, eight at a time), the portable conversion for the rest.
int64_t to_f16_scalar(const float*, uint16_t*, int64_t) {
  return 0;  // the loop below converts everything
}
#if TILELLM_ISA_COMPILES(AVX2)
TILELLM_ISA_FN(AVX2) int64_t to_f16_f16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  return i;
}
#endif
using ToF16 = int64_t (*)(const float*, uint16_t*, int64_t);
TILELLM_ISA_PROVIDER(ToF16, avx2_to_f16, AVX2, to_f16_f16c)

void to_f16(const float* src, uint16_t* dst, int64_t n) {
  static const IsaTable<ToF16> t = {{CpuIsa::Scalar, to_f16_scalar}, {CpuIsa::Avx2, avx2_to_f16()}};
  int64_t i = t.get()(src, dst, n);
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

}  // namespace

void CpuBackend::kv_store(KvCache& kv, int64_t layer, const float* k, const float* v, const int32_t* pos,
                          int64_t n_tok) {
  if (layer < 0 || layer >= kv.n_layer())
    fail("kv_store: layer {} outside the cache's {}", layer, kv.n_layer());
  const int64_t d = kv.kv_dim();
  for (int64_t t = 0; t < n_tok; ++t) {
    if (pos[t] < 0 || pos[t] >= kv.n_ctx())
      fail("position {} is outside the KV cache of {}", pos[t], kv.n_ctx());
  }
  for (int kind = 0; kind < 2; ++kind) {
    const float* src = kind == 0 ? k : v;
    uint8_t* plane = kv.plane(layer, kind);
    for (int64_t t = 0; t < n_tok; ++t) {
      uint8_t* dst = plane + size_t(pos[t]) * kv.row_bytes();
      if (kv.type() == GgmlType::F32) {
        std::memcpy(dst, src + t * d, size_t(d) * sizeof(float));
      } else {
        to_f16(src + t * d, reinterpret_cast<uint16_t*>(dst), d);
      }
    }
  }
}

}  // namespace tilellm
