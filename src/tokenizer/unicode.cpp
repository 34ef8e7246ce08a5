// Code point lookups over the generated range table, UTF-8 coding, and the GPT-2 byte alphabet.
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace tilellm::unicode {

namespace {

uint16_t flags_by_search(uint32_t cp) {
  const CodepointRange* begin = kCodepointRanges;
  const CodepointRange* end = kCodepointRanges + kCodepointRangeCount;
  // Last row whose first code point is <= cp (row 0 starts at 0, so it always exists).
  const CodepointRange* it =
      std::upper_bound(begin, end, cp, [](uint32_t v, const CodepointRange& r) { return v < r.first; });
  return (it - 1)->flags;
}

// Text is overwhelmingly in the BMP, so its flags are expanded once into a flat table (128 KiB) and every
// lookup there is one load; the astral planes keep the binary search.
const std::array<uint16_t, 0x10000>& bmp_table() {
  static const std::array<uint16_t, 0x10000> table = [] {
    std::array<uint16_t, 0x10000> t{};
    size_t row = 0;
    for (uint32_t cp = 0; cp < 0x10000; ++cp) {
      while (row + 1 < kCodepointRangeCount && kCodepointRanges[row + 1].first <= cp) ++row;
      t[cp] = kCodepointRanges[row].flags;
    }
    return t;
  }();
  return table;
}

// GPT-2's choice of "printable" bytes: '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves; the
// remaining bytes, in increasing order, take U+0100, U+0101, ...
struct ByteAlphabet {
  std::array<uint16_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // code points 0..U+0143 cover the whole alphabet
  ByteAlphabet() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = static_cast<uint16_t>(printable ? b : 256 + n++);
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet a;
  return a;
}

}  // namespace

uint16_t flags(uint32_t cp) {
  if (cp < 0x10000) return bmp_table()[cp];
  if (cp >= 0x110000) return UNDEFINED;
  return flags_by_search(cp);
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  auto cont = [&](size_t i) { return i < n && (p[i] & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      out.push_back(b);
      i += 1;
    } else if (b < 0xC0) {
      out.push_back(kReplacement);  // stray continuation byte
      i += 1;
    } else if (b < 0xE0) {
      if (cont(i + 1)) {
        out.push_back((uint32_t(b & 0x1F) << 6) | (p[i + 1] & 0x3F));
        i += 2;
      } else {
        out.push_back(kReplacement);
        i += 1;
      }
    } else if (b < 0xF0) {
      if (cont(i + 1) && cont(i + 2)) {
        out.push_back((uint32_t(b & 0x0F) << 12) | (uint32_t(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F));
        i += 3;
      } else {
        out.push_back(kReplacement);
        i += 1;
      }
    } else if (b < 0xF8) {
      uint32_t cp = 0x110000;
      if (cont(i + 1) && cont(i + 2) && cont(i + 3)) {
        cp = (uint32_t(b & 0x07) << 18) | (uint32_t(p[i + 1] & 0x3F) << 12) |
             (uint32_t(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
      }
      if (cp < 0x110000) {
        out.push_back(cp);
        i += 4;
      } else {
        out.push_back(kReplacement);
        i += 1;
      }
    } else {
      out.push_back(kReplacement);
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t byte_to_codepoint(uint8_t b) {
  return byte_alphabet().to_cp[b];
}

int codepoint_to_byte(uint32_t cp) {
  const auto& a = byte_alphabet();
  return cp < a.to_byte.size() ? a.to_byte[cp] : -1;
}

}  // namespace tilellm::unicode
