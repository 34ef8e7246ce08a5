// libFuzzer target: any bytes as text for the tokenizers of the test models (SmolLM2's byte-level BPE and
// Gemma 3's SentencePiece, read from models/ or $TILELLM_MODELS_DIR). The first byte picks the tokenizer and
// the flags (add_special, parse_special, render_special); the rest is the text. Every id must be inside the
// vocabulary and every piece and the decoded text must come out; for the BPE tokenizer without special
// tokens, the pieces put together must be the text's bytes exactly when the text is valid UTF-8 and every
// byte of it has a token (SmolLM2's vocabulary has none for a few control bytes, which llama.cpp's
// tokenizer, and so this one, drops).
// Built and run by tests/fuzz/run_fuzz.sh (clang, ASan + UBSan).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "base/error.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

std::unique_ptr<tilellm::Tokenizer> g_tok[2];
volatile size_t g_sink = 0;  // the decoded text's size goes here, so the decode cannot be optimised away
bool g_byte_has_token[256];  // the BPE tokenizer's: byte b's symbol (GPT-2's byte alphabet) is a token

std::unique_ptr<tilellm::Tokenizer> load(const char* file) {
  const char* env = std::getenv("TILELLM_MODELS_DIR");
  const std::filesystem::path dir =
      env ? std::filesystem::path(env) : std::filesystem::path(TILELLM_SOURCE_DIR) / "models";
  const std::string path = (dir / file).string();
  try {
    auto f = tilellm::GgufFile::open(path);
    return tilellm::Tokenizer::from_gguf(*f);
  } catch (const tilellm::Error& e) {
    std::fprintf(stderr, "fuzz_tokenizer: %s (run scripts/fetch_models.sh)\n", e.what());
    std::abort();
  }
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = uint8_t(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = uint8_t(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = cp << 6 | (d & 0x3f);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_tok[0] = load("SmolLM2-135M-Instruct.Q4_1.gguf");
  g_tok[1] = load("gemma-3-270m-q4_k_m.gguf");
  for (int b = 0; b < 256; ++b) {
    std::string sym;
    tilellm::unicode::append_utf8(sym, tilellm::unicode::byte_to_codepoint(uint8_t(b)));
    g_byte_has_token[b] = g_tok[0]->find_token(sym) >= 0;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t sel = data[0];
  const tilellm::Tokenizer& tok = *g_tok[sel & 1];
  const bool add_special = sel & 2, parse_special = sel & 4, render_special = sel & 8;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  std::string pieces;
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) {
      std::fprintf(stderr, "token id %d outside the vocabulary of %d\n", id, tok.n_vocab());
      std::abort();
    }
    pieces += tok.token_to_piece(id, true);
  }
  const std::string decoded = tok.decode(ids, render_special);
  bool every_byte = true;
  for (char c : text) every_byte = every_byte && g_byte_has_token[uint8_t(c)];
  if ((sel & 1) == 0 && !add_special && !parse_special && every_byte && valid_utf8(text) && pieces != text) {
    std::fprintf(stderr, "BPE pieces (%zu bytes) differ from the text (%zu bytes)\n", pieces.size(),
                 text.size());
    std::abort();
  }
  g_sink = g_sink + decoded.size();
  return 0;
}
