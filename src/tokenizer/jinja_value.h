// The values of the chat-template interpreter (jinja.h), with Python's semantics where a template can see
// them: what str() prints (None, True, 1.0, ['a', 1]), truthiness, equality across int and float, ordering,
// and json.dumps as Hugging Face's `tojson` filter calls it (ensure_ascii off, keys in insertion order).
//
// Lists and dicts are shared (a copy of a Value refers to the same list), as Python's are; dicts keep their
// insertion order; a tuple is a list that prints as one and never equals a list. A namespace() object is a
// dict whose attributes `set ns.x = ...` may assign. Undefined is what a missing variable, key or attribute
// gives: it prints as nothing and is false.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace tilellm::jinja {

class Value;
using Array = std::vector<Value>;
// A dict in insertion order (Python's), looked up linearly: chat-template dicts have a handful of keys.
using Object = std::vector<std::pair<std::string, Value>>;

// A template raised an error the reference (Python's jinja2) raises too: raise_exception(), an undefined
// value used where a value is needed, a type error. The conversation cannot be rendered by this template.
class TemplateError : public Error {
 public:
  explicit TemplateError(const std::string& what) : Error(what) {}
};

// The template uses a construct this interpreter does not implement; `construct()` names it (e.g. "filter
// 'wordwrap'", "{% include %}"). The caller falls back to a built-in format.
class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& construct)
      : Error("the chat template uses " + construct +
              ", which this engine's template interpreter does not "
              "implement"),
        construct_(construct) {}
  const std::string& construct() const { return construct_; }

 private:
  std::string construct_;
};

struct Args;
// A callable value: a macro, a bound method or a global function. Arguments come evaluated.
using Function = std::function<Value(Args&)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, Array, Object, Function };

  Value() = default;  // undefined
  static Value none() { return Value(Kind::None); }
  Value(bool b) : kind_(Kind::Bool), b_(b) {}
  Value(int v) : kind_(Kind::Int), i_(v) {}
  Value(int64_t v) : kind_(Kind::Int), i_(v) {}
  Value(double v) : kind_(Kind::Float), f_(v) {}
  Value(std::string s) : kind_(Kind::String), s_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  // A list, or (tuple) a tuple: the same to a template but for printing and equality, as in Python.
  Value(Array a, bool tuple = false)
      : kind_(Kind::Array), a_(std::make_shared<Array>(std::move(a))), tuple_(tuple) {}
  Value(Object o, bool is_namespace = false)
      : kind_(Kind::Object), o_(std::make_shared<Object>(std::move(o))), ns_(is_namespace) {}
  static Value function(Function f, std::string name) {
    Value v(Kind::Function);
    v.fn_ = std::make_shared<Function>(std::move(f));
    v.s_ = std::make_shared<std::string>(std::move(name));
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_namespace() const { return kind_ == Kind::Object && ns_; }
  bool is_tuple() const { return kind_ == Kind::Array && tuple_; }
  bool is_function() const { return kind_ == Kind::Function; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? int64_t(b_) : i_; }
  double as_float() const { return kind_ == Kind::Float ? f_ : double(as_int()); }
  const std::string& as_string() const { return *s_; }
  const Array& as_array() const { return *a_; }
  Array& as_array() { return *a_; }
  const Object& as_object() const { return *o_; }
  Object& as_object() { return *o_; }
  const Function& as_function() const { return *fn_; }
  const std::string& function_name() const { return *s_; }

  // Python's truth value.
  bool truthy() const;
  // The value of key k in a dict, or nullptr.
  const Value* find(std::string_view k) const;
  // Sets key k of a dict (or namespace), replacing an existing value in place.
  void set(const std::string& k, Value v);
  // Python's type name, for error messages ("str", "int", "list", "dict", "NoneType", "undefined").
  std::string type_name() const;
  // Python's len(), where the value has one (else nullopt).
  std::optional<int64_t> length() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0.0;
  std::shared_ptr<std::string> s_;
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<Function> fn_;
  bool ns_ = false;
  bool tuple_ = false;
};

// A call's arguments: positional, then keyword (name, value) in call order.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Argument i by position or by name, else `fallback`; an unexpected count or name is an error naming
  // `fn`.
  Value get(size_t i, std::string_view name, const Value& fallback = Value()) const;
  // The keyword argument `name`, or undefined.
  Value kwarg(std::string_view name) const { return get(pos.size(), name); }
  // Fails unless every positional argument is below n and every keyword is among names.
  void expect(std::string_view fn, size_t n, std::initializer_list<std::string_view> names) const;
};

// Python's str(v) (as {{ v }} prints it: Undefined prints nothing) and repr(v).
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
// Python's float repr: the shortest text that reads back to the same double (1.0, 0.1, 1e-05, inf).
std::string float_repr(double d);
// Python's ==, and the ordering of < (numbers with numbers, strings with strings, lists element-wise); an
// ordering Python refuses is a TemplateError.
bool equals(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);
// json.dumps(v, ensure_ascii=False, indent=indent, separators=defaults, sort_keys=False), as Hugging Face's
// chat templates' tojson filter calls it; indent < 0: on one line. Undefined and functions are
// TemplateErrors.
std::string to_json(const Value& v, int indent = -1);

}  // namespace tilellm::jinja
