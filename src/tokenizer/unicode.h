// Unicode helpers for the tokenizers (internal to src/tokenizer/): UTF-8 decoding with the same error policy
// as llama.cpp, code point category flags for the pre-tokenizer regexes, and GPT-2's byte <->
// printable-character map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tilellm::unicode {

// Category group of a code point (exactly one of the low 8 bits) plus the White_Space property.
// The values are the ones the generated table stores (scripts/gen_unicode_tables.py).
enum Flag : uint16_t {
  UNDEFINED = 0x0001,    // Cn: unassigned
  NUMBER = 0x0002,       // \p{N}
  LETTER = 0x0004,       // \p{L}
  SEPARATOR = 0x0008,    // \p{Z}
  MARK = 0x0010,         // \p{M}
  PUNCTUATION = 0x0020,  // \p{P}
  SYMBOL = 0x0040,       // \p{S}
  CONTROL = 0x0080,      // \p{C} other than Cn
  CATEGORY_MASK = 0x00FF,
  WHITESPACE = 0x0100,  // \s (White_Space)
};

struct CodepointRange {
  uint32_t first;
  uint16_t flags;
};
extern const CodepointRange kCodepointRanges[];
extern const size_t kCodepointRangeCount;

// Flags of a code point; code points past U+10FFFF are UNDEFINED.
uint16_t flags(uint32_t cp);

inline bool is_letter(uint16_t f) {
  return f & LETTER;
}
inline bool is_number(uint16_t f) {
  return f & NUMBER;
}
inline bool is_whitespace(uint16_t f) {
  return f & WHITESPACE;
}

// Length of a UTF-8 sequence from its lead byte alone (continuation or invalid lead bytes count as 1). This
// is the unit the SPM and BPE merge loops start from; it does not validate.
inline size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

constexpr uint32_t kReplacement = 0xFFFD;

// Decodes UTF-8 into code points the way llama.cpp does before pre-tokenizing: a malformed sequence yields
// one U+FFFD and skips one byte; overlong forms and surrogates are accepted as decoded. (A 4-byte form above
// U+10FFFF, on which llama.cpp throws, also yields U+FFFD.)
std::vector<uint32_t> decode_utf8(std::string_view s);

void append_utf8(std::string& out, uint32_t cp);

// GPT-2 byte-level BPE alphabet: every byte maps to one printable code point (printable Latin-1 bytes map to
// themselves, the other 68 to U+0100 + n), so any byte string becomes a string of visible characters.
uint32_t byte_to_codepoint(uint8_t b);
// The inverse; returns -1 for a code point that is not in the alphabet.
int codepoint_to_byte(uint32_t cp);

}  // namespace tilellm::unicode
