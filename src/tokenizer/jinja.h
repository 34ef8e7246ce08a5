// A small interpreter of the Jinja subset chat templates use (tokenizer.chat_template of the GGUF families
// this engine runs: SmolLM2, Llama 2/3.x, Gemma 3, Qwen2.5/Qwen3 with tools, Phi-3), rendering byte for byte
// what Python's jinja2 renders in Hugging Face's chat-template environment: trim_blocks and lstrip_blocks on,
// break/continue, raise_exception(), and tojson as json.dumps(ensure_ascii=False) with the keys in their
// order.
//
// Implemented: {{ }}, {# #}, whitespace control (- and +); if/elif/else, for (tuple targets, `if` filter,
// else, the loop variable: index, index0, revindex, revindex0, first, last, length, previtem, nextitem,
// cycle), set (names, tuples, namespace attributes, blocks), macro, break, continue, generation; Python's
// operators with jinja2's precedence (filters and tests bind tightest), conditional expressions, literals
// (lists, dicts, tuples), subscripts and slices; the filters, tests, globals (range, namespace, dict,
// raise_exception) and str/dict/list methods listed in jinja_builtins.cpp. Scoping as jinja2's: a for loop's
// assignments stay in the iteration that made them, namespaces cross that boundary.
//
// Everything else jinja2 has ({% include %}, {% call %}, {% filter %}, an unknown filter or method...) is
// Unsupported, naming the construct, so the caller can fall back to a built-in format; an error jinja2 would
// raise as well (raise_exception, an undefined value used, a type error) is a TemplateError.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/jinja_value.h"

namespace tilellm::jinja {

struct Node;

class Template {
 public:
  // Parses the template: TemplateError for a syntax error, Unsupported for a construct not implemented.
  explicit Template(const std::string& source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `context`'s keys as the template's variables (a dict). TemplateError or Unsupported as
  // above, for what this rendering reaches.
  std::string render(const Value& context) const;

 private:
  std::unique_ptr<std::vector<std::unique_ptr<Node>>> body_;
};

// A JSON document (keys in document order) as a template value: objects become dicts, arrays lists.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace tilellm::jinja
