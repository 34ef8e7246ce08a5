// Utf8Stream: releases only whole UTF-8 characters (see tokenizer.h).
//
// Validation follows Unicode's well-formed byte sequences (Table 3-7: no overlongs, no surrogates, nothing
// above U+10FFFF). An ill-formed sequence is replaced by one U+FFFD per maximal subpart, the rule browsers
// and Python use, so a bad byte never swallows the good character after it.
#include <cstdint>

#include "tokenizer/tokenizer.h"

namespace tilellm {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Allowed range of the second byte after lead `b`, and the total length of the sequence; 0 length for bytes
// that cannot start a character.
struct Lead {
  int len;
  uint8_t lo;
  uint8_t hi;
};

Lead lead_of(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Appends the characters of s[0..] to `out`. Returns how many bytes were consumed; with `final` false, an
// incomplete but so-far valid sequence at the end is left unconsumed.
size_t drain(std::string_view s, bool final, std::string& out) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const Lead l = lead_of(p[i]);
    if (l.len == 0) {
      out += kReplacement;
      i += 1;
      continue;
    }
    // Count how many bytes after the lead are valid continuations.
    int ok = 1;
    while (ok < l.len && i + ok < n) {
      const uint8_t c = p[i + ok];
      const bool valid = ok == 1 ? (c >= l.lo && c <= l.hi) : (c >= 0x80 && c <= 0xBF);
      if (!valid) break;
      ++ok;
    }
    if (ok == l.len) {
      out.append(s.substr(i, ok));
      i += ok;
    } else if (i + ok == n && !final) {
      break;  // incomplete tail: wait for more bytes
    } else {
      out += kReplacement;  // maximal subpart of an ill-formed sequence
      i += ok;
    }
  }
  return i;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  const size_t used = drain(pending_, /*final=*/false, out);
  pending_.erase(0, used);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out;
  drain(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace tilellm
