// The chat-template interpreter's library (jinja_builtins.h), each entry as jinja2 3.x defines it.
//
// Filters: abs, attr, capitalize, count, default (d), dictsort, escape (e), first, float, indent, int, items,
// join, last, length, list, lower, map, max, min, reject, rejectattr, replace, reverse, round, safe, select,
// selectattr, sort, string, sum, title, tojson, trim, unique, upper.
// Tests: boolean, callable, defined, divisibleby, eq (==, equalto), escaped, even, false, filter, float, ge
// (>=), gt (>, greaterthan), in, integer, iterable, le (<=), lower, lt (<, lessthan), mapping, ne (!=), none,
// number, odd, sameas, sequence, string, test, true, undefined, upper.
// Methods: str: capitalize, count, endswith, find, index, isalnum, isalpha, isdigit, islower, isspace,
// isupper, join, lower, lstrip, replace, rfind, rsplit, rstrip, split, splitlines, startswith, strip, title,
// upper; dict: get, items, keys, values; list: count, index.
// Case mappings (upper, lower, title, capitalize, the case-insensitive sorts) are Python's for ASCII text;
// text with other letters is Unsupported rather than mapped differently from Python.
#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tokenizer/jinja_text.h"

namespace tilellm::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) {
  throw TemplateError(what);
}

bool ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string ascii_case(const std::string& s, const char* what, bool upper) {
  if (!ascii(s)) throw Unsupported(std::string(what) + " of non-ASCII text");
  std::string out = s;
  for (char& c : out) {
    if (upper && c >= 'a' && c <= 'z') c = char(c - 32);
    if (!upper && c >= 'A' && c <= 'Z') c = char(c + 32);
  }
  return out;
}

std::string title_case(const std::string& s) {
  if (!ascii(s)) throw Unsupported("title() of non-ASCII text");
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = prev_letter ? char(std::tolower(c)) : char(std::toupper(c));
    prev_letter = letter;
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_case(s, "capitalize()", false);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = char(out[0] - 32);
  return out;
}

const std::string& str_arg(const Value& v, const char* what) {
  if (!v.is_string()) type_error(std::string(what) + " must be str, not " + v.type_name());
  return v.as_string();
}

int64_t int_arg(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool())
    type_error(std::string(what) + " must be an integer, not " + v.type_name());
  return v.as_int();
}

// Byte offsets of each code point of s, plus s.size() at the end.
std::vector<size_t> code_points(const std::string& s) {
  std::vector<size_t> at;
  for (size_t i = 0; i < s.size();) {
    at.push_back(i);
    size_t len = 1;
    utf8_at(s, i, len);
    i += len;
  }
  at.push_back(s.size());
  return at;
}

std::vector<Value> chars(const std::string& s) {
  const std::vector<size_t> at = code_points(s);
  std::vector<Value> out;
  for (size_t k = 0; k + 1 < at.size(); ++k) out.emplace_back(s.substr(at[k], at[k + 1] - at[k]));
  return out;
}

// Python's str.splitlines(): \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029 end lines.
std::vector<std::string> splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  size_t b = 0, i = 0;
  while (i < s.size()) {
    size_t len = 1;
    const uint32_t c = utf8_at(s, i, len);
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      i += len;
      continue;
    }
    size_t e = i + len;
    if (c == '\r' && e < s.size() && s[e] == '\n') ++e;
    out.push_back(s.substr(b, (keepends ? e : i) - b));
    b = i = e;
  }
  if (b < s.size()) out.push_back(s.substr(b));
  return out;
}

// Python's str.split / rsplit.
std::vector<std::string> split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    // Runs of whitespace; leading and trailing whitespace never make empty pieces.
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) bytes
    size_t i = 0;
    while (i < s.size()) {
      size_t len = 1;
      if (is_py_space(utf8_at(s, i, len))) {
        i += len;
        continue;
      }
      const size_t b = i;
      while (i < s.size()) {
        size_t l = 1;
        if (is_py_space(utf8_at(s, i, l))) break;
        i += l;
      }
      words.emplace_back(b, i);
    }
    if (maxsplit < 0 || int64_t(words.size()) <= maxsplit + 1) {
      for (auto [b, e] : words) out.push_back(s.substr(b, e - b));
      return out;
    }
    if (!from_right) {
      for (int64_t k = 0; k < maxsplit; ++k)
        out.push_back(s.substr(words[size_t(k)].first, words[size_t(k)].second - words[size_t(k)].first));
      out.push_back(s.substr(words[size_t(maxsplit)].first));  // the rest keeps its trailing whitespace
    } else {
      const size_t first = words.size() - size_t(maxsplit);
      out.push_back(s.substr(0, words[first - 1].second));  // the rest keeps its leading whitespace
      for (size_t k = first; k < words.size(); ++k)
        out.push_back(s.substr(words[k].first, words[k].second - words[k].first));
    }
    return out;
  }
  const std::string& d = str_arg(sep, "the separator");
  if (d.empty()) type_error("empty separator");
  std::vector<size_t> hits;
  for (size_t p = s.find(d); p != std::string::npos; p = s.find(d, p + d.size())) hits.push_back(p);
  if (maxsplit >= 0 && int64_t(hits.size()) > maxsplit) {
    if (from_right) {
      hits.erase(hits.begin(), hits.end() - maxsplit);
    } else {
      hits.resize(size_t(maxsplit));
    }
  }
  size_t b = 0;
  for (size_t p : hits) {
    out.push_back(s.substr(b, p - b));
    b = p + d.size();
  }
  out.push_back(s.substr(b));
  return out;
}

