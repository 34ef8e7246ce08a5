// Python's semantics of the chat-template interpreter's values (jinja_value.h).
#include "tokenizer/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_text.h"

namespace tilellm::jinja {
namespace {

// Characters Python's str.isprintable() rejects among those text can hold: controls, the separators other
// than the space (Zs, Zl, Zp) and the invisible format characters a chat message may carry.
bool python_unprintable(uint32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) || c == 0x3000 || c == 0xFEFF;
}

std::string repr_string(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    const uint32_t c = utf8_at(s, i, len);
    if (c == uint32_t(q) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (python_unprintable(c)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02x" : "\\u%04x", unsigned(c));
      out += buf;
    } else {
      out.append(s, i, len);
    }
    i += len;
  }
  return out + q;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void json(const Value& v, int indent, int depth, std::string& out) {
  auto newline = [&](int d) {
    out += '\n';
    out.append(size_t(indent) * size_t(d), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::Float: {
      const double d = v.as_float();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
      return;
    }
    case Value::Kind::String:
      json_string(v.as_string(), out);
      return;
    case Value::Kind::Array: {
      const Array& a = v.as_array();
      if (a.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json(a[i], indent, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::Object: {
      const Object& o = v.as_object();
      if (o.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json_string(o[i].first, out);
        out += ": ";
        json(o[i].second, indent, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
    case Value::Kind::Undefined:
    case Value::Kind::Function:
      throw TemplateError("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return b_;
    case Kind::Int:
      return i_ != 0;
    case Kind::Float:
      return f_ != 0.0;
    case Kind::String:
      return !s_->empty();
    case Kind::Array:
      return !a_->empty();
    case Kind::Object:
      return !o_->empty() || ns_;
    case Kind::Function:
      return true;
  }
  return false;
}

const Value* Value::find(std::string_view k) const {
  if (kind_ != Kind::Object) return nullptr;
  for (const auto& [key, v] : *o_) {
    if (key == k) return &v;
  }
  return nullptr;
}

void Value::set(const std::string& k, Value v) {
  for (auto& [key, old] : *o_) {
    if (key == k) {
      old = std::move(v);
      return;
    }
  }
  o_->emplace_back(k, std::move(v));
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::Array:
      return "list";
    case Kind::Object:
      return ns_ ? "Namespace" : "dict";
    case Kind::Function:
      return "function";
  }
  return "?";
}

std::optional<int64_t> Value::length() const {
  switch (kind_) {
    case Kind::Undefined:
      return 0;  // jinja2's Undefined has a length of 0
    case Kind::String: {
      int64_t n = 0;  // code points, as Python counts them
      for (unsigned char c : *s_) n += (c & 0xC0) != 0x80;
      return n;
    }
    case Kind::Array:
      return int64_t(a_->size());
    case Kind::Object:
      return int64_t(o_->size());
    default:
      return std::nullopt;
  }
}

Value Args::get(size_t i, std::string_view name, const Value& fallback) const {
  if (i < pos.size()) return pos[i];
  for (const auto& [k, v] : kw) {
    if (k == name) return v;
  }
  return fallback;
}

void Args::expect(std::string_view fn, size_t n, std::initializer_list<std::string_view> names) const {
  if (pos.size() > n) {
    throw TemplateError(std::string(fn) + "() takes at most " + std::to_string(n) +
                        " positional arguments (" + std::to_string(pos.size()) + " given)");
  }
  for (const auto& [k, v] : kw) {
    bool known = false;
    for (std::string_view nm : names) known |= nm == k;
    if (!known) throw TemplateError(std::string(fn) + "() got an unexpected keyword argument '" + k + "'");
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest round-trip digits, then Python's layout: positional for exponents -4 <= e < 16, else
  // d.ddde+XX; always a '.0' or exponent so the text reads as a float.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp = std::stoi(sci.substr(epos + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= -5 + 1 && exp < 16) {
    if (exp >= 0) {
      if (int(digits.size()) <= exp + 1) {
        out = digits + std::string(size_t(exp + 1 - int(digits.size())), '0') + ".0";
      } else {
        out = digits.substr(0, size_t(exp + 1)) + "." + digits.substr(size_t(exp + 1));
      }
    } else {
      out = "0.";
      out.append(size_t(-exp - 1), '0');
      out += digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += e;
  }
  if (neg) out.insert(out.begin(), '-');
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return "";
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::Int:
      return std::to_string(v.as_int());
    case Value::Kind::Float:
      return float_repr(v.as_float());
    case Value::Kind::String:
      return v.as_string();
    default:
      return to_repr(v);
  }
}

std::string to_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String:
      return repr_string(v.as_string());
    case Value::Kind::Array: {
      std::string out = v.is_tuple() ? "(" : "[";
      const Array& a = v.as_array();
      for (size_t i = 0; i < a.size(); ++i) out += (i ? ", " : "") + to_repr(a[i]);
      if (v.is_tuple() && a.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::Kind::Object: {
      const Object& o = v.as_object();
      std::string out = v.is_namespace() ? "<Namespace {" : "{";
      for (size_t i = 0; i < o.size(); ++i)
        out += (i ? ", " : "") + repr_string(o[i].first) + ": " + to_repr(o[i].second);
      return out + (v.is_namespace() ? "}>" : "}");
    }
    case Value::Kind::Function:
      return "<function " + v.function_name() + ">";
    default:
      return to_str(v);
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind() || a.is_tuple() != b.is_tuple()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      return a.as_string() == b.as_string();
    case Value::Kind::Array: {
      const Array &x = a.as_array(), &y = b.as_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::Object: {
      const Object &x = a.as_object(), &y = b.as_object();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* w = b.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    case Value::Kind::Function:
      return &a.as_function() == &b.as_function();
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string())
    return a.as_string() < b.as_string();  // code point order, as UTF-8 bytes
  if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) {
    const Array &x = a.as_array(), &y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw TemplateError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() +
                      "'");
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  json(v, indent, 0, out);
  return out;
}

}  // namespace tilellm::jinja
