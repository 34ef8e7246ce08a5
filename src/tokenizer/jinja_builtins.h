// The chat-template interpreter's library (jinja_builtins.cpp): jinja2's filters, tests and globals as the
// templates call them, Python's str / dict / list methods, and the attribute, item, slice, membership and
// iteration rules of jinja2's sandbox.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace tilellm::jinja {

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
// v | name(args); an unknown name is Unsupported.
Value call_filter(const std::string& name, const Value& v, const Args& args);
// v is name(args); an unknown name is Unsupported.
bool call_test(const std::string& name, const Value& v, const Args& args);
// The global function of that name (range, namespace, dict, raise_exception, ...), or undefined.
Value global(const std::string& name);

// obj.name: a dict's key (its methods items/keys/values/get first, as Python attributes come first), a
// namespace's attribute, a bound str or list method; undefined where there is none. An undefined obj is a
// TemplateError.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: list and str by index (negative from the end), dict by key, else as get_attr for a str key;
// undefined where there is none.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] of a list or str (undefined bounds: Python's defaults).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// item in container: substring, list element, dict key.
bool contains(const Value& container, const Value& item);
// What a for loop visits: list elements, dict keys, a str's characters; undefined is empty.
std::vector<Value> iterate(const Value& v);
// Python's + - * / // % ** on values.
Value arithmetic(const std::string& op, const Value& a, const Value& b);

}  // namespace tilellm::jinja
