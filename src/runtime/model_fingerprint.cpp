#include "runtime/model_fingerprint.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "format/gguf.h"
#include "model/model.h"

namespace tilellm {

uint64_t model_fingerprint(const Model& m) {
  constexpr size_t kSampleBytes = 4096;
  const GgufFile& f = m.file();
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  size_t header = f.file_size();
  for (const GgufTensor& t : f.tensors()) header = std::min(header, size_t(t.data - f.bytes()));
  XXH3_64bits_update(&st, f.bytes(), header);
  for (const GgufTensor& t : f.tensors()) {
    const size_t n = std::min(t.nbytes, kSampleBytes);
    XXH3_64bits_update(&st, t.data, n);
    XXH3_64bits_update(&st, t.data + t.nbytes - n, n);
  }
  return XXH3_64bits_digest(&st);
}

}  // namespace tilellm
