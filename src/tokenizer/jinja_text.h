// Python's view of text that the chat-template interpreter needs: which code points are whitespace
// (str.isspace, the set str.strip() and the regex \s remove), UTF-8 stepping, and strip with or without an
// explicit set of characters.
#pragma once

#include <cstdint>
#include <string_view>

namespace tilellm::jinja {

// The code point at s[i] (UTF-8) and its byte length; a malformed byte is returned as itself, length 1.
uint32_t utf8_at(std::string_view s, size_t i, size_t& len);
// Python's str.isspace() for one code point: ASCII whitespace, U+001C..U+001F, U+0085, U+00A0, U+1680,
// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_py_space(uint32_t c);
// str.strip(), lstrip(), rstrip() without an argument.
std::string_view py_strip(std::string_view s);
std::string_view py_lstrip(std::string_view s);
std::string_view py_rstrip(std::string_view s);
// The same with an argument: the code points of `chars` are removed instead of whitespace.
std::string_view py_strip_chars(std::string_view s, std::string_view chars, bool left, bool right);

}  // namespace tilellm::jinja
