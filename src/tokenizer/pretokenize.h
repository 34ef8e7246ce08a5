// Byte-level BPE pre-tokenizers: split text into the words BPE merges within, as the regex named by
// `tokenizer.ggml.pre` does. Each regex is a hand-written matcher over code points (std::regex is slow and
// has no \p{..}); the splits equal llama.cpp's, including its quirks (e.g. `\s+(?!\S)` looks only inside the
// current fragment).
//
// A pre-tokenizer is a sequence of passes. The text starts as one fragment; each pass splits every fragment
// further, keeping both what its pattern matches and the gaps between matches. Passes never merge fragments.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tilellm {

enum class PreTokenizerKind {
  kDefault,  // "[\p{P}$+<=>^~|]+", then GPT-2's, then "\p{N}+", then "[0-9][0-9][0-9]"
  kGpt2,     // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kSmollm,   // "\p{N}" (every digit alone), then GPT-2's (StarCoder family)
  kLlama3,   // (?i:'s|..)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
             // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,    // as kLlama3 but \p{N} (one digit per word)
};

// Per-name settings llama.cpp attaches to a pre-tokenizer name.
struct PreTokenizerInfo {
  PreTokenizerKind kind = PreTokenizerKind::kDefault;
  bool clean_spaces = true;    // decode() removes the space before ?!., and some contractions
  bool ignore_merges = false;  // a word that is already a token is emitted whole, without merging
  int add_bos_default = -1;    // 1: add BOS unless the metadata says otherwise; -1: no opinion
  bool no_bos = false;         // the family has no BOS token
};

// Looks up `tokenizer.ggml.pre`; an empty name means "default". Throws tilellm::Error naming an unknown name.
PreTokenizerInfo pre_tokenizer_info(std::string_view name);

// Splits `text` into words and returns them in GPT-2's byte alphabet (each UTF-8 byte of the word as one
// printable code point), ready for merging. Malformed UTF-8 becomes U+FFFD first, as in llama.cpp.
std::vector<std::string> pre_tokenize(PreTokenizerKind kind, std::string_view text);

// The same split as code point lengths of consecutive words (for tests and debugging).
std::vector<size_t> pre_tokenize_lengths(PreTokenizerKind kind, const std::vector<uint32_t>& cpts);

}  // namespace tilellm
