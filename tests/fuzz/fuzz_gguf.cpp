// libFuzzer target: any bytes as a GGUF file. Whatever opens must be readable to its last byte (every
// tensor's bytes and every metadata value), and what reads it next — the model's hyper-parameters, the
// binding of its tensors, its tokenizer — must end in a tilellm::Error or succeed. Anything else (a crash,
// a sanitizer report, another exception, an allocation past libFuzzer's limit) is a finding.
// Built and run by tests/fuzz/run_fuzz.sh (clang, ASan + UBSan).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "base/error.h"
#include "format/gguf.h"
#include "model/config.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace {

// The file every input is written to (the reader maps files), removed once mapped; one per process.
const std::string& input_path() {
  static const std::string p = "/tmp/tilellm_fuzz_gguf_" + std::to_string(::getpid()) + ".gguf";
  return p;
}

// Where sums of what was read go, so that the reads cannot be optimised away.
volatile uint64_t g_sink = 0;

void read_everything(const tilellm::GgufFile& f) {
  uint64_t sum = 0;
  for (const auto& t : f.tensors()) {
    for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
  }
  for (const auto& [key, v] : f.metadata()) {
    sum += key.size() + v.str.size() + v.count;
    for (std::string_view s : v.strings) sum += s.empty() ? 0 : uint8_t(s.back());
    if (v.type == tilellm::GgufType::ARRAY && v.array_data && v.count > 0) sum += v.array_data[0];
  }
  g_sink = g_sink + sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (std::FILE* out = std::fopen(input_path().c_str(), "wb")) {
    std::fwrite(data, 1, size, out);
    std::fclose(out);
  } else {
    return 0;
  }
  std::unique_ptr<tilellm::GgufFile> f;
  try {
    f = tilellm::GgufFile::open(input_path());
  } catch (const tilellm::Error&) {
  }
  std::remove(input_path().c_str());  // the mapping stays; no file is left behind
  if (!f) return 0;
  try {
    read_everything(*f);
    try {
      const tilellm::ModelConfig c = tilellm::ModelConfig::from_gguf(*f);
      tilellm::ModelWeights::bind(*f, c);
    } catch (const tilellm::Error&) {
    }
    auto tok = tilellm::Tokenizer::from_gguf(*f);
    const std::vector<int32_t> ids = tok->encode("Hello, world! <s> 123 ünïcödé", true, true);
    g_sink = g_sink + tok->decode(ids, true).size();
  } catch (const tilellm::Error&) {
  }
  return 0;
}
