// Python's whitespace and strip for the chat-template interpreter (jinja_text.h).
#include "tokenizer/jinja_text.h"

namespace tilellm::jinja {
namespace {

// Steps back from e (> b) to the start of the code point that ends there.
size_t prev_start(std::string_view s, size_t b, size_t e) {
  size_t start = e - 1;
  while (start > b && e - start < 4 && (static_cast<unsigned char>(s[start]) >> 6) == 0x2) --start;
  size_t len = 1;
  utf8_at(s, start, len);
  return start + len == e ? start : e - 1;
}

bool in_chars(uint32_t cp, std::string_view chars) {
  for (size_t i = 0; i < chars.size();) {
    size_t len = 1;
    if (utf8_at(chars, i, len) == cp) return true;
    i += len;
  }
  return false;
}

template <class Pred>
std::string_view strip_if(std::string_view s, bool left, bool right, Pred pred) {
  size_t b = 0, e = s.size();
  while (left && b < e) {
    size_t len = 1;
    if (!pred(utf8_at(s, b, len))) break;
    b += len;
  }
  while (right && e > b) {
    const size_t start = prev_start(s, b, e);
    size_t len = 1;
    if (!pred(utf8_at(s, start, len))) break;
    e = start;
  }
  return s.substr(b, e - b);
}

}  // namespace

uint32_t utf8_at(std::string_view s, size_t i, size_t& len) {
  const auto b = static_cast<unsigned char>(s[i]);
  len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len <= 1 || i + len > s.size()) {
    len = 1;
    return b;
  }
  uint32_t cp = len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) {
      len = 1;
      return b;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  return cp;
}

bool is_py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string_view py_strip(std::string_view s) {
  return strip_if(s, true, true, is_py_space);
}
std::string_view py_lstrip(std::string_view s) {
  return strip_if(s, true, false, is_py_space);
}
std::string_view py_rstrip(std::string_view s) {
  return strip_if(s, false, true, is_py_space);
}

std::string_view py_strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
  return strip_if(s, left, right, [&](uint32_t cp) { return in_chars(cp, chars); });
}

}  // namespace tilellm::jinja
