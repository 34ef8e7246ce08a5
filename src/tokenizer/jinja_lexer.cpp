// The chat-template interpreter's lexer (jinja_ast.h): the template into text and tags with jinja2's
// whitespace rules, and a tag's inside into tokens.
#include <cstdint>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_text.h"

namespace tilellm::jinja {
namespace {

std::string normalize_newlines(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Where the tag whose inside starts at i ends: the index of its closing marker ("-%}", "+%}" or "%}"; "-}}"
// or "}}"), outside string literals and brackets, as jinja2's lexer finds it between tokens.
size_t find_tag_end(const std::string& s, size_t i, bool block, int line) {
  int depth = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (depth == 0) {
      if (block) {
        if ((c == '-' || c == '+') && s.compare(i + 1, 2, "%}") == 0) return i;
        if (s.compare(i, 2, "%}") == 0) return i;
      } else {
        if (c == '-' && s.compare(i + 1, 2, "}}") == 0) return i;
        if (s.compare(i, 2, "}}") == 0) return i;
      }
    }
    if (c == '\'' || c == '"') {
      ++i;
      while (i < s.size() && s[i] != c) i += s[i] == '\\' ? 2 : 1;
      if (i >= s.size()) throw TemplateError("line " + std::to_string(line) + ": unexpected end of string");
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    ++i;
  }
  throw TemplateError("line " + std::to_string(line) + ": unexpected end of template, a tag is not closed");
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A string literal's body decoded as jinja2 decodes it (Python's unicode-escape, newlines normalised).
std::string decode_string(const std::string& body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case '\n':
        break;  // a line continuation
      case '\\':
      case '\'':
      case '"':
        out += c;
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int d = i + 1 + k < body.size() ? hex_digit(body[i + 1 + k]) : -1;
          if (d < 0) {
            throw TemplateError("line " + std::to_string(line) + ": truncated \\" + c +
                                " escape in a string literal");
          }
          cp = cp * 16 + uint32_t(d);
        }
        if (cp > 0x10FFFF) throw TemplateError("line " + std::to_string(line) + ": illegal Unicode escape");
        append_utf8(out, cp);
        i += n;
        break;
      }
      case 'N':
        throw Unsupported("a named Unicode escape (\\N{...}) in a string literal");
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = uint32_t(c - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            cp = cp * 8 + uint32_t(body[++i] - '0');
          append_utf8(out, cp);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// Digits with single '_' separators between them (Python's), from s[i]; the digits without separators.
std::string digits_at(const std::string& s, size_t& i) {
  std::string d;
  while (i < s.size() &&
         (is_digit(s[i]) || (s[i] == '_' && i + 1 < s.size() && is_digit(s[i + 1]) && !d.empty()))) {
    if (s[i] != '_') d += s[i];
    ++i;
  }
  return d;
}

}  // namespace

std::vector<Piece> split_template(const std::string& source) {
  std::string src = normalize_newlines(source);
  if (!src.empty() && src.back() == '\n') src.pop_back();  // keep_trailing_newline is off
  std::vector<Piece> out;
  size_t pos = 0;
  int line = 1;
  bool line_starting = true;
  auto count_lines = [&](size_t a, size_t b) {
    for (size_t i = a; i < b; ++i) line += src[i] == '\n';
  };
  for (;;) {
    size_t start = pos;
    while ((start = src.find('{', start)) != std::string::npos) {
      if (start + 1 < src.size() && (src[start + 1] == '{' || src[start + 1] == '%' || src[start + 1] == '#'))
        break;
      ++start;
    }
    if (start == std::string::npos) {
      if (pos < src.size()) out.push_back({Piece::Kind::Text, src.substr(pos), line});
      return out;
    }
    const char kind = src[start + 1];
    const char sign =
        start + 2 < src.size() && (src[start + 2] == '-' || src[start + 2] == '+') ? src[start + 2] : 0;
    std::string text = src.substr(pos, start - pos);
    if (sign == '-') {
      text.resize(py_rstrip(text).size());
    } else if (sign != '+' && kind != '{') {
      // lstrip_blocks: a block or comment tag preceded on its line by whitespace only takes that whitespace.
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
          py_lstrip(std::string_view(text).substr(l_pos)).empty())
        text.resize(l_pos);
    }
    if (!text.empty()) out.push_back({Piece::Kind::Text, text, line});
    count_lines(pos, start);
    const size_t inner = start + 2 + (sign ? 1 : 0);
    size_t end, after;
    char end_sign = 0;
    if (kind == '#') {
      end = src.find("#}", inner);
      if (end == std::string::npos)
        throw TemplateError("line " + std::to_string(line) + ": missing end of comment tag");
      if (end > inner && (src[end - 1] == '-' || src[end - 1] == '+')) end_sign = src[end - 1];
      after = end + 2;
    } else {
      end = find_tag_end(src, inner, kind == '%', line);
      if (src[end] == '-' || src[end] == '+') end_sign = src[end++];
      after = end + 2;
      const std::string body = src.substr(inner, (end_sign ? end - 1 : end) - inner);
      if (kind == '%') {
        // {% raw %} keeps everything up to {% endraw %} as text: not implemented.
        const std::string_view b = py_strip(body);
        if (b == "raw") throw Unsupported("{% raw %}");
      }
      out.push_back({kind == '{' ? Piece::Kind::Expr : Piece::Kind::Stmt, body, line});
    }
    if (end_sign == '-') {
      while (after < src.size()) {
        size_t len = 1;
        const uint32_t cp = utf8_at(src, after, len);
        if (!is_py_space(cp)) break;
        after += len;
      }
    } else if (end_sign != '+' && kind != '{' && after < src.size() && src[after] == '\n') {
      ++after;  // trim_blocks
    }
    // A line starts after the tag when its closing match ends with a newline (trimmed or stripped).
    line_starting = after > end + 2 && src[after - 1] == '\n';
    count_lines(start, after);
    pos = after;
  }
}

std::vector<Token> tokenize(const std::string& s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  static const char* kOps2[] = {"//", "**", "==", "!=", ">=", "<="};
  while (i < s.size()) {
    size_t len = 1;
    if (is_py_space(utf8_at(s, i, len))) {
      i += len;
      continue;
    }
    const char c = s[i];
    if (is_name_start(c)) {
      const size_t b = i;
      while (i < s.size() && is_name_char(s[i])) ++i;
      out.push_back({Token::Kind::Name, s.substr(b, i - b)});
    } else if (is_digit(c)) {
      // After a '.', digits are an attribute index (jinja2 lexes no float there).
      const bool after_dot = !out.empty() && out.back().kind == Token::Kind::Op && out.back().text == ".";
      std::string num = digits_at(s, i);
      bool is_float = false;
      if (!after_dot && i + 1 < s.size() && s[i] == '.' && is_digit(s[i + 1])) {
        ++i;
        num += "." + digits_at(s, i);
        is_float = true;
      }
      if (!after_dot && i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        std::string e = "e";
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) e += s[j++];
        if (j < s.size() && is_digit(s[j])) {
          e += digits_at(s, j);
          num += e;
          i = j;
          is_float = true;
        }
      }
      Token t{is_float ? Token::Kind::Float : Token::Kind::Int, num};
      if (is_float) {
        t.f = std::stod(num);
      } else {
        try {
          t.i = std::stoll(num);
        } catch (const std::out_of_range&) {
          throw Unsupported("an integer literal beyond 64 bits");
        }
      }
      out.push_back(t);
    } else if (c == '\'' || c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != c) j += s[j] == '\\' ? 2 : 1;
      if (j >= s.size()) throw TemplateError("line " + std::to_string(line) + ": unexpected end of string");
      out.push_back({Token::Kind::String, decode_string(s.substr(i + 1, j - i - 1), line)});
      i = j + 1;
    } else {
      std::string op;
      for (const char* o : kOps2) {
        if (s.compare(i, 2, o) == 0) op = o;
      }
      if (op.empty() && std::string_view("+-/*%~[](){}.,:|=<>;").find(c) != std::string_view::npos) op = c;
      if (op.empty()) {
        throw TemplateError("line " + std::to_string(line) + ": unexpected char '" + std::string(1, c) + "'");
      }
      out.push_back({Token::Kind::Op, op});
      i += op.size();
    }
  }
  out.push_back({Token::Kind::End, ""});
  return out;
}

}  // namespace tilellm::jinja