Value strings(const std::vector<std::string>& v) {
  Array a;
  for (const std::string& s : v) a.emplace_back(s);
  return Value(std::move(a));
}

// Python's str.find on code point positions (start/end arguments are not supported).
int64_t cp_index(const std::string& s, size_t byte) {
  int64_t n = 0;
  for (size_t i = 0; i < byte; ++i) n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
  return n;
}

bool starts_or_ends(const std::string& s, const Value& what, bool start) {
  auto one = [&](const Value& v) {
    const std::string& p = str_arg(v, start ? "startswith() argument" : "endswith() argument");
    return start ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                 : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (what.is_array()) {
    for (const Value& v : what.as_array()) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(what);
}

Value bound(std::string name, Function f) {
  return Value::function(std::move(f), std::move(name));
}

Value str_method(const std::string& s, const std::string& name) {
  const std::string q = "str." + name;
  auto strip_fn = [s, q](bool l, bool r) {
    return bound(q, [s, l, r, q](Args& a) {
      a.expect(q, 1, {"chars"});
      const Value chars = a.get(0, "chars");
      if (chars.is_undefined() || chars.is_none()) {
        return Value(std::string(l && r ? py_strip(s) : l ? py_lstrip(s) : py_rstrip(s)));
      }
      return Value(std::string(py_strip_chars(s, str_arg(chars, "strip() argument"), l, r)));
    });
  };
  if (name == "strip") return strip_fn(true, true);
  if (name == "lstrip") return strip_fn(true, false);
  if (name == "rstrip") return strip_fn(false, true);
  if (name == "split" || name == "rsplit") {
    return bound(q, [s, q, right = name == "rsplit"](Args& a) {
      a.expect(q, 2, {"sep", "maxsplit"});
      return strings(split(s, a.get(0, "sep", Value::none()),
                           int_arg(a.get(1, "maxsplit", Value(-1)), "maxsplit"), right));
    });
  }
  if (name == "splitlines") {
    return bound(q, [s, q](Args& a) {
      a.expect(q, 1, {"keepends"});
      return strings(splitlines(s, a.get(0, "keepends", Value(false)).truthy()));
    });
  }
  if (name == "startswith" || name == "endswith") {
    return bound(q, [s, q, start = name == "startswith"](Args& a) {
      a.expect(q, 1, {});
      if (a.pos.empty()) type_error(q + "() takes at least 1 argument");
      return Value(starts_or_ends(s, a.pos[0], start));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return bound(q, [s, q, name](Args& a) {
      a.expect(q, 0, {});
      if (name == "title") return Value(title_case(s));
      if (name == "capitalize") return Value(capitalize(s));
      return Value(ascii_case(s, (name + "()").c_str(), name == "upper"));
    });
  }
  if (name == "replace") {
    return bound(q, [s, q](Args& a) {
      a.expect(q, 3, {});
      if (a.pos.size() < 2) type_error("replace() takes at least 2 arguments");
      const std::string& from = str_arg(a.pos[0], "replace() argument 1");
      const std::string& to = str_arg(a.pos[1], "replace() argument 2");
      int64_t count = a.pos.size() > 2 ? int_arg(a.pos[2], "count") : -1;
      if (from.empty()) throw Unsupported("str.replace() of an empty string");
      std::string out;
      size_t b = 0;
      for (size_t p = s.find(from); p != std::string::npos && count != 0; p = s.find(from, b), --count) {
        out += s.substr(b, p - b) + to;
        b = p + from.size();
      }
      return Value(out + s.substr(b));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    return bound(q, [s, q, name](Args& a) {
      a.expect(q, 1, {});
      if (a.pos.empty()) type_error(q + "() takes exactly one argument");
      const std::string& sub = str_arg(a.pos[0], "the argument");
      if (name == "count") {
        if (sub.empty()) return Value(*Value(s).length() + 1);
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value(n);
      }
      const size_t p = name == "rfind" ? s.rfind(sub) : s.find(sub);
      if (p == std::string::npos) {
        if (name == "index") type_error("substring not found");
        return Value(int64_t(-1));
      }
      return Value(cp_index(s, p));
    });
  }
  if (name == "join") {
    return bound(q, [s, q](Args& a) {
      a.expect(q, 1, {});
      if (a.pos.empty()) type_error("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const Value& v : iterate(a.pos[0])) {
        if (!v.is_string()) type_error("sequence item: expected str instance, " + v.type_name() + " found");
        if (!first) out += s;
        out += v.as_string();
        first = false;
      }
      return Value(out);
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper") {
    return bound(q, [s, q, name](Args& a) {
      a.expect(q, 0, {});
      if (name == "isspace") return Value(!s.empty() && py_lstrip(s).empty());
      if (!ascii(s)) throw Unsupported(q + "() of non-ASCII text");
      if (s.empty()) return Value(false);
      auto all = [&](auto pred) { return std::all_of(s.begin(), s.end(), pred); };
      if (name == "isdigit") return Value(all([](char c) { return c >= '0' && c <= '9'; }));
      if (name == "isalpha")
        return Value(all([](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }));
      if (name == "isalnum")
        return Value(all([](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }));
      const bool has_cased = std::any_of(
          s.begin(), s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
      if (name == "islower") return Value(has_cased && all([](char c) { return !(c >= 'A' && c <= 'Z'); }));
      return Value(has_cased && all([](char c) { return !(c >= 'a' && c <= 'z'); }));
    });
  }
  static const std::set<std::string> kOther = {
      "format",       "center",    "ljust",     "rjust",        "zfill",       "partition",
      "rpartition",   "swapcase",  "casefold",  "encode",       "expandtabs",  "format_map",
      "isnumeric",    "isdecimal", "istitle",   "isidentifier", "isprintable", "removeprefix",
      "removesuffix", "translate", "maketrans", "rindex",       "isascii"};
  if (kOther.count(name))
    return bound(q, [q](Args&) -> Value { throw Unsupported("the method " + q + "()"); });
  return Value();
}

Value dict_method(const Value& d, const std::string& name) {
  const std::string q = "dict." + name;
  if (name == "items" || name == "keys" || name == "values") {
    return bound(q, [d, q, name](Args& a) {
      a.expect(q, 0, {});
      Array out;
      for (const auto& [k, v] : d.as_object()) {
        if (name == "items") out.emplace_back(Array{Value(k), v}, true);
        if (name == "keys") out.emplace_back(k);
        if (name == "values") out.push_back(v);
      }
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return bound(q, [d, q](Args& a) {
      a.expect(q, 2, {});
      if (a.pos.empty()) type_error("get expected at least 1 argument");
      if (!a.pos[0].is_string()) return a.get(1, "", Value::none());
      const Value* v = d.find(a.pos[0].as_string());
      return v ? *v : a.get(1, "", Value::none());
    });
  }
  static const std::set<std::string> kOther = {"pop",   "popitem", "update",  "setdefault",
                                               "clear", "copy",    "fromkeys"};
  if (kOther.count(name))
    return bound(q, [q](Args&) -> Value { throw Unsupported("the method " + q + "()"); });
  return Value();
}

Value list_method(const Value& l, const std::string& name) {
  const std::string q = "list." + name;
  if (name == "index" || name == "count") {
    return bound(q, [l, q, name](Args& a) {
      a.expect(q, 1, {});
      if (a.pos.empty()) type_error(q + "() takes exactly one argument");
      int64_t n = 0, i = 0;
      for (const Value& v : l.as_array()) {
        if (equals(v, a.pos[0])) {
          if (name == "index") return Value(i);
          ++n;
        }
        ++i;
      }
      if (name == "index") type_error("the value is not in the list");
      return Value(n);
    });
  }
  static const std::set<std::string> kOther = {"append",  "extend", "insert", "pop", "remove",
                                               "reverse", "sort",   "clear",  "copy"};
  if (kOther.count(name))
    return bound(q, [q](Args&) -> Value { throw Unsupported("the method " + q + "()"); });
  return Value();
}

// jinja2's attribute path for map/sort/...: "a.b.0" looked up step by step, integers as indexes.
Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t b = 0;
  for (;;) {
    const size_t e = path.find('.', b);
    const std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(cur, digits ? Value(int64_t(std::stoll(part))) : Value(part));
    if (e == std::string::npos) return cur;
    b = e + 1;
  }
}

// Sort key comparison; strings compared lower-cased unless case_sensitive (jinja2's ignore_case).
bool key_less(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string()) {
    return ascii_case(a.as_string(), "a case-insensitive sort", false) <
           ascii_case(b.as_string(), "a case-insensitive sort", false);
  }
  return less(a, b);
}

Value keyed(const Value& v, const Value& attribute) {
  if (attribute.is_undefined() || attribute.is_none()) return v;
  if (attribute.is_int()) return get_item(v, attribute);
  return attribute_path(v, str_arg(attribute, "attribute"));
}

// select / reject / selectattr / rejectattr: items whose (attribute's) test result is `want`.
Value select(const Value& v, const Args& a, bool want, bool by_attr) {
  Array out;
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (a.pos.empty()) type_error("selectattr/rejectattr need an attribute");
    attr = str_arg(a.pos[0], "the attribute");
    k = 1;
  }
  std::string test;
  Args test_args;
  if (k < a.pos.size()) {
    test = str_arg(a.pos[k], "the test name");
    test_args.pos.assign(a.pos.begin() + long(k) + 1, a.pos.end());
    test_args.kw = a.kw;
  }
  for (const Value& item : iterate(v)) {
    const Value x = by_attr ? attribute_path(item, attr) : item;
    const bool r = test.empty() ? x.truthy() : call_test(test, x, test_args);
    if (r == want) out.push_back(item);
  }
  return Value(std::move(out));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value sort_keys(const Value& v) {
  if (v.is_array()) {
    Array out;
    for (const Value& x : v.as_array()) out.push_back(sort_keys(x));
    return Value(std::move(out));
  }
  if (!v.is_object() || v.is_namespace()) return v;
  Object o;
  for (const auto& [k, x] : v.as_object()) o.emplace_back(k, sort_keys(x));
  std::stable_sort(o.begin(), o.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return Value(std::move(o));
}

const std::set<std::string>& filter_names() {
  static const std::set<std::string> k = {
      "abs",     "attr",    "capitalize", "count",  "d",      "default",    "dictsort", "e",
      "escape",  "first",   "float",      "indent", "int",    "items",      "join",     "last",
      "length",  "list",    "lower",      "map",    "max",    "min",        "reject",   "rejectattr",
      "replace", "reverse", "round",      "safe",   "select", "selectattr", "sort",     "string",
      "sum",     "title",   "tojson",     "trim",   "unique", "upper"};
  return k;
}

const std::set<std::string>& test_names() {
  static const std::set<std::string> k = {
      "boolean",  "callable", "defined", "divisibleby", "eq",       "equalto",     "escaped", "even",
      "false",    "filter",   "float",   "ge",          "gt",       "greaterthan", "in",      "integer",
      "iterable", "le",       "lower",   "lt",          "lessthan", "mapping",     "ne",      "none",
      "number",   "odd",      "sameas",  "sequence",    "string",   "test",        "true",    "undefined",
      "upper",    "==",       "!=",      "<",           "<=",       ">",           ">="};
  return k;
}

}  // namespace

bool has_filter(const std::string& name) {
  return filter_names().count(name) > 0;
}
bool has_test(const std::string& name) {
  return test_names().count(name) > 0;
}

Value call_filter(const std::string& f, const Value& v, const Args& a) {
  if (!has_filter(f)) throw Unsupported("the filter '" + f + "'");
  if (f == "safe") return v;
  if (f == "string") return Value(to_str(v));
  if (f == "trim") {
    a.expect("trim", 1, {"chars"});
    const std::string s = to_str(v);
    const Value chars = a.get(0, "chars");
    if (chars.is_undefined() || chars.is_none()) return Value(std::string(py_strip(s)));
    return Value(std::string(py_strip_chars(s, str_arg(chars, "trim() argument"), true, true)));
  }
  if (f == "upper" || f == "lower") return Value(ascii_case(to_str(v), (f + "()").c_str(), f == "upper"));
  if (f == "title") return Value(title_case(to_str(v)));
  if (f == "capitalize") return Value(capitalize(to_str(v)));
  if (f == "e" || f == "escape") return Value(html_escape(to_str(v)));
  if (f == "length" || f == "count") {
    const auto n = v.length();
    if (!n) type_error("object of type '" + v.type_name() + "' has no len()");
    return Value(*n);
  }
  if (f == "default" || f == "d") {
    a.expect(f, 2, {"default_value", "boolean"});
    const bool boolean = a.get(1, "boolean", Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value(""));
    return v;
  }
  if (f == "first" || f == "last") {
    const std::vector<Value> items = iterate(v);
    if (items.empty()) return Value();
    return f == "first" ? items.front() : items.back();
  }
  if (f == "list") return Value(iterate(v));
  if (f == "items") {
    if (v.is_undefined()) return Value(Array{});
    if (!v.is_object()) type_error("items() expects a mapping, not " + v.type_name());
    Array out;
    for (const auto& [k, x] : v.as_object()) out.emplace_back(Array{Value(k), x}, true);
    return Value(std::move(out));
  }
  if (f == "dictsort") {
    a.expect(f, 3, {"case_sensitive", "by", "reverse"});
    if (!v.is_object()) type_error("dictsort() expects a mapping, not " + v.type_name());
    const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
    const std::string by = to_str(a.get(1, "by", Value("key")));
    const bool rev = a.get(2, "reverse", Value(false)).truthy();
    Array out;
    for (const auto& [k, x] : v.as_object()) out.emplace_back(Array{Value(k), x}, true);
    const size_t i = by == "value" ? 1 : 0;
    std::stable_sort(out.begin(), out.end(), [&](const Value& p, const Value& q) {
      return rev ? key_less(q.as_array()[i], p.as_array()[i], cs)
                 : key_less(p.as_array()[i], q.as_array()[i], cs);
    });
    return Value(std::move(out));
  }
  if (f == "join") {
    a.expect(f, 2, {"d", "attribute"});
    const std::string sep = to_str(a.get(0, "d", Value("")));
    const Value attr = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& x : iterate(v)) {
      if (!first) out += sep;
      out += to_str(keyed(x, attr));
      first = false;
    }
    return Value(out);
  }
  if (f == "reverse") {
    if (v.is_string()) {
      std::vector<Value> c = chars(v.as_string());
      std::string out;
      for (auto it = c.rbegin(); it != c.rend(); ++it) out += it->as_string();
      return Value(out);
    }
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (f == "replace") {
    a.expect(f, 3, {"old", "new", "count"});
    Args m;
    m.pos = {a.get(0, "old"), a.get(1, "new")};
    const Value count = a.get(2, "count");
    if (!count.is_undefined() && !count.is_none()) m.pos.push_back(count);
    return str_method(to_str(v), "replace").as_function()(m);
  }
  if (f == "indent") {
    a.expect(f, 3, {"width", "first", "blank"});
    const Value w = a.get(0, "width", Value(4));
    const std::string ind =
        w.is_string() ? w.as_string() : std::string(size_t(std::max<int64_t>(0, int_arg(w, "width"))), ' ');
    const bool first = a.get(1, "first", Value(false)).truthy(),
               blank = a.get(2, "blank", Value(false)).truthy();
    std::vector<std::string> lines = splitlines(to_str(v) + "\n", false);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += "\n" + ((blank || !lines[i].empty()) ? ind : std::string());
      out += lines[i];
    }
    return Value(first ? ind + out : out);
  }
  if (f == "int") {
    a.expect(f, 2, {"default", "base"});
    const Value def = a.get(0, "default", Value(0));
    if (v.is_number()) return Value(v.is_float() ? int64_t(std::trunc(v.as_float())) : v.as_int());
    if (v.is_string()) {
      const std::string s(py_strip(v.as_string()));
      try {
        size_t used = 0;
        const int64_t i = std::stoll(s, &used, 10);
        if (used == s.size()) return Value(i);
        const double d = std::stod(s, &used);
        if (used == s.size()) return Value(int64_t(std::trunc(d)));
      } catch (const std::exception&) {
      }
    }
    return def;
  }
  if (f == "float") {
    a.expect(f, 1, {"default"});
    if (v.is_number()) return Value(v.as_float());
    if (v.is_string()) {
      const std::string s(py_strip(v.as_string()));
      try {
        size_t used = 0;
        const double d = std::stod(s, &used);
        if (used == s.size()) return Value(d);
      } catch (const std::exception&) {
      }
    }
    return a.get(0, "default", Value(0.0));
  }
  if (f == "abs") {
    if (v.is_float()) return Value(std::abs(v.as_float()));
    if (v.is_number()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    type_error("bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (f == "round") {
    a.expect(f, 2, {"precision", "method"});
    const int64_t p = int_arg(a.get(0, "precision", Value(0)), "precision");
    const std::string method = to_str(a.get(1, "method", Value("common")));
    if (!v.is_number()) type_error("round() of " + v.type_name());
    const double scale = std::pow(10.0, double(p)), x = v.as_float() * scale;
    double r;
    if (method == "common") {
      r = std::nearbyint(x);  // Python's round: half to even
    } else if (method == "ceil") {
      r = std::ceil(x);
    } else if (method == "floor") {
      r = std::floor(x);
    } else {
      type_error("method must be 'common', 'ceil' or 'floor'");
    }
    return Value(r / scale);
  }
  if (f == "sum") {
    a.expect(f, 2, {"attribute", "start"});
    Value total = a.get(1, "start", Value(0));
    for (const Value& x : iterate(v)) total = arithmetic("+", total, keyed(x, a.get(0, "attribute")));
    return total;
  }
  if (f == "max" || f == "min") {
    a.expect(f, 2, {"case_sensitive", "attribute"});
    const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
    const Value attr = a.get(1, "attribute");
    const std::vector<Value> items = iterate(v);
    if (items.empty()) return Value();
    Value best = items[0];
    for (const Value& x : items) {
      const bool better = f == "max" ? key_less(keyed(best, attr), keyed(x, attr), cs)
                                     : key_less(keyed(x, attr), keyed(best, attr), cs);
      if (better) best = x;
    }
    return best;
  }
  if (f == "sort" || f == "unique") {
    const bool sort = f == "sort";
    if (sort) {
      a.expect(f, 3, {"reverse", "case_sensitive", "attribute"});
    } else {
      a.expect(f, 2, {"case_sensitive", "attribute"});
    }
    const bool rev = sort && a.get(0, "reverse", Value(false)).truthy();
    const bool cs = a.get(sort ? 1 : 0, "case_sensitive", Value(false)).truthy();
    const Value attr = a.get(sort ? 2 : 1, "attribute");
    std::vector<Value> items = iterate(v);
    if (sort) {
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return rev ? key_less(keyed(y, attr), keyed(x, attr), cs)
                   : key_less(keyed(x, attr), keyed(y, attr), cs);
      });
      return Value(std::move(items));
    }
    Array out;
    for (const Value& x : items) {
      const Value kx = keyed(x, attr);
      bool seen = false;
      for (const Value& y : out) {
        const Value ky = keyed(y, attr);
        seen |= (!cs && kx.is_string() && ky.is_string())
                    ? !key_less(kx, ky, false) && !key_less(ky, kx, false)
                    : equals(kx, ky);
      }
      if (!seen) out.push_back(x);
    }
    return Value(std::move(out));
  }
  if (f == "map") {
    Array out;
    const Value attr = a.kwarg("attribute");
    if (!attr.is_undefined()) {
      const Value def = a.kwarg("default");
      for (const Value& x : iterate(v)) {
        Value r = keyed(x, attr);
        out.push_back(r.is_undefined() && !def.is_undefined() ? def : r);
      }
      return Value(std::move(out));
    }
    if (a.pos.empty()) type_error("map requires a filter argument");
    const std::string name = str_arg(a.pos[0], "the filter name");
    Args rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    for (const Value& x : iterate(v)) out.push_back(call_filter(name, x, rest));
    return Value(std::move(out));
  }
  if (f == "select" || f == "reject") return select(v, a, f == "select", false);
  if (f == "selectattr" || f == "rejectattr") return select(v, a, f == "selectattr", true);
  if (f == "attr") {
    if (a.pos.empty()) type_error("attr() takes the attribute's name");
    return get_attr(v, str_arg(a.pos[0], "the attribute"));
  }
  if (f == "tojson") {
    // Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
    // sort_keys=False).
    a.expect(f, 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
    if (a.get(0, "ensure_ascii", Value(false)).truthy()) throw Unsupported("tojson(ensure_ascii=True)");
    const Value sep = a.get(2, "separators");
    if (!sep.is_undefined() && !sep.is_none()) throw Unsupported("tojson(separators=...)");
    const Value indent = a.get(1, "indent");
    int ind = -1;
    if (indent.is_number()) ind = int(std::max<int64_t>(0, indent.as_int()));
    if (indent.is_string()) throw Unsupported("tojson(indent=<a string>)");
    const Value x = a.get(3, "sort_keys", Value(false)).truthy() ? sort_keys(v) : v;
    return Value(to_json(x, ind));
  }
  throw Unsupported("the filter '" + f + "'");
}

bool call_test(const std::string& t, const Value& v, const Args& a) {
  if (!has_test(t)) throw Unsupported("the test '" + t + "'");
  auto arg = [&]() -> const Value& {
    if (a.pos.empty()) type_error("the test '" + t + "' takes an argument");
    return a.pos[0];
  };
  if (t == "defined") return !v.is_undefined();
  if (t == "undefined") return v.is_undefined();
  if (t == "none") return v.is_none();
  if (t == "boolean") return v.is_bool();
  if (t == "true") return v.is_bool() && v.as_bool();
  if (t == "false") return v.is_bool() && !v.as_bool();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_int();
  if (t == "float") return v.is_float();
  if (t == "string") return v.is_string();
  if (t == "mapping") return v.is_object();
  if (t == "iterable") return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
  if (t == "sequence") return v.is_string() || v.is_array() || v.is_object();
  if (t == "callable") return v.is_function();
  if (t == "escaped") return false;
  if (t == "filter") return has_filter(to_str(v));
  if (t == "test") return has_test(to_str(v));
  if (t == "lower" || t == "upper") {
    const std::string s = to_str(v);
    Args none;
    return str_method(s, t == "lower" ? "islower" : "isupper").as_function()(none).truthy();
  }
  if (t == "odd") return equals(arithmetic("%", v, Value(2)), Value(1));
  if (t == "even") return equals(arithmetic("%", v, Value(2)), Value(0));
  if (t == "divisibleby") return equals(arithmetic("%", v, arg()), Value(0));
  if (t == "sameas") {
    const Value& o = arg();
    if (v.is_none() || v.is_bool() || o.is_none() || o.is_bool()) return v.kind() == o.kind() && equals(v, o);
    return v.kind() == o.kind() && equals(v, o) && (v.is_int() || v.is_string());
  }
  if (t == "eq" || t == "equalto" || t == "==") return equals(v, arg());
  if (t == "ne" || t == "!=") return !equals(v, arg());
  if (t == "lt" || t == "lessthan" || t == "<") return less(v, arg());
  if (t == "le" || t == "<=") return !less(arg(), v);
  if (t == "gt" || t == "greaterthan" || t == ">") return less(arg(), v);
  if (t == "ge" || t == ">=") return !less(v, arg());
  if (t == "in") return contains(arg(), v);
  throw Unsupported("the test '" + t + "'");
}

Value global(const std::string& name) {
  if (name == "range") {
    return bound("range", [](Args& a) {
      a.expect("range", 3, {});
      if (a.pos.empty()) type_error("range expected at least 1 argument");
      int64_t start = 0, stop, step = 1;
      if (a.pos.size() == 1) {
        stop = int_arg(a.pos[0], "range()'s argument");
      } else {
        start = int_arg(a.pos[0], "range()'s start");
        stop = int_arg(a.pos[1], "range()'s stop");
        if (a.pos.size() > 2) step = int_arg(a.pos[2], "range()'s step");
      }
      if (step == 0) type_error("range() arg 3 must not be zero");
      const int64_t n = step > 0 ? std::max<int64_t>(0, (stop - start + step - 1) / step)
                                 : std::max<int64_t>(0, (start - stop - step - 1) / -step);
      if (n > 100000) type_error("range too big, maximum size for range is 100000");
      Array out;
      for (int64_t i = 0; i < n; ++i) out.emplace_back(start + i * step);
      return Value(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    return bound(name, [name](Args& a) {
      Object o;
      for (const Value& p : a.pos) {
        if (!p.is_object()) type_error(name + "() takes only a mapping positionally");
        for (const auto& [k, v] : p.as_object()) o.emplace_back(k, v);
      }
      Value out(std::move(o), name == "namespace");
      for (const auto& [k, v] : a.kw) out.set(k, v);
      return out;
    });
  }
  if (name == "raise_exception") {
    return bound(name, [](Args& a) -> Value {
      throw TemplateError(a.pos.empty() ? std::string("raise_exception() called") : to_str(a.pos[0]));
    });
  }
  if (name == "cycler" || name == "joiner" || name == "lipsum") {
    return bound(name, [name](Args&) -> Value { throw Unsupported("the global function " + name + "()"); });
  }
  return Value();
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined:
      throw TemplateError("an undefined value has no attribute '" + name + "'");
    case Value::Kind::Object: {
      if (obj.is_namespace()) {
        const Value* v = obj.find(name);
        return v ? *v : Value();
      }
      if (Value m = dict_method(obj, name); !m.is_undefined()) return m;
      const Value* v = obj.find(name);
      return v ? *v : Value();
    }
    case Value::Kind::String:
      return str_method(obj.as_string(), name);
    case Value::Kind::Array:
      return list_method(obj, name);
    default:
      return Value();
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw TemplateError("an undefined value has no item " + to_repr(key));
  if (obj.is_array() && (key.is_int() || key.is_bool())) {
    const Array& a = obj.as_array();
    int64_t i = key.as_int();
    if (i < 0) i += int64_t(a.size());
    return i >= 0 && i < int64_t(a.size()) ? a[size_t(i)] : Value();
  }
  if (obj.is_string() && (key.is_int() || key.is_bool())) {
    const std::vector<Value> c = chars(obj.as_string());
    int64_t i = key.as_int();
    if (i < 0) i += int64_t(c.size());
    return i >= 0 && i < int64_t(c.size()) ? c[size_t(i)] : Value();
  }
  if (obj.is_object() && !obj.is_namespace() && key.is_string()) {
    if (const Value* v = obj.find(key.as_string())) return *v;
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value();
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto opt = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    return int_arg(v, what);
  };
  const std::optional<int64_t> b0 = opt(start, "a slice's start"), e0 = opt(stop, "a slice's stop"),
                               s0 = opt(step, "a slice's step");
  const int64_t st = s0.value_or(1);
  if (st == 0) type_error("slice step cannot be zero");
  std::vector<Value> items;
  if (obj.is_string()) {
    items = chars(obj.as_string());
  } else if (obj.is_array()) {
    items = obj.as_array();
  } else if (obj.is_undefined()) {
    throw TemplateError("an undefined value cannot be sliced");
  } else {
    type_error("'" + obj.type_name() + "' object is not subscriptable");
  }
  const int64_t n = int64_t(items.size());
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v < 0 ? *v + n : *v;
    return st > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(b0, st > 0 ? 0 : n - 1), e = clamp(e0, st > 0 ? n : -1);
  std::vector<Value> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(items[size_t(i)]);
  if (obj.is_string()) {
    std::string s;
    for (const Value& c : out) s += c.as_string();
    return Value(s);
  }
  return Value(std::move(out));
}

bool contains(const Value& c, const Value& item) {
  switch (c.kind()) {
    case Value::Kind::String:
      if (!item.is_string())
        type_error("'in <string>' requires string as left operand, not " + item.type_name());
      return c.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::Array:
      for (const Value& v : c.as_array()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Value::Kind::Object:
      return item.is_string() && c.find(item.as_string()) != nullptr;
    case Value::Kind::Undefined:
      return false;
    default:
      type_error("argument of type '" + c.type_name() + "' is not iterable");
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::Array:
      return v.as_array();
    case Value::Kind::String:
      return chars(v.as_string());
    case Value::Kind::Object: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.as_object()) keys.emplace_back(k);
      return keys;
    }
    default:
      type_error("'" + v.type_name() + "' object is not iterable");
  }
}

// Python's integers have no bound; these have 64 bits, so a result past them is refused rather than wrapped.
int64_t checked(char op, int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflow = op == '+'   ? __builtin_add_overflow(a, b, &r)
                        : op == '-' ? __builtin_sub_overflow(a, b, &r)
                                    : __builtin_mul_overflow(a, b, &r);
  if (overflow) throw Unsupported("integer arithmetic beyond 64 bits");
  return r;
}

// The most bytes a string or list repetition may make (jinja2's sandbox bounds range() the same way).
constexpr int64_t kMaxRepeat = int64_t(1) << 26;

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined())
    throw TemplateError("an undefined value used with the operator '" + op + "'");
  if (a.is_number() && b.is_number()) {
    const bool fl = a.is_float() || b.is_float();
    if (op == "+") {
      return fl ? Value(a.as_float() + b.as_float()) : Value(checked('+', a.as_int(), b.as_int()));
    }
    if (op == "-") {
      return fl ? Value(a.as_float() - b.as_float()) : Value(checked('-', a.as_int(), b.as_int()));
    }
    if (op == "*") {
      return fl ? Value(a.as_float() * b.as_float()) : Value(checked('*', a.as_int(), b.as_int()));
    }
    if (op == "/") {
      if (b.as_float() == 0.0) type_error("division by zero");
      return Value(a.as_float() / b.as_float());
    }
    if (op == "//" || op == "%") {
      if (b.as_float() == 0.0) type_error("integer division or modulo by zero");
      if (fl) {
        const double q = std::floor(a.as_float() / b.as_float());
        return op == "//" ? Value(q) : Value(a.as_float() - q * b.as_float());
      }
      const int64_t x = a.as_int(), y = b.as_int();
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return op == "//" ? Value(q) : Value(x - q * y);
    }
    if (op == "**") {
      if (!fl && b.as_int() >= 0) {
        int64_t base = a.as_int(), e = b.as_int();
        int64_t r = 1;
        if (base == 0 || base == 1) return Value(e == 0 ? int64_t(1) : base);
        if (base == -1) return Value(e % 2 == 0 ? int64_t(1) : int64_t(-1));
        for (int64_t i = 0; i < e; ++i) r = checked('*', r, base);  // |base| >= 2: under 64 steps
        return Value(r);
      }
      return Value(std::pow(a.as_float(), b.as_float()));
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
  if (op == "+" && a.is_array() && b.is_array()) {
    Array out = a.as_array();
    out.insert(out.end(), b.as_array().begin(), b.as_array().end());
    return Value(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_array()) && (b.is_int() || b.is_bool())) {
    const int64_t unit = a.is_string() ? int64_t(a.as_string().size()) : int64_t(a.as_array().size()) * 16;
    if (b.as_int() > 0 && unit > 0 && b.as_int() > kMaxRepeat / unit)
      throw TemplateError("a repetition of more than " + std::to_string(kMaxRepeat) + " bytes");
    if (a.is_string()) {
      std::string out;
      for (int64_t i = 0; i < b.as_int(); ++i) out += a.as_string();
      return Value(out);
    }
    Array out;
    for (int64_t i = 0; i < b.as_int(); ++i) out.insert(out.end(), a.as_array().begin(), a.as_array().end());
    return Value(std::move(out));
  }
  if (op == "*" && (b.is_string() || b.is_array()) && (a.is_int() || a.is_bool()))
    return arithmetic("*", b, a);
  if (op == "%" && a.is_string()) throw Unsupported("the % string formatting operator");
  type_error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() +
             "'");
}

}  // namespace tilellm::jinja
